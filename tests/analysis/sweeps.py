"""Real small sweep files for the analysis tests, made with the ablate binary (ABLATE_BIN)
through tests/e2e/common.py. Each builder takes a directory and returns the file's path.
Sizes are kept to a few seconds of training on one process. Three of them are also
committed files (FIXTURES, fixture()) for the tests that only read one."""

import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "analysis"))
import common as C  # noqa: E402,F401

def main_in_workdir(tag, files, tests):
    """Runs the tests (name, fn) that common.select chooses from the command line with
    common.main, all in one temp dir given to them as files["dir"] (removed when they
    pass, kept when one fails); exits as common.main does."""
    chosen = C.select([name for name, _ in tests])
    with C.workdir(tag) as d:
        files["dir"] = d
        try:
            C.main([t for t in tests if t[0] in chosen], argv=[])
        except SystemExit as e:
            if e.code:
                raise
    sys.exit(0)


REPORT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "analysis", "ablate-report")

# baseline and two one-knob variants that train, one that diverges, one that fails
VARIANTS = ("  baseline: {}\n"
            "  gelu: {model.activation: gelu}\n"
            "  ctx8: {model.context: 8}\n"
            "  explode: {train.lr: 1.0e+30, train.grad_clip: 0, train.warmup_steps: 0}\n"
            "  huge: {model.d_model: 65536, model.n_head: 64}\n")
SEEDS = (0, 1, 2)


def variants_sweep(d):
    """5 variants x 3 seeds, 40 steps: 9 runs done, 3 diverged, 3 failed."""
    spec = C.write(os.path.join(d, "variants.yaml"),
                   C.micro_spec(C.corpus_path(), steps=40, seeds=SEEDS, variants=VARIANTS,
                                eval_every=10, stats_every=10))
    out = os.path.join(d, "variants.h5")
    # past the planner's memory limit, so that `huge` fails in the run (cannot allocate)
    C.run(["run", spec, "-o", out, "--force", "--max-run-memory", "1000000T"], expect_rc=1,
          tag="variants")
    return out


def one_seed_sweep(d):
    """Two variants, no baseline, one seed; one-value grid axes on train.lr, whose label
    `lr` is also a /steps column, and on train.steps, whose label `steps` is also a /runs
    column (the view then stores the axis as /runs `steps` and the steps taken as
    `end.steps`)."""
    spec = C.write(os.path.join(d, "one.yaml"),
                   C.micro_spec(C.corpus_path(), steps=30, seeds=(5,),
                                variants="  relu2: {model.activation: relu2}\n"
                                         "  gelu: {model.activation: gelu}\n",
                                grid="  train.lr: [2e-2]\n  train.steps: [30]\n"))
    out = os.path.join(d, "one.h5")
    C.run(["run", spec, "-o", out, "--force"], expect_rc=0, tag="one-seed")
    return out


def grid_time_sweep(d, seconds=0.25):
    """A fixed-time 2 x 2 grid (n_head x activation), 2 seeds; the base writes both axis
    values, so the base configuration n_head=4/activation=relu is the baseline."""
    spec = C.write(os.path.join(d, "grid.yaml"), "\n".join([
        "description: fixed-time grid",
        'data: {path: "%s", tokenizer: char, val_fraction: 0.1}' % C.corpus_path(),
        "base:",
        "  preset: micro",
        "  model: {n_head: 4, activation: relu}",
        "  train: {lr: 1e-2, batch_size: 8, seconds: %g, warmup_steps: 5, eval_every: 10, "
        "eval_tokens: 512}" % seconds,
        "  stats: {every: 10}",
        '  sample: {prompt: "ROMEO:", tokens: 32}',
        "grid:",
        "  model.n_head: [2, 4]",
        "  model.activation: [relu, gelu]",
        "seeds: [0, 1]", ""]))
    out = os.path.join(d, "grid.h5")
    C.run(["run", spec, "-o", out, "--force"], expect_rc=0, tag="grid")
    return out


def page_sweep(d):
    """A 2 x 2 grid (activation x lr), 2 seeds, 40 steps; the base writes activation (relu)
    and lr (1e-2), so activation=relu/lr=1e-2 is the baseline of three contrasts. Grid axes
    for the page's filter and group-by."""
    spec = C.write(os.path.join(d, "page.yaml"),
                   C.micro_spec(C.corpus_path(), steps=40, seeds=(0, 1),
                                grid="  model.activation: [relu, gelu]\n"
                                     "  train.lr: [1e-2, 3e-3]\n",
                                eval_every=10, stats_every=10,
                                extra_base="model: {activation: relu}\n"))
    out = os.path.join(d, "page.h5")
    C.run(["run", spec, "-o", out, "--force", "--set", "sample.tokens=32"], expect_rc=0,
          tag="page")
    return out


def hostile_sweep(d):
    """tests/e2e/test_hostile_text.py's sweep: a description, run
    names (grid values of sample.prompt) and samples full of "<!--", "<script>", "</script>",
    "&", "|", "$...$" and ESC and C1 control characters; 3 configurations x 2 seeds, 10 steps."""
    import test_hostile_text as H
    spec, _ = H.hostile_spec(d)
    out = os.path.join(d, "hostile.h5")
    C.run(["run", spec, "-o", out, "--force"], expect_rc=0, tag="hostile")
    return out


def stopped_sweep(d):
    """A sweep stopped by SIGTERM after its first run: done, interrupted and pending runs."""
    spec = C.write(os.path.join(d, "stop.yaml"),
                   C.micro_spec(C.corpus_path(), steps=1500, seeds=SEEDS,
                                variants="  baseline: {}\n  gelu: {model.activation: gelu}\n",
                                eval_every=250, stats_every=250))
    out = os.path.join(d, "stop.h5")
    job = C.Job(["run", spec, "-o", out, "--force", "--view-interval", "0.01"], tag="stop")
    try:
        t_end = time.monotonic() + 120
        while len(C.reported_finished(job.stderr())) < 1:
            if job.poll() is not None or time.monotonic() > t_end:
                raise AssertionError("sweep ended or stalled before a run was done:\n"
                                     + job.stderr()[-2000:])
            time.sleep(0.05)
        job.signal_leader_group(signal.SIGTERM)
        job.wait(30)
        job.reap(20)
    finally:
        job.close()
        job.cleanup_files()
    return out


# The sweeps committed as files (tests/fixtures/analysis/NAME.h5, written by
# tests/analysis/make_fixtures.py): tests that only read a sweep take fixture(NAME, d)
# instead of building it, so a case alone (CTest runs each in its own process) starts at once.
FIXTURES = {"variants": variants_sweep, "page": page_sweep, "hostile": hostile_sweep}
FIXTURE_DIR = os.path.join(os.path.dirname(HERE), "fixtures", "analysis")


def fixture(name, d):
    """A copy in d of the committed sweep file NAME (FIXTURES): the test may change it."""
    import shutil
    out = os.path.join(d, "fixture-%s.h5" % name)
    if not os.path.exists(out):
        shutil.copy(os.path.join(FIXTURE_DIR, name + ".h5"), out)
    return out


def report(path, outdir, *extra):
    """Runs analysis/ablate-report; returns (rc, stderr)."""
    import subprocess
    py = os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3"
    p = subprocess.run([py, REPORT, path, "-o", outdir] + list(extra), capture_output=True,
                       text=True, timeout=300)
    return p.returncode, p.stderr
