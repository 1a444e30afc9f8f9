"""ablate-report on a calibrated fixed-time sweep: a
"Calibration (fixed time)" section after the per-configuration table with, per
configuration, its trials, median tokens/s with min-max and spread, the 1-minute load
averages its trials saw, host, BLAS core and the step budget its runs got (and the tokens
that means), each equal to the values recomputed here from the file's /calibration and /runs
with h5py; calibration.csv holds them. A sweep without train.calibrate has no such section."""
import os
import subprocess
import sys

import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402
import ablate_analysis as aa  # noqa: E402

FILES = {}
PY = os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3"
K = 2
SECONDS = 0.3
BATCH = 8
CONTEXT = 16  # the micro preset
SECTION = "### Calibration (fixed time)"


def report(out, d):
    p = subprocess.run([PY, W.REPORT, out, "-o", d], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return open(os.path.join(d, "report.md")).read()


def spec_text(corpus):
    return "\n".join([
        "description: calibrated fixed time, reported",
        'data: {path: "%s", tokenizer: char, val_fraction: 0.1}' % corpus,
        "base:",
        "  preset: micro",
        "  train: {lr: 1e-2, batch_size: %d, seconds: %g, calibrate: %d, calibrate_steps: 20, "
        "warmup_steps: 5, eval_every: 0, eval_tokens: 512}" % (BATCH, SECONDS, K),
        "  stats: {every: 0}",
        '  sample: {prompt: "ROMEO:", tokens: 8}',
        "grid:",
        "  model.n_head: [1, 2]",
        "seeds: [0, 1]",
    ]) + "\n"


def dec(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def ints(v):
    return format(int(round(v)), ",")


def rng(lo, hi, f):
    return f(lo) if lo == hi else "%s-%s" % (f(lo), f(hi))


def test_calibration_section():
    import h5py
    d = FILES["dir"]
    out = os.path.join(d, "cal.h5")
    C.run(["run", C.write(os.path.join(d, "cal.yaml"), spec_text(C.corpus_path())), "-o", out],
          expect_rc=0, tag="cal")
    md = report(out, os.path.join(d, "rep"))
    assert SECTION in md, md[-3000:]
    # after the per-configuration table
    assert md.index("## Per configuration") < md.index(SECTION), md
    section = md[md.index(SECTION):].split("\n## ")[0].split("\n### ", 1)[0]
    with h5py.File(out, "r") as f:
        cal = f["calibration"][:]
        runs = f["runs"][:]
    by_cfg = {}
    for row in cal:
        by_cfg.setdefault(dec(row["configuration"]), []).append(row)
    assert len(by_cfg) == 2, sorted(by_cfg)
    worst = 0.0
    for cfg, rows in by_cfg.items():
        tps = sorted(float(r["tokens_per_s"]) for r in rows)
        median = (tps[(len(tps) - 1) // 2] + tps[len(tps) // 2]) / 2
        spread = tps[-1] / tps[0] - 1
        worst = max(worst, spread)
        loads = sorted(float(r["load1"]) for r in rows)
        assert all(v == v for v in loads), loads  # /proc/loadavg is there on Linux
        hosts = " ".join(sorted({dec(r["host"]) for r in rows}))
        cores = " ".join(sorted({dec(r["blas_core"]) for r in rows}))
        group = rows[0]["group"]
        steps = sorted({int(r["calibrated_steps"]) for r in runs if r["group"] == group})
        assert steps and steps[0] > 0, (cfg, steps)
        want = [cfg, "%d" % len(rows), ints(median), rng(tps[0], tps[-1], ints),
                "%.1f%%" % (100 * spread), rng(loads[0], loads[-1], lambda v: "%.2f" % v),
                hosts, cores, rng(steps[0], steps[-1], ints),
                rng(steps[0] * BATCH * CONTEXT, steps[-1] * BATCH * CONTEXT, ints)]
        line = [l for l in section.splitlines() if l.startswith("| %s |" % cfg)]
        assert line, (cfg, section)
        cells = [c.strip() for c in line[0].strip("|").split("|")]
        assert cells == want, (cells, want)
    assert "trained for the tokens its own measured throughput would process in " \
           "train.seconds = %g s on an idle core" % SECONDS in section, section
    assert "varied by up to %.1f%%" % (100 * worst) in section, (worst, section)
    csv = pd.read_csv(os.path.join(d, "rep", "calibration.csv"))
    assert sorted(csv["config"]) == sorted(by_cfg) and (csv["trials"] == K).all(), csv
    assert len(aa.load(out).calibration) == 2 * K


def test_uncalibrated_has_none():
    d = FILES["dir"]
    spec = C.micro_spec(C.corpus_path(), steps=10, seeds=(0,),
                        variants="  baseline: {}\n  h2: {model.n_head: 2}\n")
    out = os.path.join(d, "plain.h5")
    C.run(["run", C.write(os.path.join(d, "plain.yaml"), spec), "-o", out], expect_rc=0,
          tag="plain")
    md = report(out, os.path.join(d, "plain-rep"))
    assert SECTION not in md and "## Per configuration" in md
    assert not os.path.exists(os.path.join(d, "plain-rep", "calibration.csv"))
    assert aa.load(out).calibration is None


if __name__ == "__main__":
    W.main_in_workdir("report-calibration", FILES,
                      [("calibration_section", test_calibration_section),
                       ("uncalibrated_has_none", test_uncalibrated_has_none)])
