/* The runs the sequential rule (src/orchestrator/plan/sequential.h) saves: at
 * study B's measured effects and spreads (docs/studies.md, the 5-seed table: each contrast's
 * mean paired difference and the sd of its paired differences, recovered from its 95% t
 * interval), simulate STUDIES studies of the 10 contrasts with normal paired differences and
 * count
 *   sequential  the runs of the rule (looks 3,5,8,12,20; alpha 0.05; delta 0.01): each
 *               configuration runs the seeds of the look where its contrast stopped, the
 *               baseline as many as the longest contrast;
 *   fixed       one look at n seeds for every arm, Bonferroni over the 10 contrasts at the
 *               same alpha (the same family-wise error), the same verdicts (better / worse /
 *               equivalent within delta off the interval), at the smallest n whose expected
 *               number of contrasts settled correctly (the power) is at least the rule's;
 * and the ratio sequential / fixed (target <= 0.7). Then the saving over three families of
 * 10 contrasts at study B's spreads (study B's effects; a mix of large, null and margin
 * effects; all null), as expected runs against the fixed design at the maximum of 20 seeds,
 * and the rule's family-wise error (6 contrasts, as tests/test_sequential.c) under skewed
 * null differences by skewness, at study B's spreads and at sd >= 1.4 delta, and under
 * one-sided loss spikes: the limits docs/analysis.md states. Every figure for the rule and,
 * beside it, for the rule before the skewness correction (the symmetric t interval, and
 * "equivalent" off the two-sided interval), computed from the same draws.
 * Deterministic (xoshiro256**, fixed seeds).
 *
 *   sequential_runs [STUDIES]   (bench/sequential_runs.sh builds and runs it) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "orchestrator/plan/sequential.h"
#include "util/distrib.h"
#include "util/sim_rand.h"

/* ------------------------------------------------------------ random numbers */

/* chi-square with k degrees of freedom, centred and scaled to variance 1 (k = 0: normal) */
static double rng_chisq_std(SimRand *g, int k) {
    if (k == 0) return sim_rand_normal(g);
    if (k == 1) {
        double z = sim_rand_normal(g);
        return (z * z - 1) / M_SQRT2;
    }
    return (2 * sim_rand_gamma(g, k / 2.0) - k) / sqrt(2.0 * k);
}

/* ------------------------------------------------------------ study B */

/* docs/studies.md, study B (5 seeds): difference and its 95% t interval per contrast. */
static const struct {
    const char *name;
    double diff, lo, hi;
} STUDY_B[] = {
    {"context32", -0.0868, -0.0982, -0.0753}, {"d_model64", -0.0751, -0.0852, -0.0649},
    {"layers1", 0.0693, 0.0590, 0.0796},      {"layers4", -0.0469, -0.0582, -0.0355},
    {"heads2", 0.0129, 0.0042, 0.0216},       {"heads8", -0.0000, -0.0104, 0.0103},
    {"gelu", -0.0090, -0.0169, -0.0011},      {"postnorm", 0.0051, -0.0038, 0.0140},
    {"rope", -0.0124, -0.0294, 0.0047},       {"gqa2", 0.0074, 0.0003, 0.0145},
};
#define NC        10
#define MAX_FIXED 80
static const int LOOKS[] = {3, 5, 8, 12, 20};
#define N_LOOKS 5
#define ALPHA   0.05
#define DELTA   0.01

static double g_sd[NC];

/* settled correctly: a verdict, and a true one */
static int correct(SeqVerdict v, double diff) {
    switch (v) {
    case SEQ_BETTER:
        return diff < 0;
    case SEQ_WORSE:
        return diff > 0;
    case SEQ_EQUIVALENT:
        return fabs(diff) < DELTA;
    default:
        return 0;
    }
}

static int is_false(SeqVerdict v, double diff) {
    return (v == SEQ_BETTER || v == SEQ_WORSE || v == SEQ_EQUIVALENT) && !correct(v, diff);
}

/* The rule before the skewness correction, for comparison: the symmetric t interval at the
 * look's level, "equivalent" read off that same two-sided interval. */
static SeqVerdict old_look(const SeqRule *r, int look, const double *d) {
    SeqDecision s = seq_look(r, look, d); /* its mean and sd, the same bits */
    double half = r->crit[look] * s.sd / sqrt((double)s.n), lo = s.diff - half, hi = s.diff + half;
    if (hi < 0) return SEQ_BETTER;
    if (lo > 0) return SEQ_WORSE;
    if (lo > -r->delta && hi < r->delta) return SEQ_EQUIVALENT;
    return look == r->n_looks - 1 ? SEQ_UNRESOLVED : SEQ_OPEN;
}

static SeqVerdict look_with(int old, const SeqRule *r, int look, const double *d) {
    return old ? old_look(r, look, d) : seq_look(r, look, d).verdict;
}

typedef struct {
    double runs, settled, fwe; /* per study: expected runs, contrasts settled, P(false) */
    double n_mean[NC], p_settled[NC];
} SeqResult;

/* The sequential procedure under rule r (old: the rule before) on a family of NC contrasts
 * with true differences diff at study B's spreads: each contrast stops at its first verdict. */
static SeqResult run_family(const SeqRule *r, int old, const double diff[NC], long studies) {
    SimRand g;
    sim_rand_seed(&g, 20);
    double d[MAX_FIXED];
    SeqResult res = {0};
    long fwe = 0;
    for (long s = 0; s < studies; s++) {
        int longest = 0, any_false = 0;
        for (int c = 0; c < NC; c++) {
            for (int i = 0; i < LOOKS[N_LOOKS - 1]; i++)
                d[i] = diff[c] + g_sd[c] * sim_rand_normal(&g);
            for (int k = 0; k < N_LOOKS; k++) {
                SeqVerdict v = look_with(old, r, k, d);
                if (v == SEQ_OPEN) continue;
                int ok = correct(v, diff[c]);
                any_false |= is_false(v, diff[c]);
                res.p_settled[c] += ok;
                res.settled += ok;
                res.n_mean[c] += LOOKS[k];
                res.runs += LOOKS[k];
                if (LOOKS[k] > longest) longest = LOOKS[k];
                break;
            }
        }
        res.runs += longest; /* the baseline */
        fwe += any_false;
    }
    res.runs /= studies;
    res.settled /= studies;
    res.fwe = (double)fwe / studies;
    for (int c = 0; c < NC; c++) {
        res.n_mean[c] /= studies;
        res.p_settled[c] /= studies;
    }
    return res;
}

static double g_diff_b[NC];

static SeqResult run_sequential(const SeqRule *r, long studies) {
    return run_family(r, 0, g_diff_b, studies);
}

/* The fixed design at n seeds per arm: expected contrasts settled, and per contrast. */
static double run_fixed(int n, long studies, double p_c[NC]) {
    char err[ABL_ERR_MAX];
    SeqRule f;
    int one[1] = {n};
    seq_rule_init(&f, one, 1, ALPHA, DELTA, NC, err); /* one look: the fixed t interval */
    SimRand g;
    sim_rand_seed(&g, 1000 + n);
    double d[MAX_FIXED], all = 0;
    for (int c = 0; c < NC; c++) {
        long ok = 0;
        for (long s = 0; s < studies; s++) {
            for (int i = 0; i < n; i++)
                d[i] = STUDY_B[c].diff + g_sd[c] * sim_rand_normal(&g);
            ok += correct(seq_look(&f, 0, d).verdict, STUDY_B[c].diff);
        }
        p_c[c] = (double)ok / studies;
        all += p_c[c];
    }
    return all;
}

/* P(any false verdict) of 6 contrasts, all null, each with sd `sd` of its paired
 * differences, under rule r6 (old: the rule before): chi-square paired differences with k
 * degrees of freedom (0: normal), long tails alternating in sign; or, for spike_p > 0, normal
 * differences plus a jump of spike_s sds with chance spike_p (one arm's loss spike), centred
 * and scaled to sd. */
static double skewed_null_fwe_at(const SeqRule *r6, int old, int k, double sd, double spike_p,
                                 double spike_s, long studies) {
    SimRand g;
    sim_rand_seed(&g, 77 + (uint64_t)k);
    double d[MAX_FIXED];
    long bad = 0;
    double v = sqrt(1 + spike_p * (1 - spike_p) * spike_s * spike_s);
    for (long s = 0; s < studies; s++) {
        int any = 0;
        for (int c = 0; c < 6; c++) {
            double sign = c % 2 ? -1 : 1;
            for (int i = 0; i < LOOKS[N_LOOKS - 1]; i++) {
                double x = sign * rng_chisq_std(&g, k);
                if (spike_p > 0) {
                    double jump = sim_rand_unif(&g) < spike_p ? spike_s : 0;
                    x = (x + sign * (jump - spike_p * spike_s)) / v;
                }
                d[i] = sd * x;
            }
            for (int j = 0; j < N_LOOKS; j++) {
                SeqVerdict dec = look_with(old, r6, j, d);
                if (dec == SEQ_OPEN) continue;
                any |= is_false(dec, 0);
                break;
            }
        }
        bad += any;
    }
    return (double)bad / studies;
}

static double skewed_null_fwe(const SeqRule *r6, int k, long studies) {
    return skewed_null_fwe_at(r6, 0, k, 0.008, 0, 0, studies);
}

/* For comparison only, the same rule (same union bound, same validity argument) with another
 * spending function of the information fraction t: the power family a' t^rho (Kim & DeMets
 * 1987; the rule is rho = 3), or, for rho = 0, the Lan-DeMets O'Brien-Fleming type
 * 2 (1 - Phi(z_{1-a'/2} / sqrt(t))) (Lan & DeMets 1983), which spends almost nothing early. */
static SeqRule rule_spending(const SeqRule *base, double rho) {
    SeqRule r = *base;
    double a1 = base->alpha / base->n_contrasts, spent = 0;
    double z = -distrib_norm_quantile(a1 / 2);
    for (int k = 0; k < base->n_looks; k++) {
        double t = (double)base->looks[k] / base->looks[base->n_looks - 1];
        double cum = k == base->n_looks - 1 ? a1
                     : rho > 0              ? a1 * pow(t, rho)
                                            : erfc(z / sqrt(2 * t));
        r.level[k] = cum - spent;
        spent = cum;
        r.crit[k] = distrib_t_isf(r.level[k] / 2, base->looks[k] - 1);
    }
    return r;
}

int main(int argc, char **argv) {
    long studies = argc > 1 ? atol(argv[1]) : 20000;
    if (studies < 100) {
        fprintf(stderr, "sequential_runs: STUDIES must be >= 100\n");
        return 2;
    }
    double t975 = distrib_t_isf(0.025, 4);
    for (int c = 0; c < NC; c++) {
        g_sd[c] = (STUDY_B[c].hi - STUDY_B[c].lo) / 2 * sqrt(5.0) / t975;
        g_diff_b[c] = STUDY_B[c].diff;
    }

    char err[ABL_ERR_MAX];
    SeqRule r, r6;
    if (seq_rule_init(&r, LOOKS, N_LOOKS, ALPHA, DELTA, NC, err) ||
        seq_rule_init(&r6, LOOKS, N_LOOKS, ALPHA, DELTA, 6, err)) {
        fprintf(stderr, "sequential_runs: %s\n", err);
        return 1;
    }
    printf("sequential_runs: study B's %d contrasts, looks", NC);
    for (int k = 0; k < N_LOOKS; k++)
        printf(" %d", LOOKS[k]);
    printf(", alpha %g, delta %g, %ld simulated studies, normal paired differences\n", ALPHA, DELTA,
           studies);
    printf("rule: critical t");
    for (int k = 0; k < N_LOOKS; k++)
        printf(" %.4g", r.crit[k]);
    printf(" at n =");
    for (int k = 0; k < N_LOOKS; k++)
        printf(" %d", LOOKS[k]);
    printf("\n");

    SeqResult seq = run_sequential(&r, studies);
    /* the fixed design: the smallest n that settles as many contrasts */
    double fix_c[NC], prev = 0, fix = 0;
    int n_star = 0;
    for (int n = 2; n <= MAX_FIXED && !n_star; n++) {
        double got = run_fixed(n, studies, fix_c);
        if (got >= seq.settled)
            n_star = n, fix = got;
        else
            prev = got;
    }
    if (!n_star) {
        printf("fixed: no n <= %d settles as many contrasts\n", MAX_FIXED);
        return 0;
    }
    printf("\n| contrast | difference | sd of paired differences | sequential: mean seeds | "
           "sequential: P(settled) | fixed at n = %d: P(settled) |\n|---|--:|--:|--:|--:|--:|\n",
           n_star);
    for (int c = 0; c < NC; c++)
        printf("| %s | %+.4f | %.4f | %.1f | %.3f | %.3f |\n", STUDY_B[c].name, STUDY_B[c].diff,
               g_sd[c], seq.n_mean[c], seq.p_settled[c], fix_c[c]);
    printf("\nsequential: %.1f runs expected (10 configurations + the baseline), %.2f of 10 "
           "contrasts settled correctly, P(any false verdict) = %.4f\n",
           seq.runs, seq.settled, seq.fwe);
    printf("fixed, same power: n = %d seeds per arm (%.2f settled; at n = %d: %.2f), %d runs\n",
           n_star, fix, n_star - 1, prev, 11 * n_star);
    printf("ratio sequential / fixed (same family-wise error and power): %.3f (target <= 0.7)\n",
           seq.runs / (11.0 * n_star));
    printf("ratio sequential / fixed at max = %d seeds (%d runs): %.3f\n", LOOKS[N_LOOKS - 1],
           11 * LOOKS[N_LOOKS - 1], seq.runs / (11.0 * LOOKS[N_LOOKS - 1]));

    /* the saving over families: study B's effects; a mix (the four large, two null, the two
     * margins, two small); all null; each at study B's spreads */
    static const struct {
        const char *name;
        double diff[NC];
    } FAMILIES[] = {
        {"study B's effects", {0}},
        {"mixed: -0.087, -0.075, +0.069, -0.047, 0, 0, +delta, -delta, +0.0129, -0.009",
         {-0.0868, -0.0751, 0.0693, -0.0469, 0, 0, DELTA, -DELTA, 0.0129, -0.009}},
        {"all null", {0}},
    };
    printf(
        "\nthe saving by family (10 contrasts, study B's spreads), expected runs against the "
        "fixed design at %d seeds (%d runs):\n| family | runs | ratio | settled | P(any false) "
        "| before: runs | ratio | settled | P(any false) |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|"
        "\n",
        LOOKS[N_LOOKS - 1], 11 * LOOKS[N_LOOKS - 1]);
    for (size_t f = 0; f < sizeof FAMILIES / sizeof FAMILIES[0]; f++) {
        const double *diff = f == 0 ? g_diff_b : FAMILIES[f].diff;
        SeqResult a = run_family(&r, 0, diff, studies), b = run_family(&r, 1, diff, studies);
        double full = 11.0 * LOOKS[N_LOOKS - 1];
        printf("| %s | %.1f | %.3f | %.2f | %.4f | %.1f | %.3f | %.2f | %.4f |\n", FAMILIES[f].name,
               a.runs, a.runs / full, a.settled, a.fwe, b.runs, b.runs / full, b.settled, b.fwe);
    }

    printf("\nfamily-wise error, 6 contrasts all null, %ld studies each: chi-square paired "
           "differences (skewness sqrt(8/k), long tails alternating in sign), and normal ones "
           "with one-sided spikes\n| differences | skewness | sd 0.008: rule | before | sd 0.014 "
           "(1.4 delta): rule | before |\n|---|--:|--:|--:|--:|--:|\n",
           studies);
    static const int KS[] = {0, 32, 16, 8, 4, 2};
    for (size_t j = 0; j < sizeof KS / sizeof KS[0]; j++) {
        char k_name[32];
        snprintf(k_name, sizeof k_name, KS[j] ? "chi-square %d df" : "normal", KS[j]);
        printf("| %s | %.2f | %.4f | %.4f | %.4f | %.4f |\n", k_name,
               KS[j] ? sqrt(8.0 / KS[j]) : 0.0,
               skewed_null_fwe_at(&r6, 0, KS[j], 0.008, 0, 0, studies),
               skewed_null_fwe_at(&r6, 1, KS[j], 0.008, 0, 0, studies),
               skewed_null_fwe_at(&r6, 0, KS[j], 0.014, 0, 0, studies),
               skewed_null_fwe_at(&r6, 1, KS[j], 0.014, 0, 0, studies));
    }
    static const double SPIKES[][2] = {{0.01, 4}, {0.01, 8}, {0.02, 3}, {0.02, 6}, {0.02, 8},
                                       {0.05, 3}, {0.05, 4}, {0.05, 6}, {0.1, 2},  {0.1, 3}};
    for (size_t j = 0; j < sizeof SPIKES / sizeof SPIKES[0]; j++) {
        double p = SPIKES[j][0], S = SPIKES[j][1], var = 1 + p * (1 - p) * S * S;
        char name[64];
        snprintf(name, sizeof name, "normal + spikes of %g sd, chance %g", S, p);
        printf("| %s | %.2f | %.4f | %.4f | %.4f | %.4f |\n", name,
               p * (1 - p) * (1 - 2 * p) * S * S * S / (var * sqrt(var)),
               skewed_null_fwe_at(&r6, 0, 0, 0.008, p, S, studies),
               skewed_null_fwe_at(&r6, 1, 0, 0.008, p, S, studies),
               skewed_null_fwe_at(&r6, 0, 0, 0.014, p, S, studies),
               skewed_null_fwe_at(&r6, 1, 0, 0.014, p, S, studies));
    }

    printf("\nfor comparison, other spending functions (same union bound; runs against the fixed "
           "design of the same power, found the same way):\n| spending | critical t at n = 3, 5, "
           "8, 12, 20 | runs | settled | fixed n | ratio | FWE all null, normal | FWE all null, "
           "skewness 0.5 |\n|---|---|--:|--:|--:|--:|--:|--:|\n");
    static const double RHOS[] = {3, 2, 0};
    for (size_t j = 0; j < sizeof RHOS / sizeof RHOS[0]; j++) {
        SeqRule a = j ? rule_spending(&r, RHOS[j]) : r; /* j = 0: the rule itself */
        SeqRule a6 = j ? rule_spending(&r6, RHOS[j]) : r6;
        SeqResult sr = run_sequential(&a, studies);
        int nf = 0;
        for (int n = 2; n <= MAX_FIXED && !nf; n++)
            if (run_fixed(n, studies, fix_c) >= sr.settled) nf = n;
        char name[40];
        if (!j)
            snprintf(name, sizeof name, "power, rho 3 (the rule)");
        else if (RHOS[j] > 0)
            snprintf(name, sizeof name, "power, rho %g", RHOS[j]);
        else
            snprintf(name, sizeof name, "Lan-DeMets O'Brien-Fleming type");
        printf("| %s | %.4g, %.4g, %.4g, %.4g, %.4g | %.1f | %.2f | %d | %.3f | %.4f | %.4f |\n",
               name, a.crit[0], a.crit[1], a.crit[2], a.crit[3], a.crit[4], sr.runs, sr.settled, nf,
               nf ? sr.runs / (11.0 * nf) : NAN, skewed_null_fwe(&a6, 0, studies),
               skewed_null_fwe(&a6, 32, studies));
    }
    return 0;
}
