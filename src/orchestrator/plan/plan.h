/* The planner: expands a Spec into the ordered list of runs (docs/spec.md, "Planning").
 * Order: for each variant (baseline first), for each grid point (odometer order, last axis
 * fastest) not excluded, for each seed. Every run is validated; an invalid run's error names
 * the run and points at the grid value, variant entry or base key that made it invalid. */
#ifndef ABLATE_ORCHESTRATOR_PLAN_H
#define ABLATE_ORCHESTRATOR_PLAN_H

#include <stdint.h>

#include "spec.h"

/* The most runs a spec may plan: a guard against a grid that multiplies out by mistake,
 * not a size of anything. ABLATE_MAX_RUNS raises (or lowers) it at run time, up to
 * PLAN_MAX_RUNS_CEILING; every process that plans the sweep must see the same value. */
#define PLAN_MAX_RUNS_DEFAULT 100000
#define PLAN_MAX_RUNS_CEILING 100000000
#define PLAN_NAME_MAX         255 /* bytes of a run name (the journal keeps names up to this) */

typedef struct {
    int index;             /* position in the plan, 0-based */
    char *name;            /* "post/n_head=4/activation=gelu/seed1" */
    char id[RUN_ID_CHARS]; /* 16 lowercase hex digits: plan_run_id(cfg, seed) */
    uint64_t seed;
    RunConfig cfg;   /* fully resolved (model.vocab_size stays as specified, usually 0) */
    char *overrides; /* "model.norm=post model.n_head=4": variant then grid, canonical values
                        (knob_format), space-separated; "" for the baseline without a grid */
    int variant;     /* index into Spec.variants, or -1 for the implicit baseline */
    int *point;      /* Spec.n_axes entries: the value index on each axis (NULL if no axes) */
    int config;      /* its configuration (variant, grid point) in plan order, 0-based */
    /* tune: sweeps (plan/spec_tune.h): a tuning run's candidate (spec_tune_value), -1 for a
     * comparison run. A configuration's tuning runs come first (candidate, then tuning seed),
     * then its comparison runs, whose ids hash "<knob>=tuned" for the tuned knobs (the value
     * is chosen by the tuning runs, so the id cannot depend on it) and whose cfg holds the
     * base's values of those knobs until the choice sets them. */
    int tune_candidate;
} PlannedRun;

typedef struct {
    int n_runs;
    PlannedRun *runs;
    int n_excluded;   /* (variant, grid point) combinations dropped by grid.exclude */
    const Spec *spec; /* the spec it was built from (which must outlive it) */
} Plan;

/* Builds the plan; -1 with a one-line "FILE:LINE:COL: message" on error (p left empty).
 * Checks: every run validates (run_config_validate; vocab_size 0 counts as 256 for char and
 * byte data, data.vocab_size or 50257 for tokens), every data.path is a readable regular
 * file, no two runs share an id or a name, names fit PLAN_NAME_MAX, and the plan is not
 * empty. */
int plan_build(const Spec *s, Plan *p, char err[ABL_ERR_MAX]);
/* The limit in force: ABLATE_MAX_RUNS when set, else PLAN_MAX_RUNS_DEFAULT; -1 with a
 * message naming the variable when it is not an integer in 1..PLAN_MAX_RUNS_CEILING. */
long long plan_max_runs(char err[ABL_ERR_MAX]);
void plan_free(Plan *p);
/* Where run r got its value of knob k: the grid value or variant entry that set it, else
 * the base key (or the base/data section for a default). *from_run (if asked) is 1 when a
 * grid value or variant entry set it. */
SpecMark plan_source(const Plan *p, const PlannedRun *r, const Knob *k, int *from_run);
/* Runs each configuration plans: its seeds, plus candidates x tuning seeds with tune:. */
int plan_runs_per_config(const Spec *s);
/* Index of the run with this id, or -1. */
int plan_find_id(const Plan *p, const char *id);

/* The stable run id (run_id.h, scheme 2): a hash of the knobs that differ from their
 * defaults and the seed, printed as %016llx. */
uint64_t plan_run_hash(const RunConfig *c, uint64_t seed);
void plan_run_id(const RunConfig *c, uint64_t seed, char id[RUN_ID_CHARS]);

#endif
