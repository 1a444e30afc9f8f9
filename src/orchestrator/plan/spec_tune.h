/* The tune: section of a spec (docs/spec.md, "Tuning each configuration"): its parser and
 * the successive-halving arithmetic that the planner, `ablate plan`'s cost range and the
 * scheduler share.
 *
 * Form: tune: {knobs: {train.lr: [3.0e-3, 1.0e-2, 3.0e-2]}, seeds: [1000], eta: 3,
 *              first_rung: 0.111, metric: val_loss}
 * A knob's values are a list or a log range {log: [LO, HI], n: N} (N values spaced evenly in
 * log between LO and HI, both included). The candidates are the product of the knobs' value
 * lists, last knob fastest. The tuning seeds must be disjoint from the comparison seeds
 * (seeds:), so that no comparison run's own result picks the value it trains at; the
 * selection metric is the validation loss (the test split is never read for it). */
#ifndef ABLATE_ORCHESTRATOR_SPEC_TUNE_H
#define ABLATE_ORCHESTRATOR_SPEC_TUNE_H

#include "spec.h"
#include "yaml_doc.h"

/* Parses the section at key/v into s->tune, after seeds:/replicate:, the grid and the
 * variants are known (it checks against them). 0, or -1 with "FILE:LINE:COL: message". */
int spec_tune_parse(Spec *s, const YNode *key, const YNode *v, char err[ABL_ERR_MAX]);
void spec_tune_free(SpecTune *t);

/* Candidate c's value of knob k (an index into t->values[k]). */
int spec_tune_value(const SpecTune *t, int c, int k);
/* Sets candidate c's values in cfg. */
void spec_tune_apply(const SpecTune *t, int c, RunConfig *cfg);

/* Successive halving over n candidates with factor eta: rung r (0..*n_rungs-1) trains
 * keep[r] candidates (keep[0] = n) to the fraction frac[r] of the full budget and keeps
 * ceil(keep[r] / eta) of them; the last rung, at the full budget, keeps one, the choice.
 * frac[r] = first * eta^r below the last rung; first (tune.first_rung, 0 for the default)
 * defaults to eta^-R for R rungs, standard successive halving's first rung (the one from
 * which halving by eta until one candidate is left ends at the full budget). Unlike
 * standard successive halving, the last cut's survivors (2..eta of them) all train to the
 * full budget and the choice is made there, on full-budget losses, not at a fraction of it
 * where a schedule not yet annealed favours some rates. Arrays hold up to
 * SPEC_TUNE_MAX_RUNGS entries. */
#define SPEC_TUNE_MAX_RUNGS 16
int spec_tune_rungs(int n, int eta, double first, int keep[SPEC_TUNE_MAX_RUNGS],
                    double frac[SPEC_TUNE_MAX_RUNGS]);
/* What successive halving trains, in full-budget runs per tuning seed of one configuration:
 * sum over rungs of keep[r] * (frac[r] - frac[r-1]). */
double spec_tune_budgets(int n, int eta, double first);

/* The choice among n candidates by their metric (the mean validation loss over the tuning
 * seeds; +inf for a candidate whose run diverged): the lowest, ties to the lower index (so
 * the same results give the same choice everywhere). */
int spec_tune_best(const double *metric, int n);

/* The step at which a rung at fraction frac of the budget ends for a run whose full budget
 * is total_steps: round(total_steps * frac), at least 1; the last rung's (frac 1) is
 * total_steps, and so is a time budget's unknown one (total_steps <= 0). The learning-rate
 * schedule stays the full budget's, so a run stopped at a rung and continued is the run
 * never stopped. */
long spec_tune_rung_step(long total_steps, double frac);

/* Successive halving's promotion at a rung: among the n candidates with alive[c] set, the
 * keep with the lowest metric (the mean validation loss at that rung over the tuning seeds;
 * +inf for a diverged run), ties to the lower index, get promoted[c] = 1; every other
 * promoted[c] is 0. Returns how many were promoted (min(keep, alive)). */
int spec_tune_promote(const double *metric, const unsigned char *alive, int n, int keep,
                      unsigned char *promoted);

#endif
