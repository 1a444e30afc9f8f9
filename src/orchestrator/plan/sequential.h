/* Replicate until resolved: the sequential rule that decides, from paired seed differences,
 * whether a contrast (a configuration against its baseline) is settled.
 *
 * A contrast is looked at when seeds 1..n of both arms are durable, for n in the spec's
 * look schedule (replicate.looks). Each look yields a confidence interval for the mean
 * paired difference Δ = loss(configuration) - loss(baseline) that is valid simultaneously
 * over every look and every contrast (family-wise level alpha). From it:
 *   excludes 0, Δ < 0          better   (lower loss)
 *   excludes 0, Δ > 0          worse
 *   inside (-delta, +delta)    equivalent within ±delta
 *   otherwise                  open (unresolved at the last look)
 * Both "better/worse" and "equivalent" are read off the same interval at the full level:
 * at most one of the nulls Δ = 0 and |Δ| >= delta is true (partitioning principle, Finner &
 * Strassburger 2002). docs/analysis.md documents the rule, its formulas and why it holds;
 * tests/test_sequential.c checks its error rate by simulation.
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
} SeqRule;

/* Fills r and checks its arguments. 0, or -1 with a one-line message naming the bad
 * argument (the spec reader prefixes file, line and key). */
int seq_rule_init(SeqRule *r, const int *looks, int n_looks, double alpha, double delta,
                  int n_contrasts, char err[ABL_ERR_MAX]);

typedef struct {
    int look;           /* index into looks */
    int n;              /* pairs used: looks[look] */
    double diff;        /* mean paired difference */
    double sd;          /* sample standard deviation of the differences */
    double lo, hi;      /* the interval at the look's level */
    SeqVerdict verdict; /* SEQ_OPEN when not settled; SEQ_UNRESOLVED when open at the last */
} SeqDecision;

/* The look number `look` of one contrast: d holds its looks[look] paired differences, seeds
 * 1..n in seed order (never more: seeds beyond the look never enter it). */
SeqDecision seq_look(const SeqRule *r, int look, const double *d);

#endif
