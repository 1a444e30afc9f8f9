/* Replicate until resolved: the sequential rule that decides, from paired seed differences,
 * whether a contrast (a configuration against its baseline) is settled.
 *
 * A contrast is looked at when seeds 1..n of both arms are durable, for n in the spec's
 * look schedule (replicate.looks). Each look yields a confidence interval for the mean
 * paired difference Δ = loss(configuration) - loss(baseline) that is valid simultaneously
 * over every look and every contrast (family-wise level alpha). From it:
 *   excludes 0, Δ < 0          better   (lower loss)
 *   excludes 0, Δ > 0          worse
 *   its TOST one inside ±delta equivalent within ±delta (the TOST interval: below)
 *   otherwise                  open (unresolved at the last look)
 * The interval is not the symmetric t interval: it is inverted from Hall's (1992)
 * skewness-removing transformation of the t statistic, with SEQ_SKEW_FACTOR times the
 * sample skewness, never narrower than the t interval on either side and never more than
 * SEQ_SKEW_MAX_WIDEN times as wide as it (version 3: SEQ_RULE_VERSION below; docs/analysis.md
 * gives the formulas and the simulation that chose them): the t interval alone lets a
 * skewed distribution of the differences, or one-sided loss spikes, through at the small
 * levels the rule spends. "better/worse" are read off the two-sided interval at the look's
 * level l (each side misses with l/2), "equivalent" off the two one-sided tests at level l
 * each (TOST, the 1 - 2l interval of the same construction). Why this holds the family-wise
 * level: at any true difference Δ a false verdict at a look needs a bound on the wrong side
 * of Δ, and the possible ones are (Δ = 0) either two-sided bound, chance l; (0 < |Δ| < δ)
 * the two-sided bound on the far side of 0, l/2; (|Δ| >= δ) the two-sided bound on the far
 * side of 0 or the TOST bound on the same side, nested since the TOST interval lies inside
 * the two-sided one: chance l (exactly for normal differences and the t interval;
 * approximately with the correction, which the simulation checks). Never more than l per
 * look, so the union bound over looks and contrasts keeps alpha; the partitioning principle
 * (Finner & Strassburger 2002) is this case split.
 *
 * Each contrast is decided on its own (no step-down across contrasts), so that a contrast
 * can be decided the moment its own runs are durable, whatever the others are doing. This
 * module is pure computation: no I/O, no allocation, deterministic to the bit for the same
 * inputs (the decisions are reproduced after --resume and under --join). */
#ifndef ABLATE_ORCHESTRATOR_SEQUENTIAL_H
#define ABLATE_ORCHESTRATOR_SEQUENTIAL_H

#include "util/sizes.h"

#define SEQ_MAX_LOOKS 32

typedef enum {
    SEQ_OPEN = 0,   /* not settled yet */
    SEQ_BETTER,     /* the interval excludes 0, configuration's loss lower */
    SEQ_WORSE,      /* the interval excludes 0, configuration's loss higher */
    SEQ_EQUIVALENT, /* the interval lies inside (-delta, +delta) */
    SEQ_UNRESOLVED, /* open at the last look, or when the budget ran out */
    SEQ_UNSTABLE,   /* a run of either arm was unstable or diverged (the scheduler's call) */
} SeqVerdict;

/* "open", "better", "worse", "equivalent", "unresolved", "unstable". */
const char *seq_verdict_name(SeqVerdict v);

typedef struct {
    int n_looks;
    int looks[SEQ_MAX_LOOKS]; /* seeds per arm at each look, strictly increasing, >= 2 */
    double alpha;             /* family-wise error over all contrasts and looks, (0, 0.5) */
    double delta;             /* equivalence margin in nats, > 0 */
    int n_contrasts;          /* the family (>= 1) */
    /* Derived by seq_rule_init: the two-sided level spent at each look by one contrast
     * (they sum to at most alpha / n_contrasts), and the t critical value it gives. */
    double level[SEQ_MAX_LOOKS];
    double crit[SEQ_MAX_LOOKS];
    /* the one-sided t critical value at level[k] (t quantile 1 - level[k], n - 1 degrees of
     * freedom): the TOST bounds of "equivalent" (version 1: crit[k]) */
    double crit_eq[SEQ_MAX_LOOKS];
    /* The version of the rule (SEQ_RULE_VERSION unless seq_rule_version set another) and
     * what it sets: the multiple of the sample skewness corrected for (0: the t interval) and
     * the cap on how far the correction moves a bound (0: none). */
    int version;
    double skew_factor, max_widen;
} SeqRule;

/* The rule's versions. A replicate: sweep keeps the version it began with (its REPLICATE
 * journal record says which) when a later binary resumes it, so that every look of the sweep
 * is taken by one rule and its alpha is spent as that rule spends it.
 *   1  the symmetric t interval at each look's level; "equivalent" when that two-sided
 *      interval lies inside +-delta (before the skewness correction)
 *   2  Hall's skewness-corrected interval (SEQ_SKEW_FACTOR times the sample skewness), never
 *      narrower than the t interval; "equivalent" by TOST at the full level
 *   3  as 2, the correction moving a bound out by at most SEQ_SKEW_MAX_WIDEN times the t
 *      half-width */
#define SEQ_RULE_VERSION 3

/* The multiple of the sample skewness the interval corrects for (docs/analysis.md): of 1,
 * 1.5, 2, 2.5 and 3, the smallest that held alpha at skewness 1 in the simulation (1 does
 * not: the skewness of 5-20 values underestimates the true one); each step up costs power. */
#define SEQ_SKEW_FACTOR 1.5

/* The most the correction moves a bound out: SEQ_SKEW_MAX_WIDEN times the t interval's
 * half-width. Hall's inverse grows without bound as 1 + g c / sqrt(n) nears 0, far outside
 * the first-order expansion it comes from, and the sample skewness of 5-8 differences is
 * noisy (its sd is ~0.75 at 8): uncapped, the quickstart's eight differences of +0.020 to
 * +0.058 (skewness -0.78) got the interval [-0.014, +0.058] where t gives [+0.028, +0.058].
 * The simulation (docs/analysis.md) holds alpha with the cap at 2 as without it. */
#define SEQ_SKEW_MAX_WIDEN 2.0

/* Fills r and checks its arguments. 0, or -1 with a one-line message naming the bad
 * argument (the spec reader prefixes file, line and key). */
int seq_rule_init(SeqRule *r, const int *looks, int n_looks, double alpha, double delta,
                  int n_contrasts, char err[ABL_ERR_MAX]);

/* Makes r (from seq_rule_init) the rule of version `version` (1..SEQ_RULE_VERSION); 0, or -1
 * for a version this binary does not know (r unchanged). */
int seq_rule_version(SeqRule *r, int version);

typedef struct {
    int look;              /* index into looks */
    int n;                 /* pairs used: looks[look] */
    double diff;           /* mean paired difference */
    double sd;             /* sample standard deviation of the differences */
    double skew;           /* the sample skewness (bias-adjusted G1; 0 when n < 3 or sd = 0) */
    double lo, hi;         /* the interval that decided: the two-sided one at the look's level,
                              or for "equivalent" the TOST (1 - 2 level) one; NaN if not finite */
    double two_lo, two_hi; /* the two-sided interval at the look's level */
    double eq_lo, eq_hi;   /* the TOST interval (1 - 2 level), inside the two-sided one */
    SeqVerdict verdict;    /* SEQ_OPEN when not settled; SEQ_UNRESOLVED when open at the last */
} SeqDecision;

/* The look number `look` of one contrast: d holds its looks[look] paired differences, seeds
 * 1..n in seed order (never more: seeds beyond the look never enter it). */
SeqDecision seq_look(const SeqRule *r, int look, const double *d);

#endif
