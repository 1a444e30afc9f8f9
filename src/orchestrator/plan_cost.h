/* Sizes and cost of planned runs, with the vocabulary the data gives: what `ablate plan`
 * prints and how the scheduler orders work (most expensive first). */
#ifndef ABLATE_ORCHESTRATOR_PLAN_COST_H
#define ABLATE_ORCHESTRATOR_PLAN_COST_H

#include "plan.h"

typedef struct {
    long params;
    double flops_per_token, kv_bytes_per_token;
    long tokens;    /* training tokens (0 for a time budget) */
    double flops;   /* flops_per_token * tokens */
    double seconds; /* a time budget's seconds, else 0 */
} RunCost;

typedef struct {
    RunConfig cfg; /* the run's config with model.vocab_size resolved */
    RunCost c;
} PlanCost;

/* One entry per run; NULL with a message when a run's data cannot be read. */
PlanCost *plan_cost_compute(const Plan *p, char err[ABL_ERR_MAX]);
/* Estimated core-hours at a sustained FLOP rate per core. */
double plan_cost_core_hours(const PlanCost *c, int n, double flops_per_s);

#endif
