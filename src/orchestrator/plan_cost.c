#include "plan_cost.h"

#include <stdio.h>
#include <stdlib.h>

#include "vocab.h"

PlanCost *plan_cost_compute(const Plan *p, char err[ABL_ERR_MAX]) {
    PlanCost *out = calloc((size_t)(p->n_runs > 0 ? p->n_runs : 1), sizeof *out);
    VocabCache *vc = vocab_cache_new();
    if (!out || !vc) {
        snprintf(err, ABL_ERR_MAX, "out of memory planning %d runs", p->n_runs);
        free(out);
        vocab_cache_free(vc);
        return NULL;
    }
    for (int i = 0; i < p->n_runs; i++) {
        RunConfig *cfg = &out[i].cfg;
        *cfg = p->runs[i].cfg;
        if (vocab_resolve(vc, cfg, err) != 0) {
            free(out);
            vocab_cache_free(vc);
            return NULL;
        }
        RunCost *c = &out[i].c;
        c->params = (long)model_param_count(&cfg->model);
        c->flops_per_token = model_flops_per_token(&cfg->model);
        c->kv_bytes_per_token = model_kv_bytes_per_token(&cfg->model);
        long steps = run_config_total_steps(cfg);
        c->tokens = steps > 0 ? steps * cfg->train.batch_size * (long)cfg->model.context : 0;
        c->flops = c->flops_per_token * (double)c->tokens;
        c->seconds = cfg->train.seconds;
    }
    vocab_cache_free(vc);
    return out;
}

double plan_cost_core_hours(const PlanCost *c, int n, double flops_per_s) {
    double s = 0;
    for (int i = 0; i < n; i++)
        s += c[i].c.seconds > 0 ? c[i].c.seconds : c[i].c.flops / flops_per_s;
    return s / 3600.0;
}
