/* The sequential rule (src/orchestrator/plan/sequential.h) and the distributions under it
 * (src/util/distrib.h): the CDFs and quantiles against scipy, seq_rule_init's checks, the
 * verdicts of seq_look, and THE SIMULATION: the rule's own code run on 10^5 simulated
 * studies of 6 contrasts per scenario, under null, boundary and mixed true differences, with
 * normal, heavy-tailed and skewed paired differences; the family-wise rate of false
 * verdicts must have a 99% Clopper-Pearson upper bound <= alpha. The same harness run on
 * two invalid rules (no correction for the looks; no correction at all) must flag them, so
 * that it can fail. Deterministic: xoshiro256** with fixed seeds. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "orchestrator/plan/sequential.h"
#include "test_util.h"
#include "util/distrib.h"
#include "util/sim_rand.h"

/* |got - want| <= tol * |want| (absolute tol when want is 0). */
static int close_rel(double got, double want, double tol) {
    if (want == 0) return fabs(got) <= tol;
    return fabs(got - want) <= tol * fabs(want);
}

#define CHECK_REL(got, want, tol)                                                                  \
    CHECK_MSG(close_rel((got), (want), (tol)), "%s = %.17g, scipy %.17g (rel %.2e)", #got,         \
              (double)(got), (double)(want), fabs((got) - (want)) / fabs(want))

/* ------------------------------------------------------------ against scipy */

/* The reference values were printed by scipy 1.10 (Debian 12's python3-scipy) with
 * /usr/bin/python3 running the script below. The t quantiles are found by root-finding on
 * scipy's t.sf (accurate to ~1e-15 in the tail) because scipy's own t.isf is only good to
 * ~1e-9 there (t.sf(t.isf(1e-12, 19), 19) = 1.0000000284e-12).
 *
 *   from scipy import stats, special, optimize
 *   import numpy as np
 *   def isf(q, df):
 *       if q > 0.5: return -isf(1 - q, df)
 *       f = lambda lt: np.log(stats.t.sf(np.exp(lt), df)) - np.log(q)
 *       return np.exp(optimize.brentq(f, -40, 40, xtol=1e-15, rtol=8.9e-16, maxiter=500))
 *   print([(x, repr(stats.norm.cdf(x))) for x in [-37.5, -20.0, -8.0, -3.0, -0.5, 0.0, 1.2, 5.0]])
 *   print([(p, repr(stats.norm.ppf(p))) for p in [1e-300, 1e-15, 1e-8, 0.001, 0.025, 0.3, 0.8,
 * 0.999]]) print([(t, df, repr(stats.t.sf(t, df))) for t, df in [(0.5,2),(3.0,4),(100.0,2),(1e4,2),
 *          (12.0,7),(5.0,11),(3.2,19),(-1.5,5),(2.0,100),(40.0,3),(1e6,2),(0.01,1)]])
 *   print([(q, df, repr(isf(q, df))) for q, df in [(2e-13,2),(1e-8,4),(4.5e-6,7),(1.4e-4,11),
 *          (0.00235,19),(0.025,4),(0.3,9),(0.7,3),(1e-10,1),(0.05,1000),(1e-12,19)]])
 *   print([(a, b, x, repr(special.betainc(a, b, x))) for a, b, x in [(1,0.5,1e-12),(2.5,0.5,0.3),
 *          (10,3,0.7),(50,50,0.5),(1001,1000,0.5)]])
 *   print(repr(isf(0.025, 1)))
 *   def rule(looks, alpha, C):   # the rule of docs/analysis.md, with scipy
 *       a1 = alpha / C; last = looks[-1]; spent = 0; out = []
 *       for k, n in enumerate(looks):
 *           cum = a1 if k == len(looks)-1 else a1 * (n / last)**3
 *           lev = cum - spent; spent = cum
 *           out.append((repr(lev), repr(isf(lev/2, n-1))))
 *       return out
 *   print(rule([3,5,8,12,20], 0.05, 6)); print(rule([3,5,8,12,20], 0.05, 10)) */
TEST(norm_against_scipy) {
    static const double cdf[][2] = {
        {-37.5, 4.605353009581954e-308}, {-20.0, 2.7536241186061556e-89},
        {-8.0, 6.22096057427174e-16},    {-3.0, 0.0013498980316300933},
        {-0.5, 0.3085375387259869},      {0.0, 0.5},
        {1.2, 0.8849303297782918},       {5.0, 0.9999997133484281},
    };
    for (size_t i = 0; i < sizeof cdf / sizeof cdf[0]; i++)
        CHECK_REL(distrib_norm_cdf(cdf[i][0]), cdf[i][1], 1e-10);
    static const double ppf[][2] = {
        {1e-300, -37.0470962993612}, {1e-15, -7.941345326170998},  {1e-08, -5.612001244174789},
        {0.001, -3.090232306167813}, {0.025, -1.9599639845400545}, {0.3, -0.5244005127080409},
        {0.8, 0.8416212335729143},   {0.999, 3.090232306167813},
    };
    for (size_t i = 0; i < sizeof ppf / sizeof ppf[0]; i++)
        CHECK_REL(distrib_norm_quantile(ppf[i][0]), ppf[i][1], 1e-10);
    CHECK(distrib_norm_quantile(0.5) == 0);
    CHECK(isnan(distrib_norm_quantile(0)) && isnan(distrib_norm_quantile(1)));
}

TEST(t_against_scipy) {
    static const double sf[][3] = {
        {0.5, 2, 0.33333333333333337},      {3.0, 4, 0.019970984035859413},
        {100.0, 2, 4.9992501249781284e-05}, {1e4, 2, 4.9999999250000005e-09},
        {12.0, 7, 3.179155189092547e-06},   {5.0, 11, 0.00020126490906225968},
        {3.2, 19, 0.0023570945141315938},   {-1.5, 5, 0.9030481598787634},
        {2.0, 100, 0.02410608936556682},    {40.0, 3, 1.719034039457927e-05},
        {1e6, 2, 4.999999999992501e-13},    {0.01, 1, 0.49681700723509176},
    };
    for (size_t i = 0; i < sizeof sf / sizeof sf[0]; i++) {
        CHECK_REL(distrib_t_sf(sf[i][0], sf[i][1]), sf[i][2], 1e-10);
        CHECK_REL(distrib_t_cdf(-sf[i][0], sf[i][1]), sf[i][2], 1e-10);
    }
    static const double isf[][3] = {
        {2e-13, 2, 1581138.830083715},    {1e-08, 4, 131.59473694062376},
        {4.5e-06, 7, 11.393233957764906}, {1.4e-4, 11, 5.232605991104832},
        {0.00235, 19, 3.201344624410313}, {0.025, 4, 2.776445105197794},
        {0.3, 9, 0.5434802414542971},     {0.7, 3, -0.5843897274398181},
        {1e-10, 1, 3183098861.837906},    {0.05, 1000, 1.6463788172854648},
        {1e-12, 19, 15.884838733726818},
    };
    for (size_t i = 0; i < sizeof isf / sizeof isf[0]; i++)
        CHECK_REL(distrib_t_isf(isf[i][0], isf[i][1]), isf[i][2], 1e-10);
    static const double ib[][4] = {
        {1, 0.5, 1e-12, 5.000000000001251e-13}, {2.5, 0.5, 0.3, 0.01892712407194565},
        {10, 3, 0.7, 0.2528153478549999},       {50, 50, 0.5, 0.5},
        {1001, 1000, 0.5, 0.49108049442753693},
    };
    for (size_t i = 0; i < sizeof ib / sizeof ib[0]; i++)
        CHECK_REL(distrib_incbeta(ib[i][0], ib[i][1], ib[i][2]), ib[i][3], 1e-10);
    CHECK(distrib_t_isf(0.5, 7) == 0);
    CHECK(isnan(distrib_t_isf(0, 3)) && isnan(distrib_t_isf(0.2, 0)));
}

static const int LOOKS[] = {3, 5, 8, 12, 20};
#define N_LOOKS 5

TEST(rule_levels_against_scipy) {
    static const double want6[N_LOOKS][2] = {
        {2.8124999999999996e-05, 188.55783081746284}, {0.00010208333333333334, 15.46307650418667},
        {0.00040312500000000016, 6.302678264354418},  {0.0012666666666666664, 4.2949266100765495},
        {0.006533333333333334, 3.0538149384062034},
    };
    static const double want10[N_LOOKS][2] = {
        {1.6874999999999997e-05, 243.4291668298564},
        {6.125e-05, 17.596978716201495},
        {0.00024187500000000007, 6.850525521102574},
        {0.0007599999999999997, 4.603959029351519},
        {0.00392, 3.282124935583537},
    };
    char err[ABL_ERR_MAX];
    SeqRule r;
    CHECK(seq_rule_init(&r, LOOKS, N_LOOKS, 0.05, 0.01, 6, err) == 0);
    double sum = 0;
    for (int k = 0; k < N_LOOKS; k++) {
        CHECK_REL(r.level[k], want6[k][0], 1e-10);
        CHECK_REL(r.crit[k], want6[k][1], 1e-10);
        sum += r.level[k];
    }
    CHECK_REL(sum, 0.05 / 6, 1e-14); /* the union bound's budget, spent exactly */
    CHECK(seq_rule_init(&r, LOOKS, N_LOOKS, 0.05, 0.01, 10, err) == 0);
    for (int k = 0; k < N_LOOKS; k++) {
        CHECK_REL(r.level[k], want10[k][0], 1e-10);
        CHECK_REL(r.crit[k], want10[k][1], 1e-10);
    }
    CHECK(r.n_looks == N_LOOKS && r.looks[4] == 20 && r.alpha == 0.05 && r.delta == 0.01 &&
          r.n_contrasts == 10);
}

/* ------------------------------------------------------------ init and look */

TEST(init_errors) {
    char err[ABL_ERR_MAX];
    SeqRule r;
    static const int dec[] = {3, 8, 5}, one[] = {1, 5}, same[] = {3, 3};
    int many[SEQ_MAX_LOOKS + 1];
    for (int i = 0; i <= SEQ_MAX_LOOKS; i++)
        many[i] = i + 2;
    struct {
        const int *looks;
        int n_looks;
        double alpha, delta;
        int contrasts;
        const char *want;
    } bad[] = {
        {dec, 3, 0.05, 0.01, 4, "looks: 5 after 8, expected strictly increasing"},
        {same, 2, 0.05, 0.01, 4, "looks: 3 after 3, expected strictly increasing"},
        {one, 2, 0.05, 0.01, 4, "looks: 1 seeds at look 1, expected at least 2"},
        {LOOKS, 0, 0.05, 0.01, 4, "looks: 0 looks, expected 1 to 32"},
        {many, SEQ_MAX_LOOKS + 1, 0.05, 0.01, 4, "looks: 33 looks, expected 1 to 32"},
        {LOOKS, N_LOOKS, 0, 0.01, 4, "alpha: 0, expected a number in (0, 0.5)"},
        {LOOKS, N_LOOKS, 0.5, 0.01, 4, "alpha: 0.5, expected a number in (0, 0.5)"},
        {LOOKS, N_LOOKS, NAN, 0.01, 4, "alpha: nan, expected a number in (0, 0.5)"},
        {LOOKS, N_LOOKS, 0.05, 0, 4, "delta: 0, expected a finite number > 0"},
        {LOOKS, N_LOOKS, 0.05, INFINITY, 4, "delta: inf, expected a finite number > 0"},
        {LOOKS, N_LOOKS, 0.05, 0.01, 0, "contrasts: 0, expected at least 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        int rc = seq_rule_init(&r, bad[i].looks, bad[i].n_looks, bad[i].alpha, bad[i].delta,
                               bad[i].contrasts, err);
        CHECK_MSG(rc == -1 && strncmp(err, bad[i].want, strlen(bad[i].want)) == 0,
                  "case %zu: rc %d, message \"%s\", expected \"%s\"", i, rc, err, bad[i].want);
    }
    static const int single[] = {2};
    CHECK(seq_rule_init(&r, single, 1, 0.05, 0.01, 1, err) == 0);
    CHECK_REL(r.level[0], 0.05, 1e-15);              /* one look: the fixed-sample t interval */
    CHECK_REL(r.crit[0], 12.706204736174698, 1e-10); /* isf(0.025, 1) above */
}

TEST(look_verdicts) {
    char err[ABL_ERR_MAX];
    SeqRule r;
    CHECK(seq_rule_init(&r, LOOKS, N_LOOKS, 0.05, 0.01, 6, err) == 0);
    /* 12 differences, mean m, sd s: m + s * (alternating +-1 scaled so the sd is s) */
    double d[20];
    struct {
        int look;
        double mean, sd;
        SeqVerdict want;
    } cases[] = {
        {3, -0.05, 0.004, SEQ_BETTER}, /* t = -43: crit 4.29 at n = 12 */
        {3, 0.05, 0.004, SEQ_WORSE},
        {3, 0.0005, 0.004, SEQ_EQUIVALENT}, /* half width 0.0050 */
        {3, 0.006, 0.004, SEQ_WORSE},       /* t = 5.2 > 4.29, and inside ±0.01 as well */
        {3, 0.006, 0.006, SEQ_OPEN},        /* t = 3.5 and 0.006 + 0.0074 > 0.01: neither */
        {4, 0.004, 0.004, SEQ_WORSE},       /* n = 20, crit 3.05: t = 4.5 */
        {4, 0.009, 0.02, SEQ_UNRESOLVED},   /* last look, still open */
        {0, -0.05, 0.004, SEQ_OPEN},        /* n = 3: crit 188.6, t = 22 */
        {2, -0.05, 0.004, SEQ_BETTER},      /* n = 8: crit 6.30, t = 35 */
        /* equivalence by TOST at the look's full level: the one-sided critical value 3.87
         * (half width 0.0092) where the two-sided 4.29 (0.0102) would leave it open */
        {3, 0, 0.0082, SEQ_EQUIVALENT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int n = LOOKS[cases[i].look];
        /* n values with mean m and sample sd s: m +- a, balanced (n even) or with one at m */
        double a = cases[i].sd * sqrt((n - 1.0) / (n - (n % 2)));
        for (int j = 0; j < n; j++)
            d[j] = cases[i].mean + (j == n - 1 && n % 2 ? 0 : (j % 2 ? a : -a));
        SeqDecision s = seq_look(&r, cases[i].look, d);
        CHECK_MSG(s.verdict == cases[i].want, "case %zu: %s, expected %s (interval [%g, %g])", i,
                  seq_verdict_name(s.verdict), seq_verdict_name(cases[i].want), s.lo, s.hi);
        CHECK(s.n == n && s.look == cases[i].look);
        CHECK_REL(s.diff, cases[i].mean, 1e-12);
        CHECK_REL(s.sd, cases[i].sd, 1e-12);
        /* symmetric differences: no skewness, the t interval and the t TOST interval */
        CHECK_REL(s.two_hi - s.two_lo, 2 * r.crit[cases[i].look] * cases[i].sd / sqrt(n), 1e-12);
        CHECK_REL(s.eq_hi - s.eq_lo, 2 * r.crit_eq[cases[i].look] * cases[i].sd / sqrt(n), 1e-12);
        CHECK(fabs(s.skew) < 1e-9);
        if (s.verdict == SEQ_EQUIVALENT)
            CHECK(s.lo == s.eq_lo && s.hi == s.eq_hi);
        else
            CHECK(s.lo == s.two_lo && s.hi == s.two_hi);
    }
    /* only looks[look] values are read: what lies beyond never changes the decision */
    for (int j = 0; j < 12; j++)
        d[j] = 0.001 * (j % 3);
    for (int j = 12; j < 20; j++)
        d[j] = NAN;
    SeqDecision s = seq_look(&r, 3, d);
    CHECK(s.verdict == SEQ_EQUIVALENT && isfinite(s.lo));
    /* a non-finite difference never yields a verdict */
    s = seq_look(&r, 4, d);
    CHECK(s.verdict == SEQ_UNRESOLVED);
    s = seq_look(&r, 3, (double[12]){[5] = INFINITY});
    CHECK(s.verdict == SEQ_OPEN);
    /* no such look */
    s = seq_look(&r, 5, d);
    CHECK(s.verdict == SEQ_OPEN && s.n == 0);
    CHECK(strcmp(seq_verdict_name(SEQ_EQUIVALENT), "equivalent") == 0 &&
          strcmp(seq_verdict_name(SEQ_UNSTABLE), "unstable") == 0);
}

/* Skewed differences: the interval moves outwards on the side of the long tail (where the
 * t interval undercovers) and keeps the t bound on the other; the TOST interval likewise.
 * The reference bounds solve sqrt(n) T(W) = +-c for Hall's T by bisection (not the closed
 * form the rule uses), with scipy's critical values (the script of the scipy cases above):
 *   d = [x * 1e-3 for x in [-3,-2,-2,-1,-1,-1,0,0,1,2,4,7]]; n = 12; m = mean; sd (n - 1);
 *   G1 = sqrt(n (n-1)) / (n-2) * m3 / m2**1.5; g = 1.5 G1 (SEQ_SKEW_FACTOR); T(W) = W + g W^2/3 +
 * g^2 W^3/27 + g/(6n) lev = a1 (12/20)^3 - a1 (8/20)^3, a1 = 0.05/6; c = isf(lev/2, 11) and
 * isf(lev, 11) bounds: min/max of (m - sd W(+-c/sqrt(n))) and the t bounds m -+ c sd / sqrt(n) */
TEST(look_skewed) {
    char err[ABL_ERR_MAX];
    SeqRule r;
    CHECK(seq_rule_init(&r, LOOKS, N_LOOKS, 0.05, 0.01, 6, err) == 0);
    static const double x[12] = {-3, -2, -2, -1, -1, -1, 0, 0, 1, 2, 4, 7};
    double d[12], dm[12];
    for (int j = 0; j < 12; j++) {
        d[j] = x[j] * 1e-3;
        dm[j] = -d[j];
    }
    SeqDecision s = seq_look(&r, 3, d), m = seq_look(&r, 3, dm);
    CHECK_REL(s.skew, 1.3389722485006357, 1e-12);
    CHECK_REL(r.crit_eq[3], 3.8868401131273864, 1e-10);
    CHECK_REL(s.two_lo, -0.0031867178026090143, 1e-9); /* the t bound */
    CHECK_REL(s.eq_lo, -0.0028522568286360435, 1e-9);  /* the t bound */
    /* Hall's upper bounds, 0.009477847634089483 (t's: 0.0038534) and 0.009213746891896071
     * (t's: 0.0035189), lie beyond SEQ_SKEW_MAX_WIDEN times the t half-width: capped there */
    double half2 = r.crit[3] * s.sd / sqrt(12.0), half1 = r.crit_eq[3] * s.sd / sqrt(12.0);
    CHECK_REL(s.diff - half2, -0.0031867178026090143, 1e-9);
    CHECK_REL(s.diff - half1, -0.0028522568286360435, 1e-9);
    CHECK(s.diff + SEQ_SKEW_MAX_WIDEN * half2 < 0.009477847634089483);
    CHECK(s.diff + SEQ_SKEW_MAX_WIDEN * half1 < 0.009213746891896071);
    CHECK_REL(s.two_hi, s.diff + SEQ_SKEW_MAX_WIDEN * half2, 1e-12);
    CHECK_REL(s.eq_hi, s.diff + SEQ_SKEW_MAX_WIDEN * half1, 1e-12);
    /* the mirror image: the mirror interval, bit for bit */
    CHECK(m.skew == -s.skew && m.two_lo == -s.two_hi && m.two_hi == -s.two_lo &&
          m.eq_lo == -s.eq_hi && m.eq_hi == -s.eq_lo);
    /* the TOST interval lies inside +-0.01: equivalent, and that is the interval it gives */
    CHECK(s.verdict == SEQ_EQUIVALENT && m.verdict == SEQ_EQUIVALENT && s.lo == s.eq_lo &&
          s.hi == s.eq_hi);
    /* deterministic: the same differences, the same bits */
    SeqDecision again = seq_look(&r, 3, d);
    CHECK(again.diff == s.diff && again.sd == s.sd && again.skew == s.skew &&
          again.two_lo == s.two_lo && again.two_hi == s.two_hi && again.eq_lo == s.eq_lo &&
          again.eq_hi == s.eq_hi && again.verdict == s.verdict);
}

/* The rule's versions (a resumed sweep keeps the one it began with): 1 the symmetric t
 * interval, equivalence read off it; 2 Hall's uncapped (look_skewed's reference bounds,
 * bisected with scipy's critical values); 3 capped, what seq_rule_init gives. An unknown
 * version is refused and changes nothing. */
TEST(rule_versions) {
    char err[ABL_ERR_MAX];
    SeqRule r;
    CHECK(seq_rule_init(&r, LOOKS, N_LOOKS, 0.05, 0.01, 6, err) == 0);
    CHECK(r.version == SEQ_RULE_VERSION && SEQ_RULE_VERSION == 3);
    static const double x[12] = {-3, -2, -2, -1, -1, -1, 0, 0, 1, 2, 4, 7};
    double d[12];
    for (int j = 0; j < 12; j++)
        d[j] = x[j] * 1e-3;
    SeqDecision v3 = seq_look(&r, 3, d);
    CHECK(seq_rule_version(&r, 1) == 0 && r.version == 1);
    SeqDecision v1 = seq_look(&r, 3, d);
    double half = r.crit[3] * v1.sd / sqrt(12.0);
    CHECK_REL(v1.two_lo, v1.diff - half, 1e-12);
    CHECK_REL(v1.two_hi, v1.diff + half, 1e-12);
    CHECK(v1.eq_lo == v1.two_lo && v1.eq_hi == v1.two_hi && r.crit_eq[3] == r.crit[3]);
    CHECK(seq_rule_version(&r, 2) == 0);
    SeqDecision v2 = seq_look(&r, 3, d);
    CHECK_REL(v2.two_lo, -0.0031867178026090143, 1e-9);
    CHECK_REL(v2.two_hi, 0.009477847634089483, 1e-9);
    CHECK_REL(v2.eq_hi, 0.009213746891896071, 1e-9);
    CHECK_REL(r.crit_eq[3], 3.8868401131273864, 1e-10);
    CHECK(seq_rule_version(&r, 3) == 0);
    SeqDecision again = seq_look(&r, 3, d);
    CHECK(again.two_lo == v3.two_lo && again.two_hi == v3.two_hi && again.eq_hi == v3.eq_hi);
    CHECK(v3.two_hi < v2.two_hi); /* the cap */
    CHECK(seq_rule_version(&r, 0) == -1 && seq_rule_version(&r, 4) == -1 && r.version == 3);
}

/* The quickstart's layers1 contrast at its last look (looks 3, 5, 8; alpha 0.05 over 3
 * contrasts): eight differences between +0.020 and +0.058, sample skewness G1 -0.78. Hall's
 * inverse alone put the lower bound at -0.014 (1 + g c / sqrt(n) < 0: past the cubic's turning
 * point), so "unresolved" though every seed says worse; capped at twice the t half-width it
 * stays above 0, and the verdict is worse. */
TEST(look_skew_capped) {
    char err[ABL_ERR_MAX];
    SeqRule r;
    static const int looks[3] = {3, 5, 8};
    CHECK(seq_rule_init(&r, looks, 3, 0.05, 0.03, 3, err) == 0);
    static const double d[8] = {0.0582, 0.0485, 0.0310, 0.0459, 0.0491, 0.0549, 0.0372, 0.0203};
    SeqDecision s = seq_look(&r, 2, d);
    CHECK(s.skew < -0.75 && s.skew > -0.8);
    double half = r.crit[2] * s.sd / sqrt(8.0);
    CHECK_REL(s.two_lo, s.diff - SEQ_SKEW_MAX_WIDEN * half, 1e-12);
    CHECK_REL(s.two_hi, s.diff + half, 1e-12); /* the short tail's side: the t bound */
    CHECK_MSG(s.verdict == SEQ_WORSE && s.two_lo > 0, "verdict %s, interval [%g, %g]",
              seq_verdict_name(s.verdict), s.two_lo, s.two_hi);
}

/* ------------------------------------------------------------ the simulation */

/* The distributions of the paired differences, each scaled to mean 0 and variance 1. */
typedef enum { D_NORMAL, D_T3, D_LOGNORMAL, D_CHISQ, D_SPIKE } DistKind;
typedef struct {
    DistKind kind;
    double param; /* lognormal: sigma of the log; chi-square: degrees of freedom; spike: its
                     chance per seed */
    const char *name;
    double spike; /* spike: its size in sds of the normal part */
} Dist;

/* The skewed ones at skewness 0.5: see docs/analysis.md for the rule's limit beyond. */
static const Dist NORMAL = {D_NORMAL, 0, "normal", 0};
static const Dist T3 = {D_T3, 3, "t, 3 df", 0};
static const Dist LOGNORMAL = {D_LOGNORMAL, 0.163, "lognormal sigma 0.163 (skewness 0.5)", 0};
static const Dist CHISQ = {D_CHISQ, 32, "chi-square 32 df (skewness 0.5)", 0};
/* Beyond: skewness 1, where the t interval alone gave 0.06-0.09; and loss spikes that hit one
 * arm of a seed, normal differences plus a jump of `spike` sds with chance `param`, on the
 * side of the contrast's tail sign (a spike of the configuration, or of the baseline). The
 * instability rule (docs/metrics.md) flags only a loss above ln V + 1, nats above any final
 * loss here, so no spike of this size is ever flagged: the rule itself must hold. */
static const Dist CHISQ8 = {D_CHISQ, 8, "chi-square 8 df (skewness 1)", 0};
static const Dist SPIKE3 = {D_SPIKE, 0.05, "normal + spikes of 3 sd, chance 0.05 (skewness 0.68)",
                            3};
static const Dist SPIKE6 = {D_SPIKE, 0.02, "normal + spikes of 6 sd, chance 0.02 (skewness 1.82)",
                            6};

/* A draw of dist; skewed ones have the sign `sign` of their long tail. */
static double gen_draw(SimRand *q, const Dist *dist, double sign) {
    switch (dist->kind) {
    case D_NORMAL:
        return sim_rand_normal(q);
    case D_T3: {
        /* t_3 / sqrt(3) = z / sqrt(chi2_3), chi2_3 = z'^2 + chi2_2, chi2_2 = -2 log U */
        double z = sim_rand_normal(q), w = sim_rand_normal(q);
        return z / sqrt(-2 * log(sim_rand_unif(q)) + w * w);
    }
    case D_LOGNORMAL: {
        double s2 = dist->param * dist->param;
        return sign * (exp(dist->param * sim_rand_normal(q)) - exp(s2 / 2)) /
               sqrt((exp(s2) - 1) * exp(s2));
    }
    case D_CHISQ: {
        double k = dist->param;
        return sign * (2 * sim_rand_gamma(q, k / 2) - k) / sqrt(2 * k);
    }
    case D_SPIKE: {
        /* centred and scaled: the mixture's mean p S and variance 1 + p (1 - p) S^2 */
        double p = dist->param, S = dist->spike, z = sim_rand_normal(q);
        double jump = sim_rand_unif(q) < p ? S : 0;
        return (z + sign * (jump - p * S)) / sqrt(1 + p * (1 - p) * S * S);
    }
    }
    return 0;
}

#define N_CON 6
#define MAX_N 20
#define DELTA 0.01
#define ALPHA 0.05

typedef struct {
    const char *name;
    double diff[N_CON]; /* true differences */
    double sd[N_CON];   /* sd of the paired differences */
    int shared;         /* contrasts share the baseline's noise (correlation 1/2) */
} Scenario;

/* Study B's spreads: sd of the paired differences 0.006-0.014 (docs/studies.md). */
#define SDS                                                                                        \
    { 0.0092, 0.0083, 0.0070, 0.0064, 0.0072, 0.0137 }
/* Wider spreads, sd >= 1.4 delta: "equivalent" can then rarely stop a null contrast early, so
 * every contrast runs to the last look and spends its whole budget. */
#define SDS_WIDE                                                                                   \
    { 0.014, 0.014, 0.016, 0.018, 0.020, 0.025 }
static const Scenario SCENARIOS[] = {
    {"all null", {0, 0, 0, 0, 0, 0}, SDS, 0},
    {"all null, shared baseline", {0, 0, 0, 0, 0, 0}, SDS, 1},
    {"all at the margin", {DELTA, -DELTA, DELTA, -DELTA, DELTA, -DELTA}, SDS, 0},
    {"large, null and margin", {-0.087, 0.069, 0, 0, DELTA, -DELTA}, SDS, 1},
    {"study B's small effects", {0.0129, 0, -0.009, 0.0051, -0.0124, 0.0074}, SDS, 0},
    {"all null, sd >= 1.4 delta", {0, 0, 0, 0, 0, 0}, SDS_WIDE, 0},
};
#define N_SCEN (sizeof SCENARIOS / sizeof SCENARIOS[0])
/* the direction of each contrast's skew: both tails meet both margins */
static const double SKEW[N_CON] = {1, 1, -1, -1, 1, -1};

static int false_verdict(SeqVerdict v, double diff) {
    return (v == SEQ_BETTER && diff >= 0) || (v == SEQ_WORSE && diff <= 0) ||
           (v == SEQ_EQUIVALENT && fabs(diff) >= DELTA);
}

typedef struct {
    long studies, errors; /* studies with any false verdict */
    double mean_n;        /* seeds per contrast at its stop */
} SimResult;

/* Runs `studies` studies of the scenario under rule r: each contrast looked at look by look,
 * stopping at its first verdict. */
static SimResult simulate(const SeqRule *r, const Scenario *sc, const Dist *dist, long studies,
                          uint64_t seed) {
    SimRand q;
    sim_rand_seed(&q, seed);
    SimResult res = {.studies = studies};
    double d[N_CON][MAX_N], base[MAX_N], w_own = sc->shared ? sqrt(0.5) : 1;
    long seeds = 0;
    for (long s = 0; s < studies; s++) {
        if (sc->shared)
            for (int i = 0; i < MAX_N; i++)
                base[i] = sqrt(0.5) * gen_draw(&q, dist, 1);
        int any = 0;
        for (int c = 0; c < N_CON; c++) {
            for (int i = 0; i < MAX_N; i++)
                d[c][i] = sc->diff[c] + sc->sd[c] * (w_own * gen_draw(&q, dist, SKEW[c]) +
                                                     (sc->shared ? base[i] : 0));
            for (int k = 0; k < r->n_looks; k++) {
                SeqDecision dec = seq_look(r, k, d[c]);
                if (dec.verdict == SEQ_OPEN) continue;
                any |= false_verdict(dec.verdict, sc->diff[c]);
                seeds += dec.n;
                break;
            }
        }
        res.errors += any;
    }
    res.mean_n = (double)seeds / ((double)studies * N_CON);
    return res;
}

/* The Clopper-Pearson interval at 99% (two-sided) for k successes in n: its upper end solves
 * P(Bin(n, p) <= k) = 0.005, i.e. I_p(k + 1, n - k) = 0.995; the lower end
 * I_p(k, n - k + 1) = 0.005. Bisection on the incomplete beta function. */
static double cp_solve(double a, double b, double target) {
    double lo = 0, hi = 1;
    for (int i = 0; i < 100; i++) {
        double mid = (lo + hi) / 2;
        if (distrib_incbeta(a, b, mid) < target)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

static double cp_upper(long k, long n) {
    return k >= n ? 1 : cp_solve(k + 1, n - k, 0.995);
}
static double cp_lower(long k, long n) {
    return k <= 0 ? 0 : cp_solve(k, n - k + 1, 0.005);
}

#define STUDIES 100000

/* The harness: every scenario under one distribution; 0 when each scenario's upper bound is
 * <= alpha, else the number of scenarios that fail. Prints one line per scenario. */
static int harness(const SeqRule *r, const char *rule_name, const Dist *dist, const Scenario *scen,
                   int n_scen, long studies, double *worst_lower) {
    int failed = 0;
    *worst_lower = 0;
    for (int i = 0; i < n_scen; i++) {
        SimResult res =
            simulate(r, &scen[i], dist, studies,
                     0x5e9u * 1000003u + dist->kind * 101u + (uint64_t)(scen + i - SCENARIOS));
        double up = cp_upper(res.errors, res.studies), lo = cp_lower(res.errors, res.studies);
        if (lo > *worst_lower) *worst_lower = lo;
        printf("%s, %s, %s: %ld of %ld studies with a false verdict = %.5f (99%% CP [%.5f, "
               "%.5f]), mean seeds per contrast %.2f%s\n",
               rule_name, dist->name, scen[i].name, res.errors, res.studies,
               (double)res.errors / res.studies, lo, up, res.mean_n,
               up <= ALPHA ? "" : "  <-- above alpha");
        failed += up > ALPHA;
    }
    return failed;
}

/* Scenarios [first, first + count) under dist, split in two cases per distribution (the
 * nulls; the margins and effects) to keep each CTest case short. */
static void sim_case(const Dist *dist, int first, int count) {
    char err[ABL_ERR_MAX];
    SeqRule r;
    CHECK(seq_rule_init(&r, LOOKS, N_LOOKS, ALPHA, DELTA, N_CON, err) == 0);
    double worst;
    int failed = harness(&r, "rule", dist, SCENARIOS + first, count, STUDIES, &worst);
    CHECK_MSG(failed == 0, "%d scenarios with P(any false verdict) possibly above %g", failed,
              ALPHA);
}

TEST(sim_normal_null) {
    sim_case(&NORMAL, 0, 2);
}
TEST(sim_normal_effects) {
    sim_case(&NORMAL, 2, 3);
}
TEST(sim_t3_null) {
    sim_case(&T3, 0, 2);
}
TEST(sim_t3_effects) {
    sim_case(&T3, 2, 3);
}
TEST(sim_lognormal_null) {
    sim_case(&LOGNORMAL, 0, 2);
}
TEST(sim_lognormal_effects) {
    sim_case(&LOGNORMAL, 2, 3);
}
TEST(sim_chisq_null) {
    sim_case(&CHISQ, 0, 2);
}
TEST(sim_chisq_effects) {
    sim_case(&CHISQ, 2, 3);
}
/* Each of these failed with the symmetric t interval (docs/analysis.md has the figures). */
TEST(sim_chisq_wide) {
    sim_case(&CHISQ, 5, 1);
}
TEST(sim_skew1_null) {
    sim_case(&CHISQ8, 0, 2);
}
TEST(sim_skew1_wide) {
    sim_case(&CHISQ8, 5, 1);
}
TEST(sim_spike3_wide) {
    sim_case(&SPIKE3, 5, 1);
}
TEST(sim_spike6_wide) {
    sim_case(&SPIKE6, 5, 1);
}

/* The harness must be able to fail: two invalid rules, each looked at every look with the
 * interval of a single look (so the looks multiply the error), must be flagged with their
 * lower bound above alpha, i.e. clearly. */
TEST(sim_flags_invalid_rules) {
    char err[ABL_ERR_MAX];
    SeqRule r;
    CHECK(seq_rule_init(&r, LOOKS, N_LOOKS, ALPHA, DELTA, N_CON, err) == 0);
    double a1 = ALPHA / N_CON, worst;
    /* 1: Bonferroni over the contrasts, none over the looks (the fixed-sample t at each) */
    SeqRule fixed = r;
    for (int k = 0; k < N_LOOKS; k++) {
        fixed.level[k] = a1;
        fixed.crit[k] = distrib_t_isf(a1 / 2, LOOKS[k] - 1);
        fixed.crit_eq[k] = distrib_t_isf(a1, LOOKS[k] - 1);
    }
    int failed = harness(&fixed, "invalid: fixed-sample t at every look", &NORMAL, &SCENARIOS[0], 1,
                         20000, &worst);
    CHECK_MSG(failed == 1 && worst > ALPHA, "not flagged: lower bound %g", worst);
    /* 2: each look's own 95% interval, the naive reading; caught at the margin (equivalence) */
    SeqRule naive = r;
    for (int k = 0; k < N_LOOKS; k++) {
        naive.level[k] = ALPHA;
        naive.crit[k] = distrib_t_isf(ALPHA / 2, LOOKS[k] - 1);
        naive.crit_eq[k] = distrib_t_isf(ALPHA, LOOKS[k] - 1);
    }
    failed = harness(&naive, "invalid: unadjusted 95% at every look", &NORMAL, &SCENARIOS[2], 1,
                     20000, &worst);
    CHECK_MSG(failed == 1 && worst > ALPHA, "not flagged: lower bound %g", worst);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_sequential");
}
