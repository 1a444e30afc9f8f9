/* TEMP (wt-adaptive, dropped at merge in favour of wt-seqrule's sequential.c): the simplest
 * valid implementation of sequential.h, so the adaptive scheduler can be tested before the
 * real rule lands. Bonferroni over looks and contrasts: each look of each contrast gets
 * alpha / (n_looks * n_contrasts), two-sided, with the t quantile of n - 1 degrees of
 * freedom. Valid, but wasteful (issue 20 explains why the real rule is not this). */
#include "sequential.h"

#include <math.h>
#include <stdio.h>

const char *seq_verdict_name(SeqVerdict v) {
    static const char *const names[] = {"open",       "better",     "worse",
                                        "equivalent", "unresolved", "unstable"};
    return (unsigned)v < sizeof names / sizeof names[0] ? names[v] : "?";
}

/* Continued fraction of the regularized incomplete beta (Lentz). */
static double betacf(double a, double b, double x) {
    double c = 1, d = 1 - (a + b) * x / (a + 1);
    if (fabs(d) < 1e-300) d = 1e-300;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 300; m++) {
        double m2 = 2.0 * m, aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
        d = 1 + aa * d;
        c = 1 + aa / c;
        if (fabs(d) < 1e-300) d = 1e-300;
        if (fabs(c) < 1e-300) c = 1e-300;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
        d = 1 + aa * d;
        c = 1 + aa / c;
        if (fabs(d) < 1e-300) d = 1e-300;
        if (fabs(c) < 1e-300) c = 1e-300;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-15) break;
    }
    return h;
}

static double ibeta(double a, double b, double x) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    double bt = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log(1 - x));
    if (x < (a + 1) / (a + b + 2)) return bt * betacf(a, b, x) / a;
    return 1 - bt * betacf(b, a, 1 - x) / b;
}

/* Two-sided tail P(|T| > t), T ~ t(df). */
static double t_two_tail(double t, double df) {
    return ibeta(df / 2, 0.5, df / (df + t * t));
}

/* t with P(|T| > t) = p, by bisection (deterministic). */
static double t_crit(double p, double df) {
    double lo = 0, hi = 1;
    while (t_two_tail(hi, df) > p && hi < 1e12)
        hi *= 2;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (t_two_tail(mid, df) > p)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

int seq_rule_init(SeqRule *r, const int *looks, int n_looks, double alpha, double delta,
                  int n_contrasts, char err[ABL_ERR_MAX]) {
    if (n_looks < 1 || n_looks > SEQ_MAX_LOOKS)
        return snprintf(err, ABL_ERR_MAX, "looks: 1 to %d looks", SEQ_MAX_LOOKS), -1;
    for (int i = 0; i < n_looks; i++)
        if (looks[i] < 2 || (i && looks[i] <= looks[i - 1]))
            return snprintf(err, ABL_ERR_MAX, "looks: strictly increasing, each >= 2"), -1;
    if (!(alpha > 0 && alpha < 0.5))
        return snprintf(err, ABL_ERR_MAX, "alpha: between 0 and 0.5"), -1;
    if (!(delta > 0)) return snprintf(err, ABL_ERR_MAX, "delta: above 0"), -1;
    if (n_contrasts < 1) return snprintf(err, ABL_ERR_MAX, "n_contrasts: at least 1"), -1;
    r->n_looks = n_looks;
    r->alpha = alpha;
    r->delta = delta;
    r->n_contrasts = n_contrasts;
    for (int i = 0; i < n_looks; i++) {
        r->looks[i] = looks[i];
        r->level[i] = alpha / ((double)n_looks * n_contrasts);
        r->crit[i] = t_crit(r->level[i], looks[i] - 1);
    }
    return 0;
}

SeqDecision seq_look(const SeqRule *r, int look, const double *d) {
    SeqDecision o = {.look = look, .n = r->looks[look]};
    int n = o.n;
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++)
        s += d[i];
    o.diff = s / n;
    for (int i = 0; i < n; i++)
        ss += (d[i] - o.diff) * (d[i] - o.diff);
    o.sd = sqrt(ss / (n - 1));
    double half = r->crit[look] * o.sd / sqrt((double)n);
    o.lo = o.diff - half;
    o.hi = o.diff + half;
    if (o.lo > 0)
        o.verdict = SEQ_WORSE;
    else if (o.hi < 0)
        o.verdict = SEQ_BETTER;
    else if (o.lo > -r->delta && o.hi < r->delta)
        o.verdict = SEQ_EQUIVALENT;
    else
        o.verdict = look == r->n_looks - 1 ? SEQ_UNRESOLVED : SEQ_OPEN;
    return o;
}
