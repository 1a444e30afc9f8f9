/* The contrasts of a replicate: sweep (docs/spec.md, "replicate"), defined once, here. The
 * planner lays runs out configuration by configuration, seeds innermost (plan.h), so
 * configuration c's seed k is plan run c * n_seeds + k. The baseline is the variant
 * "baseline" (or the implicit one) at the grid point replicate.baseline names (spec.h,
 * docs/spec.md). Every contrast is paired by seed index: its per-seed difference d_k
 * (contrasts_diff) is a fixed combination of the losses of seed k of some configurations,
 * and the sequential rule (sequential.h) decides from d_1..d_n. The family (the spec's
 * contrasts: key) is one of:
 *   vs_base       each configuration against the baseline: d_k = cell_k - baseline_k; on a
 *                 ladder, against the baseline at its own rung (the ladder axis at its value)
 *   main_effects  each level L of each factor A against A's base level: d_k is the mean,
 *                 over every combination o of the other factors' levels, of
 *                 cell(L, o)_k - cell(base, o)_k
 *   interactions  the main effects, then each two-way interaction of level L of A with
 *                 level M of B: the mean over the other factors' combinations o of
 *                 ((cell(L,M,o) - cell(L,0,o)) - cell(0,M,o)) + cell(0,0,o), seed k each
 * The factors are the grid's axes (a zip group is one factor, its level the values that
 * advance together), in file order, then the variants as one more factor named "variant"
 * whose base level is "baseline": a grid axis's main effect is averaged over the variants
 * too. A factor's base level is the baseline configuration's. A factorial family needs every
 * cell of the factorial planned (grid.exclude must drop none).
 * Rank 0 journals the contrasts (REPLICATE record, with their kind and factor levels) and
 * the view writes them as /contrasts, which the report reads. */
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

typedef enum { CONTRAST_VS_BASE = 0, CONTRAST_MAIN, CONTRAST_INTERACTION } ContrastKind;
#define CONTRAST_KINDS 3
/* "vs_base", "main", "interaction" (the kind column of /contrasts). */
const char *contrast_kind_name(int kind);

/* One configuration's part of a contrast: + or - its seed-k loss. */
typedef struct {
    int config;
    int sign; /* +1 or -1 */
} ContrastTerm;

typedef struct {
    int kind;            /* ContrastKind */
    char *label;         /* what is compared: a configuration name, "model.norm=post", or
                            "model.norm=post x model.activation=gelu" */
    char *base_label;    /* what it is compared against */
    int factor[2];       /* the factor(s) of a main effect / interaction; -1 where none */
    int level[2];        /* the level on each */
    int n_groups;        /* d_k = (sum over groups of the group's signed sum) / n_groups */
    int group_size;      /* 2 (vs_base, main) or 4 (interaction) */
    ContrastTerm *terms; /* n_groups * group_size, the first of each group with sign +1 */
} Contrast;

typedef struct {
    int family;         /* SpecContrasts */
    int n_seeds;        /* comparison runs per configuration (replicate.seeds.max) */
    int per, first;     /* plan runs per configuration, and where its comparison runs begin:
                           a tune: sweep plans its tuning runs first (plan_runs_per_config) */
    int n_configs;      /* configurations, in plan order */
    char **config_name; /* n_configs: the run name without its "/seed<N>" part */
    int baseline;       /* the baseline's configuration index */
    int n_contrasts;
    Contrast *list; /* n_contrasts, in family order (main effects before interactions) */
    /* The factors (filled for every family, used by the factorial ones) */
    int n_factors;
    char **factor_name; /* knob name ("a+b" for a zip group), or "variant" */
    int *n_levels;
    char ***level_name;  /* [factor][level]: the value as run names write it (knob_format; "x+y" for
                            a zip group) */
    int *base_level;     /* [factor]: the baseline's level */
    ContrastSplit split; /* the loss the rule compares (contrasts_loss) */
} Contrasts;

/* From a plan of a spec with replicate.on. -1 with a one-line "FILE:LINE:COL: message"
 * (the baseline grid point excluded by grid.exclude; a factorial family with a cell
 * excluded, at the contrasts: key; a plan not laid out as above; a test split in some runs
 * and not in others: their verdicts would mix splits). */
int contrasts_build(const Plan *p, Contrasts *c, char err[ABL_ERR_MAX]);
void contrasts_free(Contrasts *c);

/* A finished run's loss the rule compares on split s: final_test_loss or final_val_loss. */
static inline double contrasts_loss(ContrastSplit s, double final_val_loss,
                                    double final_test_loss) {
    return s == CONTRAST_SPLIT_TEST ? final_test_loss : final_val_loss;
}

/* The plan index of configuration config's seed index k (0-based). */
static inline int contrasts_run(const Contrasts *c, int config, int k) {
    return config * c->per + c->first + k;
}

/* The configuration of plan index i, and its seed index: -1 when i is not a comparison run
 * (a tune: sweep's tuning run). */
static inline int contrasts_config_of(const Contrasts *c, int i) {
    return i / c->per;
}
static inline int contrasts_seed_of(const Contrasts *c, int i) {
    return i % c->per - c->first;
}

/* Does contrast j use configuration config? */
int contrasts_uses(const Contrasts *c, int j, int config);

/* Contrast j's paired difference at seed index k, from loss[config] (seed k's loss of
 * each configuration; only the contrast's configurations are read). The order of the
 * arithmetic is fixed (the header's formulas, left to right), so a resumed or joined sweep
 * computes the same bits; for vs_base it is exactly cell - baseline. */
double contrasts_diff(const Contrasts *c, int j, const double *loss);

#endif
