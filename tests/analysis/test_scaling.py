"""ablate_analysis.scaling (effects against scale, a ladder: sweep) against computations by
hand: the trend fit is weighted least squares, solved here with numpy as (X' W X)^-1 X' W y
with covariance (X' W X)^-1, and also checked against numpy.polyfit's weighted fit; the
fitted value's interval from that covariance; with the rungs' degrees of freedom, t on the
Welch-Satterthwaite df of each combination; the trend verdicts of docs/analysis.md on
constructed rungs."""
import math
import os
import sys

import numpy as np
from scipy import stats as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps  # noqa: E402,F401  (sets sys.path for ablate_analysis and common)
import common as C  # noqa: E402
from ablate_analysis import scaling as SC  # noqa: E402

RNG = np.random.default_rng(20261207)


def close(a, b, tol=1e-9, what=""):
    assert abs(a - b) <= tol * max(1.0, abs(b)), "%s: %r != %r" % (what, a, b)


def by_hand(x, y, se):
    X = np.column_stack([np.ones_like(x), x])
    W = np.diag(1.0 / se ** 2)
    cov = np.linalg.inv(X.T @ W @ X)
    beta = cov @ X.T @ W @ y
    return beta, cov


def test_wls_by_hand():
    for k in (2, 3, 5, 8):
        x = np.sort(RNG.uniform(12, 18, size=k))
        se = RNG.uniform(0.002, 0.02, size=k)
        y = -0.03 + 0.004 * (x - 15) + RNG.normal(0, 1, size=k) * se
        fit = SC.wls(x, y, se)
        beta, cov = by_hand(x, y, se)
        close(fit["intercept"], beta[0], what="intercept k=%d" % k)
        close(fit["slope"], beta[1], what="slope k=%d" % k)
        close(fit["se_slope"], math.sqrt(cov[1, 1]), what="se slope")
        close(fit["se_intercept"], math.sqrt(cov[0, 0]), what="se intercept")
        close(fit["cov"], cov[0, 1], what="cov")
        z = st.norm.ppf(0.975)
        close(fit["lo"], beta[1] - z * math.sqrt(cov[1, 1]), what="slope lo")
        close(fit["hi"], beta[1] + z * math.sqrt(cov[1, 1]), what="slope hi")
        resid = y - X_line(x, beta)
        close(fit["chi2"], float(np.sum(resid ** 2 / se ** 2)), what="chi2")
        assert fit["dof"] == k - 2 and fit["n"] == k
        # numpy's own weighted polynomial fit (weights multiply the residuals: 1/se)
        p = np.polyfit(x, y, 1, w=1.0 / se)
        close(fit["slope"], p[0], tol=1e-7, what="polyfit slope")
        close(fit["intercept"], p[1], tol=1e-7, what="polyfit intercept")
        # the fitted value's interval from the covariance
        x0 = x.max() + 1.0
        v, lo, hi = SC.predict(fit, x0)
        g = np.array([1.0, x0])
        close(v, float(g @ beta), what="prediction")
        close(hi - v, z * math.sqrt(float(g @ cov @ g)), what="prediction half-width")
        close(v - lo, hi - v, what="symmetric")


def test_wls_seeds_df():
    """With each rung's degrees of freedom (seeds - 1), the slope's and a fitted value's
    intervals use t on the Welch-Satterthwaite df of that linear combination, by hand."""
    x = np.array([13.0, 14.0, 15.5])
    se = np.array([0.01, 0.004, 0.006])
    y = np.array([-0.02, -0.025, -0.035])
    df = np.array([4.0, 1.0, 9.0])
    fit = SC.wls(x, y, se, df=df)
    beta, cov = by_hand(x, y, se)
    close(fit["slope"], beta[1], what="slope")
    w = 1 / se ** 2
    xm = np.sum(w * x) / np.sum(w)
    c = w * (x - xm) / np.sum(w * (x - xm) ** 2)  # slope = sum c_i y_i
    close(float(c @ y), beta[1], what="slope as a combination")
    v = c ** 2 * se ** 2
    nu = v.sum() ** 2 / np.sum(v ** 2 / df)
    close(fit["df_slope"], nu, what="df")
    h = st.t.ppf(0.975, nu) * math.sqrt(cov[1, 1])
    close(fit["lo"], beta[1] - h, what="lo")
    close(fit["hi"], beta[1] + h, what="hi")
    assert 1 <= nu <= df.sum() + 1e-9 and h > 1.96 * math.sqrt(cov[1, 1])
    x0 = 16.5
    g = np.array([1.0, x0])
    gy = np.linalg.solve(np.column_stack([np.ones_like(x), x]).T @ np.diag(w) @
                         np.column_stack([np.ones_like(x), x]),
                         g)  # prediction = gy' X' W y: its weights on y
    a = (np.column_stack([np.ones_like(x), x]) @ gy) * w
    close(float(a @ y), float(g @ beta), what="prediction as a combination")
    va = a ** 2 * se ** 2
    nu0 = va.sum() ** 2 / np.sum(va ** 2 / df)
    val, lo, hi = SC.predict(fit, x0)
    close(hi - val, st.t.ppf(0.975, nu0) * math.sqrt(float(g @ cov @ g)), what="pred width")


def X_line(x, beta):
    return beta[0] + beta[1] * x


def test_wls_degenerate():
    nan = SC.wls([15.0], [0.1], [0.01])
    assert math.isnan(nan["slope"]) and nan["n"] == 1
    same_x = SC.wls([15.0, 15.0], [0.1, 0.2], [0.01, 0.01])
    assert math.isnan(same_x["slope"])
    # a point without an interval (se NaN or 0) does not enter the fit
    f = SC.wls([14.0, 15.0, 16.0], [0.1, 0.2, 5.0], [0.01, 0.01, math.nan])
    assert f["n"] == 2 and abs(f["slope"] - 0.1) < 1e-12, f


def test_verdicts():
    x = np.array([13.0, 14.0, 15.0])

    def verdict(diff, se):
        diff, se = np.asarray(diff, float), np.asarray(se, float)
        h = 1.96 * se
        fit = SC.wls(x, diff, se)
        return SC.trend_verdict(diff - h, diff + h, fit, x.min(), x.max())[0]

    # RoPE better by ~0.03 at every size: flat
    assert verdict([-0.03, -0.031, -0.029], [0.005] * 3) == "stable"
    # better, and more so with compute
    assert verdict([-0.01, -0.03, -0.05], [0.002] * 3) == "grows"
    # better, less so with compute
    assert verdict([-0.05, -0.03, -0.01], [0.002] * 3) == "shrinks"
    # worse, less so
    assert verdict([0.05, 0.03, 0.01], [0.002] * 3) == "shrinks"
    # better at the small rung, worse at the large one, both resolved
    assert verdict([-0.03, 0.0, 0.03], [0.005] * 3) == "changes sign"
    # the fit crosses 0 inside the ladder, no rung resolved on both sides
    assert verdict([-0.01, 0.0, 0.01], [0.006] * 3) == "changes sign"
    # one rung only: no trend
    assert SC.trend_verdict([-0.1], [0.1], SC.wls([13.0], [0.0], [0.05]), 13, 13)[0] == "—"


if __name__ == "__main__":
    C.main([("wls_by_hand", test_wls_by_hand), ("wls_seeds_df", test_wls_seeds_df),
            ("wls_degenerate", test_wls_degenerate), ("verdicts", test_verdicts)])
