/* ablate plan SPEC.yaml [--set key=value ...] [--json] [--max-run-memory SIZE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "cli_util.h"
#include "commands.h"
#include "orchestrator/plan/contrast.h"
#include "orchestrator/plan/plan.h"
#include "orchestrator/plan/plan_cost.h"
#include "orchestrator/plan/run_id.h"
#include "orchestrator/plan/spec_tune.h"
#include "worker/calibrate.h"
#include "util/json.h"
#include "worker/knobs.h"

/* Calibrated fixed time (train.calibrate): the phase the sweep runs before any run, K
 * timing trials per configuration one at a time, and what it costs (at 50 GFLOP/s). */
static void print_calibration(const Plan *plan, const PlanCost *cost) {
    uint64_t *seen = calloc((size_t)plan->n_runs + 1, sizeof *seen);
    int configs = 0, trials = 0, k0 = -1, uniform = 1;
    double seconds = 0;
    for (int i = 0; seen && i < plan->n_runs; i++) {
        RunConfig resolved, *c = &resolved;
        plan_cost_config(plan, cost, i, c);
        if (!(c->train.seconds > 0) || c->train.calibrate <= 0) continue;
        uint64_t h = run_id_hash(c, NULL);
        int dup = 0;
        for (int j = 0; j < configs && !dup; j++)
            dup = seen[j] == h;
        if (dup) continue;
        seen[configs++] = h;
        trials += c->train.calibrate;
        uniform &= k0 < 0 || k0 == c->train.calibrate;
        k0 = c->train.calibrate;
        double tokens = (double)(CALIB_WARMUP_STEPS + c->train.calibrate_steps) *
                        c->train.batch_size * c->model.context;
        seconds += c->train.calibrate * tokens * cost[i].c.flops_per_token / 50e9;
    }
    free(seen);
    if (!configs) return;
    if (uniform)
        printf("calibration: %d configuration(s) x %d trial(s)", configs, k0);
    else
        printf("calibration: %d configuration(s), %d trials in all", configs, trials);
    printf(" (train.calibrate; %d warm-up + train.calibrate_steps timed steps each), timed one "
           "at a time on one core before any run while every other rank idles: ~%.3g s at 50 "
           "GFLOP/s; each run then trains round(median tokens/s x train.seconds / tokens per "
           "step) steps\n",
           CALIB_WARMUP_STEPS, seconds);
}

/* A ladder: (docs/spec.md): per rung, its values, the non-embedding parameters a
 * train.tokens_per_param budget counts, and the range over the rung's runs (variants may
 * differ in size) of parameters, training tokens and FLOPs, with the rung's total. */
static void print_ladder(const Plan *plan, const PlanCost *cost) {
    const Spec *s = plan->spec;
    const SpecAxis *ax = &s->axes[s->ladder_axis];
    printf("ladder: %d rungs of", ax->n_points);
    for (int j = 0; j < ax->n_keys; j++)
        printf("%s %s", j ? "," : "", ax->cells[j].knob->name);
    if (s->base.train.tokens_per_param > 0)
        printf("; train.tokens_per_param %g (tokens per non-embedding parameter)",
               s->base.train.tokens_per_param);
    printf("\n%-5s %-32s %14s %16s %12s %12s %6s %10s\n", "rung", "values", "non-emb params",
           "params", "tokens", "PFLOP/run", "runs", "PFLOP");
    for (int p = 0; p < ax->n_points; p++) {
        char values[256] = "";
        size_t len = 0;
        for (int j = 0; j < ax->n_keys && len < sizeof values; j++) {
            const SpecAssign *c = &ax->cells[p * ax->n_keys + j];
            const char *dot = strrchr(c->knob->name, '.');
            len += (size_t)snprintf(values + len, sizeof values - len, "%s%s=%s", j ? " " : "",
                                    dot ? dot + 1 : c->knob->name, c->text);
        }
        long lo[2] = {-1, -1}, hi[2] = {-1, -1}, nonemb = -1;
        double flo = -1, fhi = -1, total = 0;
        int runs = 0;
        for (int i = 0; i < plan->n_runs; i++) {
            if (plan->runs[i].point[s->ladder_axis] != p) continue;
            const RunCost *c = &cost[i].c;
            long v[2] = {c->params, c->tokens};
            for (int k = 0; k < 2; k++) {
                if (lo[k] < 0 || v[k] < lo[k]) lo[k] = v[k];
                if (v[k] > hi[k]) hi[k] = v[k];
            }
            if (flo < 0 || c->flops < flo) flo = c->flops;
            if (c->flops > fhi) fhi = c->flops;
            if (!runs) nonemb = (long)model_nonembedding_param_count(&plan->runs[i].cfg.model);
            total += c->flops;
            runs++;
        }
        char pr[48], tr[48], fr[48];
        snprintf(pr, sizeof pr, lo[0] == hi[0] ? "%ld" : "%ld-%ld", lo[0], hi[0]);
        snprintf(tr, sizeof tr, lo[1] == hi[1] ? "%ld" : "%ld-%ld", lo[1], hi[1]);
        snprintf(fr, sizeof fr, flo == fhi ? "%.4g" : "%.3g-%.3g", flo / 1e15, fhi / 1e15);
        printf("%-5d %-32s %14ld %16s %12s %12s %6d %10.4g\n", p + 1, values, nonemb, pr, tr, fr,
               runs, total / 1e15);
    }
}

/* The identity of run i's data as planning loaded it (the key data_guard.h uses: path,
 * tokenizer, val_fraction); NULL if none matches. */
static const DataIdentity *run_identity(const RunConfig *c, const DataIdentity *ids, int n) {
    for (int k = 0; k < n; k++)
        if (!strcmp(ids[k].path, c->data.path) &&
            !strcmp(ids[k].tokenizer, tokenizer_names[c->data.tokenizer]) &&
            ids[k].val_fraction == c->data.val_fraction)
            return &ids[k];
    return NULL;
}

static void plan_usage(FILE *f) {
    fprintf(
        f, "usage: ablate plan SPEC.yaml [--set key=value ...] [--json] [--max-run-memory SIZE]\n\n"
           "Validates the spec and lists every planned run (name, id, seed, overrides,\n"
           "parameters, FLOPs/token, training tokens, estimated cost and the memory it\n"
           "needs) with totals, without training. --json prints one object per run on\n"
           "stdout, with the identity of the data it would train on (\"data\": sha256,\n"
           "bytes, tokenizer, vocab digest, path as resolved). A run needing more memory\n"
           "than --max-run-memory (default 80%% of physical memory) is refused, as\n"
           "'ablate run' and 'ablate train' refuse it.\n");
}

/* A replicate: sweep trains between min and max seeds of each configuration: the range of
 * runs and cost, and the contrasts (plan/contrast.h). */
static void print_replicate(const Plan *plan, const PlanCost *cost) {
    const SpecReplicate *r = &plan->spec->replicate;
    Contrasts c;
    char err[ABL_ERR_MAX];
    if (contrasts_build(plan, &c, err) != 0) return; /* plan_build checked it */
    double lo = 0, hi = 0; /* the comparison runs alone (a tune: sweep plans its tuning first) */
    for (int k = 0; k < c.n_configs; k++) {
        lo += plan_cost_core_hours(cost + contrasts_run(&c, k, 0), r->min, 50e9);
        hi += plan_cost_core_hours(cost + contrasts_run(&c, k, 0), c.n_seeds, 50e9);
    }
    char looks[SPEC_MAX_LOOKS * 12] = "";
    for (int i = 0; i < r->n_looks; i++)
        snprintf(looks + strlen(looks), sizeof looks - strlen(looks), "%s%d", i ? ", " : "",
                 r->looks[i]);
    char against[600];
    if (c.family == SPEC_CONTRASTS_VS_BASE) {
        snprintf(against, sizeof against, "%d contrasts against %s", c.n_contrasts,
                 c.config_name[c.baseline]);
    } else {
        int mains = 0;
        for (int j = 0; j < c.n_contrasts; j++)
            mains += c.list[j].kind == CONTRAST_MAIN;
        snprintf(against, sizeof against,
                 "%d contrasts (%s: %d main effects, %d interactions; base levels at %s)",
                 c.n_contrasts, spec_contrasts_name((SpecContrasts)c.family), mains,
                 c.n_contrasts - mains, c.config_name[c.baseline]);
    }
    printf("replicate: %d configurations x %d to %d seeds: %d to %d runs, ~%.2g to ~%.2g "
           "core-hours; looks at [%s] seeds, alpha %g over %s, equivalence within +-%g nats",
           c.n_configs, r->min, r->max, c.n_configs * r->min, c.n_configs * r->max, lo, hi, looks,
           r->alpha, against, r->delta);
    if (r->core_hours > 0) printf("; budget %g core-hours", r->core_hours);
    printf("\n");
    contrasts_free(&c);
}

/* A tune: sweep: what tuning costs next to the comparison runs. Successive halving's
 * budget is fixed by the candidate count and eta (every rung keeps ceil(n / eta)), so its
 * cost is known before any run: what the sweep trains under a step budget (a calibrated
 * one included); the upper end is every candidate trained to the full budget, what an
 * uncalibrated time budget trains (it has no steps to stop at). */
static void print_tune(const Plan *plan, const PlanCost *cost) {
    const SpecTune *t = &plan->spec->tune;
    int keep[SPEC_TUNE_MAX_RUNGS], configs = 0;
    double frac[SPEC_TUNE_MAX_RUNGS], full = 0, compare = 0;
    int n_rungs = spec_tune_rungs(t->n_candidates, t->eta, t->first_rung, keep, frac);
    for (int i = 0; i < plan->n_runs; i++) {
        double h = plan_cost_core_hours(cost + i, 1, 50e9);
        if (plan->runs[i].tune_candidate >= 0)
            full += h;
        else
            compare += h;
        if (i == 0 || plan->runs[i].config != plan->runs[i - 1].config) configs++;
    }
    double sh = full * spec_tune_budgets(t->n_candidates, t->eta, t->first_rung) / t->n_candidates;
    char rungs[SPEC_TUNE_MAX_RUNGS * 24] = "";
    for (int r = 0; r < n_rungs; r++) {
        char at[32] = "the full budget";
        if (frac[r] < 1) snprintf(at, sizeof at, "1/%.0f of the budget", 1 / frac[r]);
        snprintf(rungs + strlen(rungs), sizeof rungs - strlen(rungs), "%s%d to %s", r ? ", " : "",
                 keep[r], at);
    }
    printf("tune: %d configurations x %d candidates x %d tuning seeds: ~%.2g to ~%.2g core-hours "
           "(successive halving, eta %d: %s; every candidate to the full budget under a time "
           "budget without train.calibrate), "
           "%.2fx to %.2fx the comparison runs' ~%.2g%s\n",
           configs, t->n_candidates, t->n_seeds, sh, full, t->eta, rungs,
           compare > 0 ? sh / compare : 0, compare > 0 ? full / compare : 0, compare,
           plan->spec->replicate.on ? " (at replicate.seeds.max)" : "");
}

int cmd_plan(int argc, char **argv) {
    const char *path = NULL, *sets[256];
    int n_sets = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            plan_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc && n_sets < 256) {
            sets[n_sets++] = argv[++i];
        } else if (!strcmp(argv[i], "--max-run-memory") && i + 1 < argc) {
            double max_mem;
            if (cli_number("--max-run-memory", argv[++i], CLI_BYTES, &max_mem) != 0) return 2;
            plan_cost_set_memory_limit(max_mem);
        } else if (argv[i][0] == '-' || path) {
            log_cmd("unexpected argument '%s' (see --help)", argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        plan_usage(stderr);
        return 2;
    }
    char err[ABL_ERR_MAX];
    Spec spec;
    Plan plan = {0};
    PlanCost *cost = NULL;
    DataIdentity *ids = NULL; /* each data source as loaded: --json prints each run's */
    int n_ids = 0, rc = 2;
    if (spec_load(&spec, path, sets, n_sets, err) != 0 || plan_build(&spec, &plan, err) != 0 ||
        !(cost = plan_cost_compute_ids(&plan, &ids, &n_ids, err))) {
        char shown[4 * ABL_ERR_MAX];
        log_line("%s", text_escape(err, shown, sizeof shown));
        goto out;
    }
    double total_flops = 0, total_tokens = 0, max_memory = 0;
    if (!json)
        printf("%-5s %-40s %-16s %6s %10s %10s %11s %12s %10s %10s  %s\n", "#", "name", "id",
               "seed", "params", "active", "FLOPs/tok", "tokens", "PFLOP", "memory", "overrides");
    static char cfgjson[16384];
    for (int i = 0; i < plan.n_runs; i++) {
        const PlannedRun *r = &plan.runs[i];
        const RunCost *c = &cost[i].c;
        total_flops += c->flops;
        total_tokens += (double)c->tokens;
        if (c->memory > max_memory) max_memory = c->memory;
        if (json) {
            RunConfig cfg;
            plan_cost_config(&plan, cost, i, &cfg);
            knob_config_json(&cfg, cfgjson, sizeof cfgjson);
            printf("{\"index\":%d,\"name\":", r->index);
            json_print_string(stdout, r->name);
            /* tune_candidate: a tune: sweep's tuning run's candidate, -1 for every other run */
            printf(",\"id\":\"%s\",\"seed\":%llu,\"tune_candidate\":%d,\"overrides\":", r->id,
                   (unsigned long long)r->seed, r->tune_candidate);
            json_print_string(stdout, r->overrides);
            printf(
                ",\"params\":%ld,\"active_params\":%ld,\"flops_per_token\":%.0f,"
                "\"kv_bytes_per_token\":%.0f,\"tokens\":%ld,\"flops\":%.6g,\"memory_bytes\":%.0f,",
                c->params, c->active_params, c->flops_per_token, c->kv_bytes_per_token, c->tokens,
                c->flops, c->memory);
            /* what the run would train on: slurm/submit passes it to the job, which checks
             * that it plans the same data (sha256 first: a fixed-width field to parse) */
            const DataIdentity *id = run_identity(&cfg, ids, n_ids);
            if (id) {
                printf("\"data\":{\"sha256\":\"%s\",\"bytes\":%lld,\"tokenizer\":\"%s\","
                       "\"vocab\":\"%s\",\"path\":",
                       id->sha256, id->bytes, id->tokenizer, id->vocab);
                json_print_string(stdout, id->path);
                printf("},");
            }
            printf("\"config\":%s}\n", cfgjson);
        } else {
            char mem[32];
            plan_cost_format_bytes(c->memory, mem, sizeof mem);
            static char name[4096], over[16384]; /* values may hold control characters */
            printf("%-5d %-40s %-16s %6llu %10ld %10ld %11.4g %12ld %10.4g %10s  %s\n", r->index,
                   text_escape(r->name, name, sizeof name), r->id, (unsigned long long)r->seed,
                   c->params, c->active_params, c->flops_per_token, c->tokens, c->flops / 1e15, mem,
                   r->overrides[0] ? text_escape(r->overrides, over, sizeof over) : "(base)");
        }
    }
    if (!json) {
        char mem[32], lim[32], why[160];
        plan_cost_format_bytes(max_memory, mem, sizeof mem);
        plan_cost_format_bytes(plan_cost_memory_limit(why, sizeof why), lim, sizeof lim);
        printf("\n%d runs (%d excluded by grid.exclude), %.4g training tokens, %.4g PFLOP in all"
               "\n(~%.2g core-hours at 50 GFLOP/s per core; time budgets counted by their "
               "seconds)\nthe largest run needs about %s of memory; the limit per run is %s (%s)\n",
               plan.n_runs, plan.n_excluded, total_tokens, total_flops / 1e15,
               plan_cost_core_hours(cost, plan.n_runs, 50e9), mem, lim, why);
        if (spec.ladder) print_ladder(&plan, cost);
        if (spec.replicate.on) print_replicate(&plan, cost);
        if (spec.tune.on) print_tune(&plan, cost);
        print_calibration(&plan, cost);
    }
    rc = cli_output_ok() == 0 ? 0 : 1;
out:
    free(ids);
    free(cost);
    plan_free(&plan);
    spec_free(&spec);
    return rc;
}
