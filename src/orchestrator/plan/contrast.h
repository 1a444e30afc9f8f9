/* The contrasts of a replicate: sweep (docs/spec.md, "replicate"), defined once, here: each
 * configuration (a variant at a grid point) against the baseline configuration, paired by seed
 * index (seed k of one with seed k of the other). The planner lays runs out configuration by
 * configuration, seeds innermost (plan.h), so configuration c's seed k is plan run
 * c * n_seeds + k. The baseline is the variant "baseline" (or the implicit one) at the grid
 * point replicate.baseline names (spec.h, docs/spec.md). Rank 0 journals these (REPLICATE
 * record) and the view writes them as /contrasts, which the report reads. */
#ifndef ABLATE_ORCHESTRATOR_CONTRAST_H
#define ABLATE_ORCHESTRATOR_CONTRAST_H

#include "plan.h"

#define CONTRAST_PAIRING "seed" /* how the two arms pair: by seed index */

/* The split a replicate: rule's verdicts are on: the held-out test split (final_test_loss)
 * when the plan has one (data.test_fraction > 0 in every run), else the validation split
 * (final_val_loss). Tuning and selection read validation; verdicts read test when there is
 * one, a split nothing selected on. */
typedef enum { CONTRAST_SPLIT_VAL, CONTRAST_SPLIT_TEST } ContrastSplit;
extern const char *const contrast_split_names[2]; /* "validation", "test" */

typedef struct {
    int n_seeds;         /* planned runs per configuration (replicate.seeds.max) */
    int n_configs;       /* configurations, in plan order */
    char **config_name;  /* n_configs: the run name without its "/seed<N>" part */
    int baseline;        /* the baseline's configuration index */
    int n_contrasts;     /* n_configs - 1 */
    int *config;         /* n_contrasts: contrast j compares configuration config[j] (plan
                            order, the baseline skipped) with the baseline */
    ContrastSplit split; /* the loss the rule compares (contrasts_loss) */
} Contrasts;

/* From a plan of a spec with replicate.on. -1 with a one-line "FILE:LINE:COL: message"
 * (the baseline grid point excluded by grid.exclude, a plan not laid out as above, a test
 * split in some runs and not in others: their verdicts would mix splits). */
int contrasts_build(const Plan *p, Contrasts *c, char err[ABL_ERR_MAX]);
void contrasts_free(Contrasts *c);

/* A finished run's loss the rule compares on split s: final_test_loss or final_val_loss. */
static inline double contrasts_loss(ContrastSplit s, double final_val_loss,
                                    double final_test_loss) {
    return s == CONTRAST_SPLIT_TEST ? final_test_loss : final_val_loss;
}

/* The plan index of configuration config's seed index k (0-based). */
static inline int contrasts_run(const Contrasts *c, int config, int k) {
    return config * c->n_seeds + k;
}

#endif
