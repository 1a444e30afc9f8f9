"""Effects against scale: a sweep with a `ladder:` (docs/spec.md) trains every configuration
at several model sizes (rungs). For each contrast (a configuration against its baseline at
the same rung) this gives the paired-by-seed difference at each rung, a weighted
least-squares fit of the difference against log10(training FLOPs) and a verdict on the
trend (docs/analysis.md, "Effects against scale", has the rule).

The fit takes each rung's standard error as known (weights 1/se^2, the usual fit of
measurements with errors): slope and intercept are the generalized least-squares solution
(X' W X)^-1 X' W y and their covariance is (X' W X)^-1. Every fitted quantity is a linear
combination sum g_i y_i of the rungs' differences, with variance sum g_i^2 se_i^2; each
se_i^2 being estimated from a few seeds (df_i degrees of freedom), its interval uses the
t quantile on the Welch-Satterthwaite degrees of freedom
(sum g_i^2 se_i^2)^2 / sum (g_i^2 se_i^2)^2 / df_i (the normal quantile without df).
chi2 (sum of weighted squared residuals, rungs - 2 degrees of freedom) says how well a line
describes the rungs.
"""

import math

import numpy as np
import pandas as pd
from scipy import stats as st

from . import analyze as A
from . import stats as S

#  Where a trend is extrapolated to: this many times the largest rung's training FLOPs.
EXTRAPOLATE_FACTOR = 10.0


def combination_df(g, se, df):
    """Welch-Satterthwaite degrees of freedom of sum g_i y_i whose y_i have standard errors
    se_i estimated on df_i degrees of freedom; inf when df is None (se known)."""
    if df is None:
        return math.inf
    v = (np.asarray(g, float) * np.asarray(se, float)) ** 2
    den = (v ** 2 / np.asarray(df, float)).sum()
    return float(v.sum() ** 2 / den) if den > 0 else math.inf


def _quantile(level, df):
    return st.norm.ppf(0.5 + level / 2) if not math.isfinite(df) else \
        st.t.ppf(0.5 + level / 2, df)


def wls(x, y, se, level=S.LEVEL, df=None):
    """Weighted least squares of y on x with weights 1/se^2 (se known). Returns a dict:
    n, slope, intercept, se_slope, se_intercept, cov (slope, intercept), df_slope (the
    slope's Welch-Satterthwaite degrees of freedom from the rungs' df; inf without df),
    lo, hi (the slope's interval at level: t on df_slope, normal without df), x_mean and
    y_mean (weighted), chi2 and dof, and for predict() the points kept (xs, ses, dfs). NaN
    entries when fewer than two points with finite se > 0 and distinct x."""
    x, y, se = (np.asarray(v, dtype=float) for v in (x, y, se))
    d = np.full(len(x), np.inf) if df is None else np.asarray(df, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(se) & (se > 0) & (d > 0)
    x, y, se, d = x[ok], y[ok], se[ok], d[ok]
    nan = math.nan
    out = dict(n=int(len(x)), slope=nan, intercept=nan, se_slope=nan, se_intercept=nan,
               cov=nan, df_slope=nan, lo=nan, hi=nan, x_mean=nan, y_mean=nan, chi2=nan,
               dof=len(x) - 2, xs=x, ses=se, dfs=None if df is None else d)
    if len(x) < 2:
        return out
    w = 1.0 / se ** 2
    sw = w.sum()
    xm, ym = (w * x).sum() / sw, (w * y).sum() / sw
    sxx = (w * (x - xm) ** 2).sum()
    if not sxx > 0:
        return out
    slope = (w * (x - xm) * (y - ym)).sum() / sxx
    intercept = ym - slope * xm
    se_slope = math.sqrt(1.0 / sxx)
    df_slope = combination_df(w * (x - xm) / sxx, se, out["dfs"])
    h = _quantile(level, df_slope) * se_slope
    out.update(slope=float(slope), intercept=float(intercept), se_slope=se_slope,
               se_intercept=math.sqrt(1.0 / sw + xm * xm / sxx), cov=float(-xm / sxx),
               df_slope=df_slope, lo=float(slope - h), hi=float(slope + h),
               x_mean=float(xm), y_mean=float(ym),
               chi2=float((w * (y - intercept - slope * x) ** 2).sum()))
    return out


def predict(fit, x0, level=S.LEVEL):
    """The fitted value at x0 with its interval (value, lo, hi), from the fit's
    covariance: var = var(intercept) + x0^2 var(slope) + 2 x0 cov, t on its
    Welch-Satterthwaite degrees of freedom when the fit had the rungs' df."""
    if not math.isfinite(fit["slope"]):
        return math.nan, math.nan, math.nan
    v = fit["intercept"] + fit["slope"] * x0
    var = fit["se_intercept"] ** 2 + x0 * x0 * fit["se_slope"] ** 2 + 2 * x0 * fit["cov"]
    x, se = fit["xs"], fit["ses"]
    w = 1.0 / se ** 2
    g = w / w.sum() + (x0 - fit["x_mean"]) * w * (x - fit["x_mean"]) * fit["se_slope"] ** 2
    h = _quantile(level, combination_df(g, se, fit["dfs"])) * math.sqrt(max(var, 0.0))
    return float(v), float(v - h), float(v + h)


def trend_verdict(lo, hi, fit, x_min, x_max):
    """(verdict, why) for per-rung intervals lo, hi (in rung order) and the fit:
    changes sign: some rung's interval lies wholly below 0 and another's wholly above 0,
      or the slope's interval excludes 0 and the fitted line crosses 0 inside the ladder;
    stable: otherwise, when the slope's interval includes 0;
    grows / shrinks: the slope's interval excludes 0 and the fitted difference keeps one
      sign over the ladder: grows when the slope has that sign (the effect's size
      increases with compute), shrinks when it has the other."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    if (hi < 0).any() and (lo > 0).any():
        return "changes sign", "rung intervals on both sides of 0"
    if not math.isfinite(fit["slope"]):
        return "—", "fewer than two rungs with an interval"
    if fit["lo"] <= 0 <= fit["hi"]:
        return "stable", "slope interval includes 0"
    a = fit["intercept"] + fit["slope"] * x_min
    b = fit["intercept"] + fit["slope"] * x_max
    if a * b < 0:
        return "changes sign", "the fit crosses 0 inside the ladder"
    effect = b if b != 0 else a
    if effect * fit["slope"] > 0:
        return "grows", "slope has the effect's sign"
    return "shrinks", "slope has the sign opposite to the effect's"


def ladder_knobs(spec_text):
    """The knobs of the spec's `ladder.rungs` in file order, or [] (no ladder, or no
    PyYAML to read the stored spec)."""
    try:
        import yaml
        spec = yaml.safe_load(spec_text)
    except Exception:
        return []
    lad = spec.get("ladder") if isinstance(spec, dict) else None
    rungs = lad.get("rungs") if isinstance(lad, dict) else None
    if not isinstance(rungs, dict):
        return []
    return [k[5:] if k.startswith("base.") else k for k in rungs]


def ladder_columns(sw):
    """The /runs axis columns of the ladder's knobs (a run's rung), or [] when the sweep
    has no ladder."""
    cols = []
    for k in ladder_knobs(sw.spec):
        short = k.rpartition(".")[2]
        col = sw.axis_columns.get(short) or sw.axis_columns.get(k)
        if col is None:
            return []
        cols.append(col)
    return cols


def ladder_effects(sw, bmap, col="final_val_loss", level=S.LEVEL):
    """(rungs, fits) for a ladder sweep and its baseline map (configuration -> baseline
    at the same rung), or None without a ladder. rungs: one row per contrast and rung
    (contrast, configuration, baseline, rung, rung_values, flops, log10_flops, n, method,
    diff, se, df, lo, hi); fits: one row per contrast (n_rungs, slope, se_slope, df_slope,
    slope_lo, slope_hi, chi2, dof, verdict, why, and the fitted difference at the smallest and
    largest rung and, as extrapolation, at EXTRAPOLATE_FACTOR times the largest rung's
    FLOPs). A contrast is a configuration's variant and its other axes' values; its rungs
    are ordered by training FLOPs (the mean over both arms' valid runs of FLOPs a token x
    tokens)."""
    lad = ladder_columns(sw)
    if not lad:
        return None
    df = A.valid_runs(sw)
    runs = sw.runs.drop_duplicates("config").set_index("config")
    others = [a for a in sw.axes if a not in lad]
    rows = []
    for config, base in bmap.items():
        if config not in runs.index or base not in runs.index:
            continue
        rc, rb = runs.loc[config], runs.loc[base]
        if any(rc[a] != rb[a] for a in lad):  # a baseline at another rung: not a ladder contrast
            continue
        a, b = A._by_seed(df, base, col), A._by_seed(df, config, col)
        a = {s: v for s, v in a.items() if np.isfinite(v)}
        b = {s: v for s, v in b.items() if np.isfinite(v)}
        if not a or not b:
            continue
        res = S.contrast(a, b, level)
        both = df[df["config"].isin([config, base])]
        flops = float((both["flops_per_token"].astype(float) *
                       both["tokens"].astype(float)).mean())
        label = "/".join([rc["variant"] or config] + ["%s=%s" % (A.label_of(o), rc[o])
                                                      for o in others])
        rows.append(dict(contrast="%s vs %s" % (label, rb["variant"] or base),
                         configuration=config, baseline=base,
                         rung_values=" ".join("%s=%s" % (A.label_of(c), rc[c]) for c in lad),
                         flops=flops, log10_flops=math.log10(flops) if flops > 0 else math.nan,
                         n=res["n"], method=res["method"], diff=res["diff"], se=res["se"],
                         df=res["df"], lo=res["lo"], hi=res["hi"]))
    rcols = ["contrast", "configuration", "baseline", "rung", "rung_values", "flops",
             "log10_flops", "n", "method", "diff", "se", "df", "lo", "hi"]
    fcols = ["contrast", "n_rungs", "slope", "se_slope", "df_slope", "slope_lo", "slope_hi",
             "chi2",
             "dof", "verdict", "why", "fit_smallest", "fit_smallest_lo", "fit_smallest_hi",
             "fit_largest", "fit_largest_lo", "fit_largest_hi", "extrapolated_flops",
             "extrapolated", "extrapolated_lo", "extrapolated_hi"]
    if not rows:
        return pd.DataFrame(columns=rcols), pd.DataFrame(columns=fcols)
    r = pd.DataFrame(rows).sort_values(["contrast", "flops"], kind="stable")
    r["rung"] = r.groupby("contrast").cumcount() + 1
    r = r[rcols].reset_index(drop=True)
    fits = []
    for name, g in r.groupby("contrast", sort=False):
        fit = wls(g["log10_flops"], g["diff"], g["se"], level, df=g["df"])
        x_min, x_max = float(g["log10_flops"].min()), float(g["log10_flops"].max())
        verdict, why = trend_verdict(g["lo"], g["hi"], fit, x_min, x_max)
        x_ex = x_max + math.log10(EXTRAPOLATE_FACTOR)
        s, l_, u = predict(fit, x_min, level)
        e, el, eu = predict(fit, x_max, level)
        x, xl, xu = predict(fit, x_ex, level)
        fits.append(dict(contrast=name, n_rungs=fit["n"], slope=fit["slope"],
                         se_slope=fit["se_slope"], df_slope=fit["df_slope"],
                         slope_lo=fit["lo"], slope_hi=fit["hi"],
                         chi2=fit["chi2"], dof=fit["dof"], verdict=verdict, why=why,
                         fit_smallest=s, fit_smallest_lo=l_, fit_smallest_hi=u,
                         fit_largest=e, fit_largest_lo=el, fit_largest_hi=eu,
                         extrapolated_flops=10 ** x_ex, extrapolated=x, extrapolated_lo=xl,
                         extrapolated_hi=xu))
    return r, pd.DataFrame(fits)[fcols]
