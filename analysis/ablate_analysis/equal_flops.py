"""Contrasts at equal training FLOPs, read off each run's evaluation curve.

A configuration that costs more per token (wider, deeper, more experts active) reaches a
given loss after fewer tokens but not necessarily after fewer FLOPs. The end-of-run contrast
compares runs at whatever budget each had; this one compares each pair of runs (same seed)
at common values of cumulative training FLOPs, the evaluation's training tokens times the
run's FLOPs per token (/evals tokens, /runs flops_per_token: the plan's exact count, the
page's FLOPs axis), the validation loss linearly interpolated in FLOPs between the run's
evaluations. The common values are fractions of the largest FLOP count every run of the
contrast reached (its last evaluation), kept where every run has evaluations on both sides.
Evaluation curves are on the validation split: these numbers are validation losses."""

import math

import numpy as np
import pandas as pd

from . import stats as S

# the common FLOP values, as fractions of the largest one every run of a contrast reached
FRACTIONS = (0.25, 0.5, 1.0)

COLUMNS = ["config", "baseline", "fraction", "flops", "n", "diff", "lo", "hi", "p",
           "loss_config", "loss_baseline", "end_diff", "end_lo", "end_hi", "split"]


def flops_curves(runs, evals):
    """{run index: (flops, val_loss)} of each run in `runs` (columns index,
    flops_per_token) from its `evals` rows (run, tokens, val_loss), sorted by FLOPs, finite
    points only; a run without a positive flops_per_token or any evaluation has none."""
    fpt = dict(zip(runs["index"], runs["flops_per_token"].astype(float)))
    out = {}
    ev = evals[evals["run"].isin(list(fpt))]
    for r, g in ev.groupby("run"):
        f = fpt.get(r, math.nan)
        if not (f > 0):
            continue
        x = g["tokens"].to_numpy(float) * f
        y = g["val_loss"].to_numpy(float)
        ok = np.isfinite(x) & np.isfinite(y)
        if not ok.any():
            continue
        o = np.argsort(x[ok], kind="stable")
        out[r] = (x[ok][o], y[ok][o])
    return out


def at(curve, flops):
    """The curve's loss at `flops`, linearly interpolated; NaN outside its evaluations."""
    x, y = curve
    return float(np.interp(flops, x, y, left=math.nan, right=math.nan))


def table(runs, evals, bmap, end_col="final_val_loss", fractions=FRACTIONS):
    """One row per contrast (configuration -> baseline in bmap) and common FLOP value:
    `fraction` of the largest FLOP count every paired run reached, `flops`, the pairs `n`
    (seeds both configurations have a curve for), the mean paired difference `diff`
    (configuration - baseline, validation loss at those FLOPs) with its 95% t interval and
    p (stats.paired), the two arms' mean losses there, and beside it the end-of-run paired
    difference of `end_col` over the same seeds (`end_diff`, `end_lo`, `end_hi`). `runs`:
    the valid runs (index, config, seed, flops_per_token, end_col); `evals`: their
    evaluations. A contrast with fewer than one pair, or a value before some run's first
    evaluation, has no row."""
    curves = flops_curves(runs, evals)
    by = {}
    for _, r in runs.iterrows():
        if r["index"] in curves:
            by.setdefault(r["config"], {})[r["seed"]] = r
    rows = []
    for config, base in bmap.items():
        a, b = by.get(base, {}), by.get(config, {})
        seeds = sorted(set(a) & set(b))
        if not seeds:
            continue
        pair_runs = [(a[s]["index"], b[s]["index"]) for s in seeds]
        ends = [curves[i][0][-1] for p in pair_runs for i in p]
        starts = [curves[i][0][0] for p in pair_runs for i in p]
        top, low = min(ends), max(starts)
        end_a = [float(a[s][end_col]) for s in seeds]
        end_b = [float(b[s][end_col]) for s in seeds]
        end = S.paired(end_a, end_b)
        for frac in fractions:
            f = top * frac
            if f < low:
                continue
            la = [at(curves[i], f) for i, _ in pair_runs]
            lb = [at(curves[j], f) for _, j in pair_runs]
            res = S.paired(la, lb)
            rows.append(dict(config=config, baseline=base, fraction=frac, flops=f,
                             n=res["n"], diff=res["diff"], lo=res["lo"], hi=res["hi"],
                             p=res["p"], loss_config=float(np.nanmean(lb)),
                             loss_baseline=float(np.nanmean(la)), end_diff=end["diff"],
                             end_lo=end["lo"], end_hi=end["hi"], split="validation"))
    return pd.DataFrame(rows, columns=COLUMNS)


def of_sweep(sw, bmap, valid):
    """table() for a loaded sweep: its valid runs and their evaluations."""
    need = {"index", "config", "seed", "flops_per_token", "final_val_loss"}
    if not bmap or not need <= set(valid.columns) or not len(sw.evals) or \
            "tokens" not in sw.evals:
        return pd.DataFrame(columns=COLUMNS)
    return table(valid, sw.evals[sw.evals["run"].isin(valid["index"])], bmap)
