#include "adamw.h"

#include <math.h>

#include "par.h"

/* The update of one tensor; `scaled` is a constant at each call below, so each loop
 * compiles without the branch and vectorizes. */
static inline void update(float *restrict p, const float *restrict g, float *restrict m,
                          float *restrict v, size_t n, int decay, const AdamW *opt, long t,
                          int scaled, float scale) {
    const float b1 = opt->beta1, b2 = opt->beta2, lr = opt->lr, eps = opt->eps;
    const float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    const float shrink = decay ? 1.0f - lr * opt->weight_decay : 1.0f;
    /* torch computes denom = sqrt(v)/sqrt(bc2) + eps and step = lr/bc1 * m/denom. */
    const float step = lr / bc1, sqrt_bc2 = sqrtf(bc2);
    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        if (scaled) gi *= scale;
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * shrink - step * mi / (sqrtf(vi) / sqrt_bc2 + eps);
    }
}

void adamw_update(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                  size_t n, int decay, const AdamW *opt, long t) {
    update(p, g, m, v, n, decay, opt, t, 0, 1.0f);
}

/* A piece of one tensor, for par_for: elements are independent, and pieces are whole
 * multiples of 4,096 elements (par_grain), so each vector loop covers the same elements
 * for every K. */
typedef struct {
    float *p, *m, *v;
    const float *g;
    int decay;
    const AdamW *opt;
    long t;
    float scale;
} StepJob;

static void step_piece(void *ctx, size_t b, size_t e, int chunk) {
    const StepJob *j = ctx;
    (void)chunk;
    if (j->scale != 1.0f)
        update(j->p + b, j->g + b, j->m + b, j->v + b, e - b, j->decay, j->opt, j->t, 1, j->scale);
    else
        update(j->p + b, j->g + b, j->m + b, j->v + b, e - b, j->decay, j->opt, j->t, 0, 1.0f);
}

void adamw_step(GPT *model, float *m, float *v, float scale, const AdamW *opt, long t) {
    for (int i = 0; i < T_COUNT; i++) {
        const TensorInfo *ti = &model->tensors[i];
        if (ti->size == 0) continue;
        size_t o = ti->offset;
        StepJob j = {model->params + o, m + o, v + o, model->grads + o, ti->decay, opt, t, scale};
        par_for(ti->size, par_grain(4, 4096), step_piece, &j);
    }
}
