/* The sweep spec: a YAML file naming a base configuration, grid axes, named variants and
 * seeds (docs/spec.md). spec_load parses and type-checks it against the knob table and
 * remembers where every value was written, so the planner (plan.h) can point errors at the
 * line and column that produced a bad run. Every error is one line "FILE:LINE:COL: message";
 * --set overrides use the pseudo-file "--set" with the argument's number as LINE and the
 * column inside the argument. */
#ifndef ABLATE_ORCHESTRATOR_SPEC_H
#define ABLATE_ORCHESTRATOR_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "worker/knobs.h"

/* Where a value was written. file is the spec's path (Spec.path) or the static "--set";
 * line/col are 1-based. line 0 means "nowhere" (a default). */
typedef struct {
    const char *file;
    int line, col;
} SpecMark;

/* One knob value as written: text after ${VAR} expansion, already known to parse. */
typedef struct {
    const Knob *knob;
    char *text;
    SpecMark mark; /* of the value */
} SpecAssign;

/* One grid axis: a plain key (n_keys 1) or a zip group whose keys advance together. */
typedef struct {
    int n_keys;
    SpecMark *key_marks; /* n_keys: where each key is written */
    int n_points;        /* values per key (equal across a zip group) */
    SpecAssign *cells;   /* n_points * n_keys: point p, key k at cells[p * n_keys + k] */
    int zip;             /* came from grid.zip */
} SpecAxis;

/* A named set of overrides around base. */
typedef struct {
    char *name;
    SpecMark mark; /* of the name */
    int n_assign;
    SpecAssign *assign; /* file order */
} SpecVariant;

/* A partial assignment: runs whose resolved config matches all of it are dropped. */
typedef struct {
    SpecMark mark; /* of the exclude entry */
    int n_assign;
    SpecAssign *assign;
    RunConfig match; /* base with the assignments applied (compared with knob_equal) */
} SpecExclude;

/* replicate: (docs/spec.md, "Replicate until resolved"): seeds are added per configuration
 * until every contrast (each configuration against the baseline, or the grid's main effects
 * and interactions: Spec.contrasts, plan/contrast.h; paired by seed index) is settled by
 * the sequential rule (plan/sequential.h). The plan holds every
 * configuration x max seeds (seeds 0..max-1, so run ids are as stable as with `seeds: max`);
 * the adaptive scheduler decides which of them train. */
#define SPEC_MAX_LOOKS 32 /* = SEQ_MAX_LOOKS */
typedef struct {
    int on;        /* a replicate: section was given */
    SpecMark mark; /* of the replicate key */
    int min, max;  /* seeds per configuration: the first and the last look */
    int n_looks;   /* looks[0] == min < ... < looks[n_looks-1] == max */
    int looks[SPEC_MAX_LOOKS];
    double delta;      /* resolve: the equivalence margin in nats (> 0) */
    double alpha;      /* family-wise error over all contrasts and looks (default 0.05) */
    double core_hours; /* budget.core_hours; 0 = no budget */
    /* The baseline configuration: the variant "baseline" (or the implicit one when there
     * are no variants) at the grid point replicate.baseline names (required with a grid). */
    int *baseline_point; /* n_axes entries: the value index on each axis (NULL: no grid) */
    SpecMark baseline_mark;
    /* where resolve, alpha and looks are written (the replicate key's mark when absent), for
     * a refusal that names the key (a --resume under another rule) */
    SpecMark delta_mark, alpha_mark, looks_mark;
} SpecReplicate;

/* tune: (docs/spec.md, "Tuning each configuration"): every configuration of the grid/variants
 * is tuned on its own over the candidate values of one or more knobs (the product of their
 * value lists, last knob fastest), on tuning seeds disjoint from the comparison seeds, by
 * the validation loss (successive halving with factor eta, plan/spec_tune.h); its comparison
 * runs then train at its chosen values. */
#define SPEC_TUNE_MAX_KNOBS      4
#define SPEC_TUNE_MAX_CANDIDATES 256
#define SPEC_TUNE_TEXT_MAX       64 /* bytes of a candidate value, NUL included */
typedef struct {
    int on;        /* a tune: section was given */
    SpecMark mark; /* of the tune key */
    int n_knobs;
    const Knob *knobs[SPEC_TUNE_MAX_KNOBS];
    SpecMark knob_marks[SPEC_TUNE_MAX_KNOBS];
    int n_values[SPEC_TUNE_MAX_KNOBS];
    SpecAssign *values[SPEC_TUNE_MAX_KNOBS]; /* a log range's values carry the range's mark */
    int n_candidates;                        /* the product of n_values */
    int n_seeds;
    uint64_t *seeds; /* the tuning seeds, disjoint from Spec.seeds */
    SpecMark seeds_mark;
    int eta;           /* successive halving keeps ceil(n / eta) candidates a rung (default 3) */
    double first_rung; /* the first rung's fraction of the budget; 0: eta^-rungs (default) */
} SpecTune;
/* The family of contrasts (the top-level key contrasts:). */
typedef enum {
    SPEC_CONTRASTS_VS_BASE = 0, /* each configuration against the baseline (the default) */
    SPEC_CONTRASTS_MAIN,        /* main_effects: each level of each factor vs its base level */
    SPEC_CONTRASTS_INTERACTIONS /* interactions: the main effects and every two-way one */
} SpecContrasts;
/* "vs_base", "main_effects", "interactions". */
const char *spec_contrasts_name(SpecContrasts c);

typedef struct {
    char *path; /* as given (used as FILE in messages) */
    char *text; /* the raw spec text, NUL-terminated, for storing with the results */
    size_t text_len;
    char *description; /* optional top-level "description", or NULL */

    /* Defaults, then base.preset, then data/base keys, then --set. The train budgets
     * (steps/tokens/seconds) are exclusive: when any budget is set explicitly, the ones
     * left at their defaults are zeroed (here and again per run in the planner). */
    RunConfig base;
    SpecMark *base_src; /* knob_count entries, indexed like knob_table: where base got the
                           value (a key, base.preset, or a --set); line 0 = the default */
    char preset[32];    /* "" if none */
    SpecMark preset_mark, base_mark, data_mark; /* line 0 if absent */
    char **sets;                                /* copies of the --set assignments */
    int n_sets;

    int n_axes;
    size_t axes_cap;       /* allocated entries of axes (util/grow.h) */
    SpecAxis *axes;        /* file order; a zip group sits where "zip" is written */
    int n_variants;        /* 0 = one implicit, unlabelled baseline */
    SpecVariant *variants; /* "baseline" (always empty) first if present, then file order */
    int n_excludes;
    SpecExclude *excludes;
    int n_seeds;
    uint64_t *seeds; /* "seeds: N" gives 0..N-1; a list gives its values; default {0} */
    SpecMark seeds_mark;
    /* contrasts: (docs/spec.md, "Factorial contrasts"): the family of contrasts a replicate:
     * sweep decides (plan/contrast.h); line 0 in contrasts_mark when absent (vs_base). */
    SpecContrasts contrasts;
    SpecMark contrasts_mark;
    SpecReplicate replicate; /* .on = 0 without a replicate: section */
    /* ladder: (docs/spec.md): a zip axis of model sizes, placed after the grid's axes */
    int ladder;           /* a ladder: section was given */
    int ladder_axis;      /* its index in axes (valid when ladder) */
    SpecMark ladder_mark; /* of the ladder key */
    SpecTune tune;        /* .on = 0 without a tune: section (plan/spec_tune.h) */
} Spec;

/* Reads and parses path; sets are "key=value" overrides (--set) applied to base after the
 * file. On error returns -1 with err filled and s left empty (spec_free is still safe). */
int spec_load(Spec *s, const char *path, const char *const *sets, int n_sets,
              char err[ABL_ERR_MAX]);
/* Same from a string; name is used as FILE in messages and as Spec.path. */
int spec_load_string(Spec *s, const char *name, const char *text, const char *const *sets,
                     int n_sets, char err[ABL_ERR_MAX]);
void spec_free(Spec *s);

/* Expands ${VAR} and ${VAR:-default} (default used when VAR is unset or empty; it may
 * itself contain references); "$${" is a literal "${". Returns a malloc'd string, or NULL
 * with a message (not naming a file) in err. */
char *spec_expand(const char *text, char err[ABL_ERR_MAX]);

/* Helpers shared with the planner. */

/* Writes "FILE:LINE:COL: message" into err (a mark with line 0 prints as FILE:1:1; newlines
 * in the message become spaces) and returns -1. */
int spec_fail(char err[ABL_ERR_MAX], SpecMark m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The exclusive budgets, in this order: train.steps, train.tokens, train.seconds,
 * train.flops, train.tokens_per_param. */
#define SPEC_BUDGETS 5
/* k's index among the budgets, or -1 when k is none. */
int spec_budget_index(const Knob *k);
int spec_is_budget(const Knob *k);
/* If any budget was set explicitly (set[i], in the order above), zeroes the others. */
void spec_resolve_budgets(RunConfig *c, const int set[SPEC_BUDGETS]);

#endif
