/* Sizes and cost of planned runs, with the vocabulary the data gives: what `ablate plan`
 * prints and how the scheduler orders work (most expensive first). Computing them reads
 * every run's data, so this is also where the checks that need the data happen: the file
 * tokenizes, model.vocab_size covers it, sample.prompt encodes, and the run fits the memory
 * limit. Each failure is one "FILE:LINE:COL: message" line at the spec entry responsible. */
#ifndef ABLATE_ORCHESTRATOR_PLAN_COST_H
#define ABLATE_ORCHESTRATOR_PLAN_COST_H

#include <stddef.h>

#include "plan.h"
#include "worker/data_identity.h"

typedef struct {
    long params;
    long active_params; /* per token: params without the experts it is not routed to */
    double flops_per_token, kv_bytes_per_token;
    long tokens;    /* training tokens (0 for a time budget) */
    double flops;   /* flops_per_token * tokens */
    double seconds; /* a time budget's seconds, else 0 */
    double memory;  /* bytes the run takes while training (trainer_memory_bytes) */
} RunCost;

/* A run's cost and the one value costing resolves in its config: rank 0 keeps one config a
 * run (the plan's), not a second copy with model.vocab_size resolved (1.6 KB a run, 160 MB
 * at 10^5 runs). */
typedef struct {
    int vocab_size; /* model.vocab_size, resolved from the data when the spec left it 0 */
    RunCost c;
} PlanCost;

/* Run i's config as the journal, the file and the worker get it: the plan's, with
 * model.vocab_size resolved (the plan's own keeps the value specified, which its ids hash). */
void plan_cost_config(const Plan *p, const PlanCost *cost, int i, RunConfig *out);

/* One entry per run; NULL with a located message when a run's data cannot be read, does not
 * fit its vocabulary or prompt, or the run needs more memory than the limit. */
PlanCost *plan_cost_compute(const Plan *p, char err[ABL_ERR_MAX]);
/* The same, also giving the identity of each distinct data source (path, tokenizer,
 * val_fraction) as it was loaded (*ids malloc'd, *n_ids entries): data_guard.h takes them,
 * so the sweep loads its data once to plan and to check it. */
PlanCost *plan_cost_compute_ids(const Plan *p, DataIdentity **ids, int *n_ids,
                                char err[ABL_ERR_MAX]);
/* Estimated core-hours at a sustained FLOP rate per core. */
double plan_cost_core_hours(const PlanCost *c, int n, double flops_per_s);

/* The memory limit per run (bytes): set by --max-run-memory; 0 restores the default, 80% of
 * the machine's physical memory or of the cgroup (container, SLURM job) limit if lower.
 * Either way no more than what an address-space limit (`ulimit -v`) leaves once ablate's
 * own mappings are counted (util/addr_space.h). plan_cost_memory_limit returns it and, if
 * asked, says where it comes from. */
void plan_cost_set_memory_limit(double bytes);
double plan_cost_memory_limit(char *why, size_t n);
/* "512 B", "3.2 KiB", "1.50 GiB": bytes for people. */
void plan_cost_format_bytes(double bytes, char *buf, size_t n);

#endif
