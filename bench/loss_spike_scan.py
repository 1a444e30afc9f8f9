#!/usr/bin/python3
"""The loss_spike clause of the instability rule (src/worker/run_health.c, docs/metrics.md)
replayed on the training losses a sweep file recorded (/steps), to calibrate it on a
recipe's runs: per file, the runs, their steps after the warmup, the longest excursion
above RUN_SPIKE_K noise scales (the clause fires at RUN_SPIKE_STEPS), the runs it would flag
and where, and the range of the noise scale at the runs' ends. The constants are read from
src/worker/run_health.h, so the replay is the C detector's; a file needs every step logged
(train.log_every 1, the default) for the excursions to be the run's own.

usage: bench/loss_spike_scan.py FILE.h5 [FILE.h5 ...]
"""
import os
import re
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(os.path.dirname(HERE), "src", "worker", "run_health.h")


def constants():
    text = open(HEADER).read()
    got = {}
    for name in ("RUN_SPIKE_SPAN", "RUN_SPIKE_K", "RUN_SPIKE_STEPS"):
        m = re.search(r"#define\s+%s\s+([0-9.]+)" % name, text)
        if not m:
            sys.exit("loss_spike_scan.py: %s not found in %s" % (name, HEADER))
        got[name] = float(m.group(1))
    return int(got["RUN_SPIKE_SPAN"]), got["RUN_SPIKE_K"], int(got["RUN_SPIKE_STEPS"])


SPAN, K, STEPS = constants()


def replay(steps, losses, warmup):
    """As spike_observe: (first step of the flagging excursion or None, longest excursion,
    the scale at the end, steps seen after the warmup)."""
    a = 2.0 / (SPAN + 1)
    level = scale = 0.0
    seen = above = longest = 0
    first = flagged = None
    after = 0
    for step, x in zip(steps, losses):
        if step <= warmup or not np.isfinite(x):
            continue
        after += 1
        if seen == 0:
            level, scale, seen = x, 0.0, 1
            continue
        e = x - level
        if seen > SPAN and e > K * scale:
            if above == 0:
                first = step
            above += 1
            longest = max(longest, above)
            if above >= STEPS and flagged is None:
                flagged = first
            continue
        above = 0
        level += a * e
        scale += a * (abs(e) - scale)
        seen += 1
    return flagged, longest, scale, after


def scan(path):
    with h5py.File(path, "r") as f:
        runs = f["runs"][()]
        st = f["steps"][()]
    names = {int(r["index"]): r["name"].decode() for r in runs}
    warm = {int(r["index"]): int(r["train.warmup_steps"]) if "train.warmup_steps" in
            runs.dtype.names else 0 for r in runs}
    order = np.argsort(st["run"], kind="stable")
    st = st[order]
    bounds = np.flatnonzero(np.diff(st["run"])) + 1
    longest, flags, scales, total = 0, [], [], 0
    for chunk in np.split(st, bounds):
        if not len(chunk):
            continue
        idx = int(chunk["run"][0])
        chunk = chunk[np.argsort(chunk["step"], kind="stable")]
        at, run_longest, scale, after = replay(chunk["step"], chunk["loss"].astype(float),
                                               warm.get(idx, 0))
        total += after
        longest = max(longest, run_longest)
        if after > SPAN:
            scales.append(scale)
        if at is not None:
            flags.append("%s at step %d" % (names.get(idx, idx), at))
    print("%s: %d runs, %d steps after warmup, longest excursion above %g scales: %d steps "
          "(the clause fires at %d); noise scale at the end %s; would flag: %s"
          % (path, len(bounds) + 1 if len(st) else 0, total, K, longest, STEPS,
             "%.3f-%.3f (median %.3f)" % (min(scales), max(scales), float(np.median(scales)))
             if scales else "-", ", ".join(flags) if flags else "none"))


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) > 1 else 2
    for path in sys.argv[1:]:
        scan(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
