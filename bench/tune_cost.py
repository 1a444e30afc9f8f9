#!/usr/bin/python3
"""What tuning costs next to the comparison it serves (docs/benchmarks.md, "Tuning cost").

For each candidate count (--candidates, default 4 and 6 learning rates, log-spaced from
1e-3 to 1e-1), in one invocation: the untuned comparison (2 configurations x --seeds
comparison seeds at the base learning rate, no tune:) and the same spec with tune: (the
candidates x --tune-seeds tuning seeds per configuration) are run with an unmodified
`ablate run` on one process, alternating, --repeat times; the cost of a run is its
train_seconds in /runs (tokens/s taken from the same measurement, so a slow moment costs
both sides alike). Printed per candidate count: the tuning runs' cost against the untuned
comparison's, the whole tuned sweep's against it, and `ablate plan`'s figure for successive
halving (the cost model, which a step budget's sweep trains exactly: every candidate to the
first rung, the best ceil(k/eta) on, ...) to every candidate at the full budget. --eta sets
tune.eta (default: the spec's default, 3).

Targets: tuning <= 1x the comparison's own cost (in tokens trained: exact, as every run
here costs the same per token; its train_seconds ratio is printed beside it, noisy on a
shared machine); the whole tuned sweep <= 2x the untuned comparison (CPU seconds of the
`ablate run` processes, overheads included). PASS/FAIL is printed; the exit status is 0
unless something failed to run.

usage: bench/tune_cost.py [--bin build/ablate] [--corpus PATH] [--steps 200]
                          [--seeds 3] [--tune-seeds 1] [--candidates 4,6] [--repeat 2]
                          [--eta N]
"""
import argparse
import os
import resource
import re
import subprocess
import sys
import tempfile

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def corpus_path(given):
    for c in (given, os.environ.get("ABLATE_CORPUS"),
              os.path.join(REPO, "data", "tinyshakespeare.txt"),
              os.path.join(REPO, "..", "shared", "data", "tinyshakespeare.txt")):
        if c and os.path.isfile(c):
            return os.path.realpath(c)
    sys.exit("tune_cost.py: no corpus (--corpus, $ABLATE_CORPUS or data/tinyshakespeare.txt)")


def spec(corpus, steps, seeds, lrs=None, tune_seeds=1, eta=None):
    s = ("data: {path: \"%s\", tokenizer: char, val_fraction: 0.1}\n"
         "base:\n  preset: micro\n"
         "  train: {lr: 1.0e-2, steps: %d, eval_every: %d, warmup_steps: 10}\n"
         "  sample: {tokens: 0}\n"
         "variants:\n  baseline: {}\n  rope: {model.position: rope}\n"
         "seeds: %d\n" % (corpus, steps, steps // 4, seeds))
    if lrs:
        s += "tune:\n  knobs: {train.lr: [%s]}\n  seeds: [%s]\n" % (
            ", ".join("%.3g" % x for x in lrs), ", ".join(str(1000 + i) for i in range(tune_seeds)))
        if eta:
            s += "  eta: %d\n" % eta
    return s


def cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def run(binary, path, out):
    """(tuning, comparison) seconds of training and tokens trained, and the CPU seconds of
    the whole `ablate run` (setup, evaluations and the view included)."""
    t0 = cpu()
    p = subprocess.run([binary, "run", path, "-o", out, "--force"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        sys.exit("tune_cost.py: ablate run %s failed:\n%s" % (path, p.stderr[-2000:]))
    used = cpu() - t0
    with h5py.File(out, "r") as f:
        r = f["runs"][()]
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in r["name"]]
        secs = [float(x) for x in r["train_seconds"]]
        toks = [float(x) for x in r["tokens"]]
    tune = [("/tune/" in n) for n in names]
    return (sum(s for s, t in zip(secs, tune) if t), sum(s for s, t in zip(secs, tune) if not t),
            sum(x for x, t in zip(toks, tune) if t), sum(x for x, t in zip(toks, tune) if not t),
            used)


def planned(binary, path):
    p = subprocess.run([binary, "plan", path], capture_output=True, text=True)
    m = re.search(r"\), ([0-9.]+)x to ([0-9.]+)x the comparison runs'", p.stdout)
    return (float(m.group(1)), float(m.group(2))) if m else (float("nan"), float("nan"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "ablate"))
    ap.add_argument("--corpus")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--tune-seeds", type=int, default=1)
    ap.add_argument("--candidates", default="4,6")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--eta", type=int, default=None)
    a = ap.parse_args()
    corpus = corpus_path(a.corpus)
    ok = True
    print("candidates: the untuned comparison's cost (2 configurations x %d seeds) against "
          "the tuning runs' and the tuned sweep's, measured in the same invocation" % a.seeds)
    print("%-4s %-28s %-28s %-22s %s" % ("n", "tuning/cmp (train s, tokens)",
                                         "tuned sweep/cmp (CPU s)", "targets <=1x, <=2x",
                                         "plan: halving to all"))
    with tempfile.TemporaryDirectory(prefix="ablate-tune-bench-") as d:
        for n in [int(x) for x in a.candidates.split(",")]:
            lrs = [1e-3 * (100 ** (i / (n - 1))) for i in range(n)]
            plain = os.path.join(d, "plain%d.yaml" % n)
            tuned = os.path.join(d, "tuned%d.yaml" % n)
            with open(plain, "w") as f:
                f.write(spec(corpus, a.steps, a.seeds))
            with open(tuned, "w") as f:
                f.write(spec(corpus, a.steps, a.seeds, lrs, a.tune_seeds, a.eta))
            base = [0.0] * 5
            tuned_sum = [0.0] * 5
            for _ in range(a.repeat):  # alternating, so a slow moment costs both sides
                base = [x + y for x, y in zip(base, run(a.bin, plain, os.path.join(d, "p.h5")))]
                got = run(a.bin, tuned, os.path.join(d, "t.h5"))
                tuned_sum = [x + y for x, y in zip(tuned_sum, got)]
            lo, hi = planned(a.bin, tuned)
            r_secs = tuned_sum[0] / base[1]
            r_toks = tuned_sum[2] / base[3]
            r_cpu = tuned_sum[4] / base[4]
            # tokens: the tuning runs' compute exactly (every run here costs the same per
            # token); CPU seconds: the whole sweep as measured, its overheads included
            ok1, ok2 = r_toks <= 1.0, r_cpu <= 2.0
            ok &= ok1 and ok2
            print("%-4d %-28s %-28s %-22s %.2fx to %.2fx" % (
                n, "%.2fx, %.2fx" % (r_secs, r_toks), "%.2fx (%.1f s vs %.1f s)" % (
                    r_cpu, tuned_sum[4], base[4]),
                "%s, %s" % ("PASS" if ok1 else "FAIL", "PASS" if ok2 else "FAIL"), lo, hi))
    print("targets: tuning <= 1x the comparison's cost; the tuned sweep <= 2x the untuned "
          "comparison: %s" % ("PASS" if ok else "FAIL"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
