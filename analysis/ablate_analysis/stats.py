"""Statistics over seeds: t confidence intervals, paired and Welch contrasts, Holm's
correction, and power (the smallest difference the current seeds resolve, and the seeds a
difference needs).

Conventions: two-sided tests; a contrast is `b - a` (for losses, negative = b better);
intervals are t-based. Power is computed exactly on the noncentral t distribution
(scipy.stats.nct): the test statistic of a true difference delta is noncentral t with the
test's degrees of freedom and noncentrality delta / se, and the sample standard deviations
stand in for the true ones (plug-in). For Welch's test the Welch-Satterthwaite degrees of
freedom are used in the same way (the usual approximation). docs/analysis.md has the
formulas.
"""

import math

import numpy as np
from scipy import optimize
from scipy import stats as st

LEVEL = 0.95
ALPHA = 0.05
POWER = 0.80
MAX_SEEDS = 100000


def _clean(x):
    x = np.asarray(x, dtype=float)
    return x[np.isfinite(x)]


def mean_ci(x, level=LEVEL):
    """n, mean, sd (n-1), se, df and the t interval (lo, hi) of the finite values of x.
    With n < 2 sd, se and the interval are NaN."""
    x = _clean(x)
    n = len(x)
    out = dict(n=n, mean=float(np.mean(x)) if n else math.nan, sd=math.nan, se=math.nan,
               df=n - 1 if n > 1 else math.nan, lo=math.nan, hi=math.nan)
    if n >= 2:
        sd = float(np.std(x, ddof=1))
        se = sd / math.sqrt(n)
        h = st.t.ppf(0.5 + level / 2, n - 1) * se
        out.update(sd=sd, se=se, lo=out["mean"] - h, hi=out["mean"] + h)
    return out


def welch_df(va, na, vb, nb):
    """Welch-Satterthwaite degrees of freedom for sample variances va, vb of sizes na, nb."""
    qa, qb = va / na, vb / nb
    den = qa * qa / (na - 1) + qb * qb / (nb - 1)
    if den == 0:
        return float(na + nb - 2)
    return (qa + qb) ** 2 / den


def _finish(res, level):
    """Adds t, p and the interval to a contrast with diff, se and df."""
    d, se, df = res["diff"], res["se"], res["df"]
    res.update(t=math.nan, p=math.nan, lo=math.nan, hi=math.nan)
    if not (df > 0 and se > 0 and math.isfinite(se)):
        return res
    h = st.t.ppf(0.5 + level / 2, df) * se
    t = d / se
    res.update(t=t, p=float(2 * st.t.sf(abs(t), df)), lo=d - h, hi=d + h)
    return res


def paired(a, b, level=LEVEL):
    """Paired contrast of equal-length arrays (a[i], b[i] share a seed): mean of b - a with
    its t interval, t, two-sided p (as scipy.stats.ttest_rel(b, a)); n = pairs."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    d = b - a
    d = d[np.isfinite(d)]
    n = len(d)
    res = dict(method="paired", n=n, na=n, nb=n, diff=float(np.mean(d)) if n else math.nan,
               se=math.nan, df=n - 1 if n > 1 else math.nan, sd_diff=math.nan,
               sd_a=math.nan, sd_b=math.nan)
    if n >= 2:
        sd = float(np.std(d, ddof=1))
        res.update(sd_diff=sd, se=sd / math.sqrt(n))
    return _finish(res, level)


def welch(a, b, level=LEVEL):
    """Welch contrast of independent samples: mean(b) - mean(a) with its t interval on the
    Welch-Satterthwaite df, t and two-sided p (as scipy.stats.ttest_ind(b, a,
    equal_var=False))."""
    a, b = _clean(a), _clean(b)
    na, nb = len(a), len(b)
    res = dict(method="welch", n=min(na, nb), na=na, nb=nb,
               diff=float(np.mean(b) - np.mean(a)) if na and nb else math.nan,
               se=math.nan, df=math.nan, sd_diff=math.nan, sd_a=math.nan, sd_b=math.nan)
    if na >= 2 and nb >= 2:
        va, vb = float(np.var(a, ddof=1)), float(np.var(b, ddof=1))
        res.update(sd_a=math.sqrt(va), sd_b=math.sqrt(vb), se=math.sqrt(va / na + vb / nb),
                   df=welch_df(va, na, vb, nb))
    return _finish(res, level)


def contrast(a_by_seed, b_by_seed, level=LEVEL):
    """b - a for two configurations given as {seed: value} (finite values only count):
    paired on the seeds both have when at least two are shared, else Welch over all
    values. The result says which (method) and how many values each side contributed."""
    a = {s: v for s, v in a_by_seed.items() if np.isfinite(v)}
    b = {s: v for s, v in b_by_seed.items() if np.isfinite(v)}
    common = sorted(set(a) & set(b))
    if len(common) >= 2:
        res = paired([a[s] for s in common], [b[s] for s in common], level)
        res["unpaired_dropped"] = len(a) + len(b) - 2 * len(common)
        return res
    res = welch(list(a.values()), list(b.values()), level)
    res["unpaired_dropped"] = 0
    return res


def holm(pvalues):
    """Holm-adjusted p-values (step-down, monotone, capped at 1), same order as given; NaN
    entries are left out of the family and stay NaN."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(len(p), np.nan)
    idx = np.where(np.isfinite(p))[0]
    m = len(idx)
    if m == 0:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def verdict(diff, p_adj, n_label, alpha=ALPHA, lower_is_better=True):
    """'better' / 'worse' when the adjusted p is below alpha, else 'not resolved with N
    seeds' (N as given, e.g. '5' or '4+5')."""
    if np.isfinite(p_adj) and p_adj < alpha and np.isfinite(diff) and diff != 0:
        return "better" if (diff < 0) == lower_is_better else "worse"
    unit = "seed" if n_label == "1" else "seeds"
    return "not resolved with %s %s" % (n_label, unit)


# ---------------------------------------------------------------- power

def power(delta, se, df, alpha=ALPHA):
    """Power of the two-sided t test at level alpha to detect a true difference delta when
    the estimate's standard error is se with df degrees of freedom: P(|T| > t_crit) for
    T ~ noncentral t(df, delta / se)."""
    if not (se > 0 and df > 0):
        return math.nan
    tc = st.t.ppf(1 - alpha / 2, df)
    nc = abs(delta) / se
    # scipy 1.10's boost nct warns spuriously for small df; its values are right (checked
    # against numerical integration over the chi-square in tests/analysis).
    with np.errstate(all="ignore"):
        return float(min(1.0, st.nct.sf(tc, df, nc) + st.nct.cdf(-tc, df, nc)))


def _design(res, n=None):
    """(se, df) of a contrast's design at n seeds per configuration (n None: as observed).
    Paired: se = sd_diff / sqrt(n), df = n - 1. Welch: se = sqrt(sd_a^2/na + sd_b^2/nb),
    Welch-Satterthwaite df."""
    if res["method"] == "paired":
        k = res["n"] if n is None else n
        if not (k >= 2 and res["sd_diff"] > 0):
            return math.nan, math.nan
        return res["sd_diff"] / math.sqrt(k), k - 1
    na, nb = (res["na"], res["nb"]) if n is None else (n, n)
    va, vb = res["sd_a"] ** 2, res["sd_b"] ** 2
    if not (na >= 2 and nb >= 2 and va + vb > 0):
        return math.nan, math.nan
    return math.sqrt(va / na + vb / nb), welch_df(va, na, vb, nb)


def min_detectable(res, alpha=ALPHA, target=POWER):
    """The smallest true |difference| the contrast's design (its n and observed spread)
    detects with probability `target` at level alpha: solves power(delta) = target on the
    noncentral t (brentq). NaN when the design has no spread estimate (n < 2)."""
    se, df = _design(res)
    if not (se > 0 and df > 0):
        return math.nan
    hi = se
    while power(hi, se, df, alpha) < target:
        hi *= 2
        if hi > 1e12 * se:
            return math.inf
    return float(optimize.brentq(lambda d: power(d, se, df, alpha) - target, 0.0, hi,
                                 xtol=1e-12 * se, rtol=1e-10))


def seeds_needed(res, delta=None, alpha=ALPHA, target=POWER, max_seeds=MAX_SEEDS):
    """About how many seeds per configuration (pairs, for a paired design) give power
    `target` at level alpha for a true difference delta (default: the observed one), with
    the observed spread: the smallest n >= 2 with power >= target. None when unknown (no
    spread estimate, or delta 0), math.inf beyond max_seeds."""
    d = res["diff"] if delta is None else delta
    if not (np.isfinite(d) and d != 0):
        return None

    def pw(n):
        se, df = _design(res, n)
        return power(d, se, df, alpha)

    if not np.isfinite(pw(2)):
        return None
    if pw(2) >= target:
        return 2
    lo, hi = 2, 4
    while pw(hi) < target:
        lo, hi = hi, hi * 2
        if hi > max_seeds:
            return math.inf
    while hi - lo > 1:  # power grows with n: bisect for the first n reaching the target
        mid = (lo + hi) // 2
        if pw(mid) >= target:
            hi = mid
        else:
            lo = mid
    return hi
