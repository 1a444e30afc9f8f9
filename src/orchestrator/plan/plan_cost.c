#include "plan_cost.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/addr_space.h"
#include "util/grow.h"
#include "worker/train.h"
#include "vocab.h"

#define DEFAULT_MEMORY_FRACTION 0.8

static double g_memory_limit; /* bytes; 0 = the default */

void plan_cost_set_memory_limit(double bytes) {
    g_memory_limit = bytes > 0 ? bytes : 0;
}

/* A cgroup memory limit (v2 memory.max or v1 memory.limit_in_bytes) of this process's
 * cgroup, or 0 when there is none: SLURM and containers limit jobs below the machine. */
static double cgroup_limit(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[1024], path[1200];
    double best = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        const char *rel = NULL, *file = NULL;
        if (!strncmp(line, "0::", 3))
            rel = line + 3, file = "/sys/fs/cgroup%s/memory.max";
        else if (strstr(line, ":memory:"))
            rel = strstr(line, ":memory:") + 8,
            file = "/sys/fs/cgroup/memory%s/memory.limit_in_bytes";
        if (!rel) continue;
        snprintf(path, sizeof path, file, strcmp(rel, "/") ? rel : "");
        FILE *g = fopen(path, "r");
        double v = 0;
        if (g && fscanf(g, "%lf", &v) == 1 && v > 0 && v < 0x1p62 && (best == 0 || v < best))
            best = v; /* "max" and v1's near-2^63 "unlimited" are no limit */
        if (g) fclose(g);
    }
    fclose(f);
    return best;
}

/* `ulimit -v`: what is left of it once ablate itself is counted (addr_space.h); -1 when
 * there is no such limit. */
static double address_space_left(char *why, size_t n) {
    double as = addr_space_limit();
    if (as <= 0) return -1;
    double used = addr_space_in_use() + ADDR_SPACE_LATER, left = as > used ? as - used : 0;
    if (why) {
        char b[32], u[32];
        plan_cost_format_bytes(as, b, sizeof b);
        plan_cost_format_bytes(used, u, sizeof u);
        snprintf(why, n,
                 "what the address-space limit (ulimit -v) of %s leaves after the %s ablate "
                 "maps besides its runs",
                 b, u);
    }
    return left;
}

double plan_cost_memory_limit(char *why, size_t n) {
    char as_why[160];
    double as = address_space_left(as_why, sizeof as_why), lim;
    if (g_memory_limit > 0) {
        if (why) snprintf(why, n, "--max-run-memory");
        lim = g_memory_limit;
    } else {
        double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
        double cg = cgroup_limit(), base = cg > 0 && (cg < phys || phys <= 0) ? cg : phys;
        if (!(base > 0)) base = 0x1p62; /* unknown: no limit worth the name */
        if (why) {
            char b[32];
            plan_cost_format_bytes(base, b, sizeof b);
            snprintf(why, n, "%.0f%% of the %s of %s; --max-run-memory changes it",
                     100 * DEFAULT_MEMORY_FRACTION, b,
                     base == cg ? "this cgroup's memory limit" : "physical memory");
        }
        lim = DEFAULT_MEMORY_FRACTION * base;
    }
    if (as >= 0 && as < lim) {
        if (why) snprintf(why, n, "%s", as_why);
        lim = as;
    }
    return lim;
}

void plan_cost_format_bytes(double bytes, char *buf, size_t n) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (bytes >= 1024 && u < 6)
        bytes /= 1024, u++;
    if (u == 0)
        snprintf(buf, n, "%.0f B", bytes);
    else
        snprintf(buf, n, bytes < 10 ? "%.2f %s" : (bytes < 100 ? "%.1f %s" : "%.0f %s"), bytes,
                 units[u]);
}

/* The error of run i, at the spec entry that gave it knob (named, e.g. "data.path"); the
 * run is named when a grid value or variant entry is to blame. Returns -1. */
static int fail_at(const Plan *p, int i, const char *knob, char err[ABL_ERR_MAX], const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));
static int fail_at(const Plan *p, int i, const char *knob, char err[ABL_ERR_MAX], const char *fmt,
                   ...) {
    char msg[ABL_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int from_run = 0;
    SpecMark m = plan_source(p, &p->runs[i], knob_find(knob), &from_run);
    if (from_run) return spec_fail(err, m, "run '%s': %s", p->runs[i].name, msg);
    return spec_fail(err, m, "%s", msg);
}

static int set_by_run(const Plan *p, int i, const char *knob) {
    int from_run = 0;
    plan_source(p, &p->runs[i], knob_find(knob), &from_run);
    return from_run;
}

/* The knob to blame for a data file that fails to load: a knob the message names that the
 * run itself sets (its context, its vocab_size), else the run's own data.path, else an
 * explicit data.vocab_size the message names, else data.path. */
static const char *data_culprit(const Plan *p, int i, const char *msg) {
    static const char *const knobs[] = {"model.context", "data.vocab_size", "data.val_fraction",
                                        "data.test_fraction"};
    for (int k = 0; k < 4; k++)
        if (strstr(msg, knobs[k]) && set_by_run(p, i, knobs[k])) return knobs[k];
    if (set_by_run(p, i, "data.path")) return "data.path";
    const Knob *vs = knob_find("data.vocab_size");
    if (strstr(msg, vs->name) && p->spec->base_src[vs - knob_table].line > 0) return vs->name;
    return "data.path";
}

/* The knob to blame for a run too large: the first size knob its grid value or variant sets,
 * else the base's batch size. */
static const char *memory_culprit(const Plan *p, int i) {
    static const char *const knobs[] = {"train.batch_size", "model.context",   "model.d_model",
                                        "model.n_layer",    "model.mlp_ratio", "model.vocab_size",
                                        "model.n_head",     "model.n_kv_head", "data.path"};
    for (size_t k = 0; k < sizeof knobs / sizeof *knobs; k++)
        if (set_by_run(p, i, knobs[k])) return knobs[k];
    return "train.batch_size";
}

typedef struct {
    double bytes;
    char why[160];
} MemoryLimit;

/* The checks and sizes of run i, whose data d is loaded; -1 with err filled. */
static int cost_run(const Plan *p, int i, const Dataset *d, const MemoryLimit *lim, PlanCost *out,
                    char err[ABL_ERR_MAX]) {
    RunConfig resolved = p->runs[i].cfg, *cfg = &resolved;
    if (cfg->model.vocab_size == 0) cfg->model.vocab_size = d->vocab_size;
    out->vocab_size = cfg->model.vocab_size;
    if (cfg->model.vocab_size < d->vocab_size)
        return fail_at(p, i, "model.vocab_size", err,
                       "model.vocab_size %d is smaller than the vocabulary of data file %s (%d)",
                       cfg->model.vocab_size, cfg->data.path, d->vocab_size);
    if (cfg->sample.tokens > 0) {
        int32_t ids[ABL_TEXT_MAX];
        char msg[ABL_ERR_MAX];
        if (dataset_encode(d, cfg->sample.prompt, ids, ABL_TEXT_MAX, msg) < 0)
            return fail_at(p, i, "sample.prompt", err, "sample.%s (data file %s)", msg,
                           cfg->data.path);
    }
    RunCost *c = &out->c;
    c->params = (long)model_param_count(&cfg->model);
    c->active_params = (long)model_active_param_count(&cfg->model);
    c->flops_per_token = model_flops_per_token(&cfg->model);
    c->kv_bytes_per_token = model_kv_bytes_per_token(&cfg->model);
    long steps = run_config_total_steps(cfg); /* validated: steps x B x T fits a long */
    c->tokens = steps > 0 ? steps * cfg->train.batch_size * (long)cfg->model.context : 0;
    c->flops = c->flops_per_token * (double)c->tokens;
    c->seconds = cfg->train.seconds;
    c->memory = trainer_memory_bytes(cfg, d->n_tokens);
    if (c->memory > lim->bytes) {
        char need[32], limit[32], model[32];
        plan_cost_format_bytes(c->memory, need, sizeof need);
        plan_cost_format_bytes(lim->bytes, limit, sizeof limit);
        plan_cost_format_bytes(4.0 * 4 * (double)c->params, model, sizeof model);
        return fail_at(p, i, memory_culprit(p, i), err,
                       "the run needs about %s of memory (%s for the %ld parameters with their "
                       "gradients and optimizer state; the rest mostly activations of "
                       "train.batch_size %d x model.context %d), more than the limit of %s (%s)",
                       need, model, c->params, cfg->train.batch_size, cfg->model.context, limit,
                       lim->why);
    }
    return 0;
}

void plan_cost_config(const Plan *p, const PlanCost *cost, int i, RunConfig *out) {
    *out = p->runs[i].cfg;
    out->model.vocab_size = cost[i].vocab_size;
}

PlanCost *plan_cost_compute(const Plan *p, char err[ABL_ERR_MAX]) {
    return plan_cost_compute_ids(p, NULL, NULL, err);
}

/* Keeps the identity of each distinct source once (the key data_guard.h uses). */
static int add_identity(DataIdentity **ids, int *n, size_t *cap, const DataIdentity *id) {
    for (int k = 0; k < *n; k++)
        if (data_source_same(&(*ids)[k], id)) return 0;
    if (GROW(*ids, *cap, (size_t)*n + 1) != 0) return -1;
    (*ids)[(*n)++] = *id;
    return 0;
}

PlanCost *plan_cost_compute_ids(const Plan *p, DataIdentity **ids, int *n_ids,
                                char err[ABL_ERR_MAX]) {
    if (ids) *ids = NULL, *n_ids = 0;
    size_t ids_cap = 0;
    PlanCost *out = calloc((size_t)(p->n_runs > 0 ? p->n_runs : 1), sizeof *out);
    VocabCache *vc = vocab_cache_new();
    if (!out || !vc) {
        snprintf(err, ABL_ERR_MAX, "out of memory planning %d runs", p->n_runs);
        free(out);
        vocab_cache_free(vc);
        return NULL;
    }
    MemoryLimit lim;
    lim.bytes = plan_cost_memory_limit(lim.why, sizeof lim.why);
    int bad = 0;
    for (int i = 0; i < p->n_runs && !bad; i++) {
        char msg[ABL_ERR_MAX];
        const Dataset *d = vocab_dataset(vc, &p->runs[i].cfg, msg);
        bad = d ? cost_run(p, i, d, &lim, &out[i], err)
                : fail_at(p, i, data_culprit(p, i, msg), err, "%s", msg);
        if (!bad && ids && add_identity(ids, n_ids, &ids_cap, &d->identity) != 0)
            bad = 1, snprintf(err, ABL_ERR_MAX, "out of memory planning %d runs", p->n_runs);
    }
    vocab_cache_free(vc);
    if (bad) {
        free(out);
        if (ids) free(*ids), *ids = NULL, *n_ids = 0;
        return NULL;
    }
    return out;
}

double plan_cost_core_hours(const PlanCost *c, int n, double flops_per_s) {
    double s = 0;
    for (int i = 0; i < n; i++)
        s += c[i].c.seconds > 0 ? c[i].c.seconds : c[i].c.flops / flops_per_s;
    return s / 3600.0;
}
