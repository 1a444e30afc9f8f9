"""ablate_analysis.stats against independent computations: scipy.stats.ttest_rel /
ttest_ind(equal_var=False) / t.interval, a Holm example worked by hand, power by numerical
integration over the chi-square (not scipy's noncentral t) and by simulation, and the
textbook sample sizes (Cohen: d = 0.5 needs 64 per group two-sample; G*Power: 34 pairs)."""
import math
import os
import sys

import numpy as np
from scipy import integrate
from scipy import stats as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps  # noqa: E402,F401  (sets sys.path for ablate_analysis and common)
import common as C  # noqa: E402
from ablate_analysis import stats as S  # noqa: E402

RNG = np.random.default_rng(20240601)


def close(a, b, tol=1e-9, what=""):
    assert abs(a - b) <= tol * max(1.0, abs(b)), "%s: %r != %r" % (what, a, b)


def test_mean_ci():
    x = RNG.normal(2.5, 0.01, size=5)
    r = S.mean_ci(x)
    lo, hi = st.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=st.sem(x))
    close(r["lo"], lo, what="lo")
    close(r["hi"], hi, what="hi")
    close(r["sd"], np.std(x, ddof=1), what="sd")
    one = S.mean_ci([2.0, float("nan")])
    assert one["n"] == 1 and one["mean"] == 2.0 and math.isnan(one["lo"]), one


def test_paired_and_welch():
    for n in (2, 3, 5, 9):
        a = RNG.normal(3.0, 0.02, size=n)
        b = a + RNG.normal(-0.01, 0.01, size=n)
        r = S.paired(a, b)
        ref = st.ttest_rel(b, a)
        close(r["t"], ref.statistic, what="paired t")
        close(r["p"], ref.pvalue, what="paired p")
        d = b - a
        lo, hi = st.t.interval(0.95, n - 1, loc=d.mean(), scale=st.sem(d))
        close(r["lo"], lo, what="paired lo")
        close(r["hi"], hi, what="paired hi")
        c = RNG.normal(3.05, 0.05, size=n + 2)
        w = S.welch(a, c)
        ref = st.ttest_ind(c, a, equal_var=False)
        close(w["t"], ref.statistic, what="welch t")
        close(w["p"], ref.pvalue, what="welch p")
        # Welch-Satterthwaite df by its formula
        va, vc = np.var(a, ddof=1) / n, np.var(c, ddof=1) / (n + 2)
        df = (va + vc) ** 2 / (va ** 2 / (n - 1) + vc ** 2 / (n + 1))
        close(w["df"], df, what="welch df")
        h = st.t.ppf(0.975, df) * math.sqrt(va + vc)
        close(w["lo"], c.mean() - a.mean() - h, what="welch lo")


def test_contrast_chooses():
    a = {0: 3.0, 1: 3.1, 2: 3.05}
    b = {0: 2.9, 1: 3.02, 2: 2.96}
    r = S.contrast(a, b)
    assert r["method"] == "paired" and r["n"] == 3, r
    # one shared seed only: Welch over everything
    r = S.contrast({0: 3.0, 1: 3.1, 2: 3.05}, {2: 2.9, 7: 3.0, 8: 2.95})
    assert r["method"] == "welch" and (r["na"], r["nb"]) == (3, 3), r
    ref = st.ttest_ind([2.9, 3.0, 2.95], [3.0, 3.1, 3.05], equal_var=False)
    close(r["p"], ref.pvalue, what="welch p")
    # two shared seeds of three: paired on the shared ones
    r = S.contrast({0: 3.0, 1: 3.1, 2: 3.05}, {0: 2.9, 1: 3.02, 9: 2.5})
    assert r["method"] == "paired" and r["n"] == 2 and r["unpaired_dropped"] == 2, r
    close(r["p"], st.ttest_rel([2.9, 3.02], [3.0, 3.1]).pvalue, what="paired p")


def test_holm():
    # worked by hand: sorted 0.005 0.01 0.03 0.04 -> x4 x3 x2 x1 = 0.02 0.03 0.06 0.04,
    # made monotone: 0.02 0.03 0.06 0.06
    got = S.holm([0.01, 0.04, 0.03, 0.005])
    assert np.allclose(got, [0.03, 0.06, 0.06, 0.02], rtol=0, atol=1e-15), got
    got = S.holm([0.5, float("nan"), 0.4])  # NaN is not part of the family (m = 2)
    assert np.allclose(got[[0, 2]], [0.8, 0.8]) and math.isnan(got[1]), got
    assert np.allclose(S.holm([0.9, 0.8]), [1.0, 1.0])


def power_by_integration(delta, se, df, alpha):
    """P(|T| > t_crit), T = (Z + delta/se) / sqrt(V/df), V ~ chi2(df): integrate the normal
    tail over V's density (an independent route to the noncentral t)."""
    tc = st.t.ppf(1 - alpha / 2, df)
    nc = delta / se

    def f(v):
        s = tc * math.sqrt(v / df)
        return (st.norm.sf(s - nc) + st.norm.cdf(-s - nc)) * st.chi2.pdf(v, df)
    # the chi-square's mass lies within df +- 40 sd (sd = sqrt(2 df)); bounded limits keep
    # quad from missing the narrow peak of a large df
    w = 40 * math.sqrt(2 * df)
    return integrate.quad(f, max(0.0, df - w), df + w + 100, limit=400, points=[df])[0]


def test_power_and_sample_sizes():
    for delta, se, df, alpha in [(0.01, 0.004, 4, 0.05), (0.05, 0.02, 2, 0.005),
                                 (0.3, 0.1, 1, 0.05), (0.02, 0.005, 11.3, 0.01)]:
        close(S.power(delta, se, df, alpha), power_by_integration(delta, se, df, alpha), 1e-6,
              "power %r" % ((delta, se, df, alpha),))
    # textbook sample sizes at d = 0.5, alpha 0.05, 80% power
    two = dict(method="welch", n=2, na=2, nb=2, diff=0.5, sd_a=1.0, sd_b=1.0, sd_diff=math.nan)
    assert S.seeds_needed(two) == 64, S.seeds_needed(two)
    pair = dict(method="paired", n=2, na=2, nb=2, diff=0.5, sd_diff=1.0, sd_a=math.nan,
                sd_b=math.nan)
    assert S.seeds_needed(pair) == 34, S.seeds_needed(pair)
    # minimum detectable difference: power 0.8 exactly there (by integration), and the
    # seeds needed for it are the current n
    for n, sd, alpha in [(5, 0.005, 0.05), (3, 0.02, 0.005), (2, 0.01, 0.05)]:
        res = dict(method="paired", n=n, na=n, nb=n, diff=0.0, sd_diff=sd, sd_a=math.nan,
                   sd_b=math.nan)
        m = S.min_detectable(res, alpha)
        close(power_by_integration(m, sd / math.sqrt(n), n - 1, alpha), 0.8, 1e-6, "mdd power")
        assert S.seeds_needed(res, delta=m * 1.0001, alpha=alpha) == n
    # seeds needed: the first n reaching 80% (boundary checked by integration)
    res = dict(method="welch", n=5, na=5, nb=5, diff=0.012, sd_a=0.006, sd_b=0.009,
               sd_diff=math.nan)
    k = S.seeds_needed(res, alpha=0.01)
    se = lambda n: math.sqrt((0.006 ** 2 + 0.009 ** 2) / n)  # noqa: E731
    dfw = lambda n: S.welch_df(0.006 ** 2, n, 0.009 ** 2, n)  # noqa: E731
    assert power_by_integration(0.012, se(k), dfw(k), 0.01) >= 0.8 > \
        power_by_integration(0.012, se(k - 1), dfw(k - 1), 0.01), k
    assert S.seeds_needed(dict(res, diff=0.0)) is None


def test_power_by_simulation():
    """Data simulated at the minimum detectable difference are detected ~80% of the time
    by scipy's paired t test."""
    n, sd, alpha = 4, 0.01, 0.05
    res = dict(method="paired", n=n, na=n, nb=n, diff=0.0, sd_diff=sd, sd_a=math.nan,
               sd_b=math.nan)
    m = S.min_detectable(res, alpha)
    sims = 40000
    d = RNG.normal(m, sd, size=(sims, n))
    p = st.ttest_1samp(d, 0.0, axis=1).pvalue
    rate = float(np.mean(p < alpha))
    assert abs(rate - 0.8) < 0.012, "simulated power %.4f at the MDD %.5f" % (rate, m)


def test_verdict():
    assert S.verdict(-0.05, 0.01, "5") == "better"
    assert S.verdict(0.05, 0.01, "5") == "worse"
    assert S.verdict(-0.05, 0.2, "5") == "not resolved with 5 seeds"
    assert S.verdict(0.1, float("nan"), "1") == "not resolved with 1 seed"


def test_report_cells():
    """The contrast table prints an unreachable seed count as "> 100,000", an unknown one
    as "—" and a p below 1e-4 in exponent form."""
    import pandas as pd
    from ablate_analysis.report import Report
    row = dict(config="c", baseline="b", method="paired", n=5, na=5, nb=5, diff=-1e-6,
               lo=-0.01, hi=0.01, p=0.99, p_holm=0.99, verdict="not resolved with 5 seeds",
               mdd=0.02)
    con = pd.DataFrame([dict(row, seeds_needed=math.inf), dict(row, seeds_needed=math.nan),
                        dict(row, seeds_needed=7, p=3e-5)])
    lines = Report.__new__(Report)._contrast_table(con).splitlines()[2:]
    assert lines[0].endswith("| > 100,000 |") and lines[1].endswith("| — |"), lines
    assert lines[2].endswith("| ≈ 7 |") and "| 3.0e-05 |" in lines[2], lines


if __name__ == "__main__":
    C.main([("mean_ci", test_mean_ci), ("paired_and_welch", test_paired_and_welch),
            ("contrast_chooses", test_contrast_chooses), ("holm", test_holm),
            ("power_and_sample_sizes", test_power_and_sample_sizes),
            ("power_by_simulation", test_power_by_simulation), ("verdict", test_verdict),
            ("report_cells", test_report_cells)])
