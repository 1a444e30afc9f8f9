/* See distrib.h. The incomplete beta function is the continued fraction of Numerical Recipes
 * (betacf, evaluated by the modified Lentz method), on the side of the symmetry
 * I_x(a,b) = 1 - I_{1-x}(b,a) where it converges fast; callers pass x and 1 - x computed
 * separately so that neither loses digits by cancellation. */
#include "util/distrib.h"

#include <math.h>

#define CF_EPS      1e-16
#define CF_TINY     1e-300
#define CF_MAX_ITER 1000

double distrib_norm_cdf(double x) {
    return 0.5 * erfc(-x / M_SQRT2);
}

/* Acklam's rational approximation (relative error 1.15e-9) of the lower half, refined by
 * Halley steps on the exact CDF (erfc keeps the relative accuracy of tiny tails). */
static double norm_quantile_lower(double p) {
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                               -2.759285104469687e+02, 1.383577518672690e+02,
                               -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                               -1.556989798598866e+02, 6.680131188771972e+01,
                               -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                               -2.400758277161838e+00, -2.549732539343734e+00,
                               4.374664141464968e+00,  2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    double x;
    if (p < 0.02425) {
        double q = sqrt(-2 * log(p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    } else {
        double q = p - 0.5, r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
    }
    for (int i = 0; i < 2; i++) {
        double e = distrib_norm_cdf(x) - p;
        double u = e * sqrt(2 * M_PI) * exp(x * x / 2);
        x = x - u / (1 + x * u / 2);
    }
    return x;
}

double distrib_norm_quantile(double p) {
    if (!(p > 0 && p < 1)) return NAN;
    if (p == 0.5) return 0;
    return p < 0.5 ? norm_quantile_lower(p) : -norm_quantile_lower(1 - p);
}

/* The continued fraction for I_x(a, b), y = 1 - x; converges fast for x < (a+1)/(a+b+2). */
static double incbeta_cf(double a, double b, double x, double y) {
    double front = exp(a * log(x) + b * log(y) - (lgamma(a) + lgamma(b) - lgamma(a + b))) / a;
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < CF_TINY) d = CF_TINY;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= CF_MAX_ITER; m++) {
        int m2 = 2 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        if (fabs(d) < CF_TINY) d = CF_TINY;
        c = 1 + aa / c;
        if (fabs(c) < CF_TINY) c = CF_TINY;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        if (fabs(d) < CF_TINY) d = CF_TINY;
        c = 1 + aa / c;
        if (fabs(c) < CF_TINY) c = CF_TINY;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < CF_EPS) break;
    }
    return front * h;
}

/* I_x(a, b) with y = 1 - x given separately. */
static double incbeta2(double a, double b, double x, double y) {
    if (x <= 0) return 0;
    if (y <= 0) return 1;
    if (x < (a + 1) / (a + b + 2)) return incbeta_cf(a, b, x, y);
    return 1 - incbeta_cf(b, a, y, x);
}

double distrib_incbeta(double a, double b, double x) {
    if (!(a > 0 && b > 0 && x >= 0 && x <= 1)) return NAN;
    return incbeta2(a, b, x, 1 - x);
}

/* P(T > t) for t >= 0: I_{df/(df+t^2)}(df/2, 1/2) / 2. */
static double t_sf_upper(double t, double df) {
    double t2 = t * t;
    if (isinf(t2)) return 0;
    double x = df / (df + t2), y = t2 / (df + t2);
    return 0.5 * incbeta2(df / 2, 0.5, x, y);
}

double distrib_t_sf(double t, double df) {
    if (isnan(t) || !(df > 0)) return NAN;
    return t >= 0 ? t_sf_upper(t, df) : 1 - t_sf_upper(-t, df);
}

double distrib_t_cdf(double t, double df) {
    return distrib_t_sf(-t, df);
}

static double t_log_pdf(double t, double df) {
    return lgamma((df + 1) / 2) - lgamma(df / 2) - 0.5 * log(df * M_PI) -
           (df + 1) / 2 * log1p(t * t / df);
}

/* t > 0 with P(T > t) = q, q in (0, 0.5): a bracket [lo, hi] by doubling, then Newton steps
 * in log t (the tail is a power law, so log sf is nearly linear in log t), falling back to
 * bisection whenever a step would leave the bracket. */
static double t_isf_upper(double q, double df) {
    double lo = 0, hi = 1;
    while (t_sf_upper(hi, df) > q) {
        lo = hi;
        hi *= 2;
        if (hi > 1e300) return INFINITY;
    }
    double t = lo > 0 ? sqrt(lo * hi) : hi / 2, lq = log(q);
    for (int i = 0; i < 200; i++) {
        double sf = t_sf_upper(t, df);
        double g = log(sf) - lq;
        if (g > 0)
            lo = t; /* sf too large: t too small */
        else if (g < 0)
            hi = t;
        else
            return t;
        /* d log sf / d log t = -t pdf(t) / sf(t) */
        double slope = -t * exp(t_log_pdf(t, df)) / sf;
        double next = t * exp(-g / slope);
        if (!(next > lo && next < hi) || !isfinite(next)) next = lo > 0 ? sqrt(lo * hi) : hi / 2;
        if (fabs(next - t) <= 1e-15 * t) return next;
        t = next;
    }
    return t;
}

double distrib_t_isf(double q, double df) {
    if (!(q > 0 && q < 1) || !(df > 0)) return NAN;
    if (q == 0.5) return 0;
    return q < 0.5 ? t_isf_upper(q, df) : -t_isf_upper(1 - q, df);
}
