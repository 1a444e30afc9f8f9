"""A run whose event history before its checkpoint is longer than the journal's 64 MiB
record cap: 8 layers x 32 heads of statistics at every step.
The release before the fix replayed the whole history as one journal record, which the
journal refused: the resumed run ended `done` with every row before the checkpoint missing
and params -1, exit 1 with no reason. Now rank 0 streams the history from the journal into
the resumed attempt in 64 KiB batches: the resumed sweep must equal an uninterrupted one
row for row, and its peak memory must stay far below the history's size.

Not part of the sanitizer pass (it trains ~28,000 steps twice); the same copy path runs
there through e2e_checkpoint_resume and e2e_never_lose."""
import os
import signal
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

MIB = 1 << 20
CAP = 64 * MIB
STEPS = 28000


def spec_text(corpus):
    return "\n".join([
        "description: long history",
        'data: {path: "%s", tokenizer: char, val_fraction: 0.1}' % corpus,
        "base:",
        "  preset: micro",
        "  model: {n_layer: 8, n_head: 32, d_model: 32, context: 8}",
        "  train: {lr: 1e-3, batch_size: 1, steps: %d, warmup_steps: 5, eval_every: 0," % STEPS,
        "          eval_tokens: 64, log_every: 1}",
        "  stats: {every: 1}",
        '  sample: {prompt: "A", tokens: 4}',
        "seeds: [0]",
        ""])


TIMING = {"steps": ("time",), "evals": ("time",), "samples": ("tokens_per_s",)}
KEYS = {"steps": ("step",), "evals": ("step",), "acts": ("step", "layer"),
        "attn": ("step", "layer", "head"), "samples": ("kind",)}


def tables(path):
    out = {}
    with h5py.File(path, "r") as f:
        for t in KEYS:
            a = f[t][()]
            order = np.lexsort(tuple(a[k] for k in reversed(KEYS[t])))
            a = a[order]
            out[t] = {c: a[c] for c in a.dtype.names if c not in TIMING.get(t, ())}
        r = f["runs"][()]
        out["runs"] = {c: r[c] for c in ("status", "params", "steps", "final_val_loss")}
    return out


def assert_tables_equal(a, b):
    for t in a:
        assert set(a[t]) == set(b[t]), (t, set(a[t]) ^ set(b[t]))
        for c in a[t]:
            x, y = a[t][c], b[t][c]
            assert len(x) == len(y), "/%s: %d rows vs %d" % (t, len(x), len(y))
            same = np.array_equal(x, y, equal_nan=True) if x.dtype.kind == "f" else \
                np.array_equal(x, y)
            assert same, "/%s.%s differs" % (t, c)


def run_measured(args, timeout):
    """Runs ablate in-process; returns (rc, stderr, peak RSS in MiB). The peak is the
    process's own VmHWM (reset at exec), sampled until it exits: rusage's maxrss would
    include the forked Python test process before the exec."""
    peak = 0
    with C.Job(args, tag="long") as job:
        t_end = time.monotonic() + timeout
        while job.poll() is None:
            if time.monotonic() > t_end:
                raise AssertionError("timeout: %s" % args)
            try:
                with open("/proc/%d/status" % job.proc.pid) as f:
                    for ln in f:
                        if ln.startswith("VmHWM:"):
                            peak = max(peak, int(ln.split()[1]))
            except OSError:
                pass
            time.sleep(0.02)
        rc, err = job.finish(20)
    return rc, err, peak / 1024


def test_long_history():
    corpus = C.corpus_path()
    with C.workdir("long-history") as d:
        spec = C.write(os.path.join(d, "long.yaml"), spec_text(corpus))
        ref = os.path.join(d, "ref.h5")
        t0 = time.monotonic()
        C.run(["run", spec, "-o", ref, "--view-interval", "1e6"], expect_rc=0, timeout=900,
              tag="ref")
        C.log("  reference: %.1f s, journal %.1f MiB" % (
            time.monotonic() - t0, os.path.getsize(C.journal_path(ref)) / MIB))

        out = os.path.join(d, "out.h5")
        jp = C.journal_path(out)
        # the history must pass the cap before the checkpoint: the test hook holds the run
        # at the step where the reference's journal (about as many bytes every step) passed
        # 68 MiB, so SIGUSR1 finds it there on any machine (it once polled the journal's
        # size and hoped the run had not ended before the signal)
        per_step = os.path.getsize(C.journal_path(ref)) / STEPS
        at = int((CAP + 4 * MIB) / per_step) + 1
        assert at < STEPS, "the whole history (%d steps) is under the cap" % STEPS
        hold = os.path.join(d, "hold")
        with C.Job(["run", spec, "-o", out, "--view-interval", "1e6"], tag="stop",
                   env=C.hold_env(hold, at)) as job:
            C.wait_until(lambda: C.held(hold), job, "the run held at step %d" % at, 900)
            os.kill(job.proc.pid, signal.SIGUSR1)
            rc, err = job.finish(120)
        assert rc == 3, "SIGUSR1: exit %s\n%s" % (rc, err[-2000:])
        state, _ = C.journal_state(jp)
        step = state[0]["ckpt_step"]
        history = os.path.getsize(jp)
        assert 0 < step < STEPS, "checkpoint at step %d" % step
        assert history > CAP, "history of %d bytes is under the cap" % history
        C.log("  checkpoint at step %d of %d with %.1f MiB of history" % (step, STEPS,
                                                                           history / MIB))

        rc, err, peak = run_measured(["run", spec, "-o", out, "--resume", "--view-interval",
                                      "1e6"], timeout=900)
        assert rc == 0, "resume: exit %s\n%s" % (rc, err[-3000:])
        C.log("  resumed (history copied): exit 0, peak RSS %.1f MiB" % peak)
        a, b = tables(ref), tables(out)
        assert b["runs"]["status"][0] == b"done" and b["runs"]["params"][0] > 0, b["runs"]
        assert len(b["steps"]["step"]) == STEPS, len(b["steps"]["step"])
        assert_tables_equal(a, b)
        # bounded: one 64 KiB batch at a time, not the > 64 MiB history. The yardstick is
        # the same command on the finished reference (nothing to copy, the same view to
        # build), measured in this run.
        rc, _, base = run_measured(["run", spec, "-o", ref, "--resume", "--view-interval",
                                    "1e6"], timeout=900)
        assert rc == 0
        C.log("  resume with nothing to copy: peak RSS %.1f MiB" % base)
        assert peak < base + 16, "resume peaked at %.1f MiB of RSS, %.1f MiB without the copy" % (
            peak, base)


if __name__ == "__main__":
    C.main([("long_history", test_long_history)])
