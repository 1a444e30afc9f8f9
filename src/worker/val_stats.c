#include "val_stats.h"

#include <math.h>
#include <string.h>

void val_stats_reset(ValStats *v, int n_layer) {
    for (int l = 0; l < n_layer; l++)
        v[l] = (ValStats){
            .max = -INFINITY, .min = INFINITY, .pre_max = -INFINITY, .pre_min = INFINITY};
}

void val_stats_add(ValStats *v, const LayerStats *s, int n_layer, double resid_values) {
    for (int l = 0; l < n_layer; l++) {
        ValStats *a = &v[l];
        const LayerStats *b = &s[l];
        a->resid_n += resid_values;
        a->resid_sq += b->resid_rms * b->resid_rms * resid_values;
        double n = b->h_count;
        if (!(n > 0)) continue; /* an MoE block whose experts got no row in this batch */
        a->n += n;
        a->zeros += round(b->zero_frac * n); /* zero_frac is zeros / n: this is the count */
        a->sum += b->mean * n;
        a->sq += b->rms * b->rms * n;
        a->max = fmax(a->max, b->max);
        a->min = fmin(a->min, b->min);
        a->pre_max = fmax(a->pre_max, b->pre_max);
        a->pre_min = fmin(a->pre_min, b->pre_min);
    }
}

void val_stats_event(const ValStats *v, const ModelConfig *c, long step, int l, ActEvent *a) {
    const ValStats *s = &v[l];
    memset(a, 0, sizeof *a);
    a->step = step;
    a->layer = l;
    a->split = ACT_SPLIT_VAL;
    a->zero_frac = s->n > 0 ? s->zeros / s->n : NAN;
    a->mean = s->n > 0 ? s->sum / s->n : NAN;
    a->rms = s->n > 0 ? sqrt(s->sq / s->n) : NAN;
    a->max = s->n > 0 ? s->max : NAN;
    a->min = s->n > 0 ? s->min : NAN;
    a->pre_max = s->n > 0 ? s->pre_max : NAN;
    a->pre_min = s->n > 0 ? s->pre_min : NAN;
    a->resid_rms = s->resid_n > 0 ? sqrt(s->resid_sq / s->resid_n) : NAN;
    a->grad_norm = a->near_zero_frac = NAN;
    a->n_head = 0;
    a->moe_experts = model_layer_is_moe(c, l) ? c->moe_experts : 1;
    a->router_entropy = a->moe_balance = a->moe_zloss = a->moe_dropped = a->moe_max_frac = NAN;
    a->moh_entropy = a->moh_balance = NAN;
}
