#include "adamw.h"

#include <math.h>

void adamw_update(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                  size_t n, int decay, const AdamW *opt, long t) {
    const float b1 = opt->beta1, b2 = opt->beta2, lr = opt->lr, eps = opt->eps;
    const float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    const float shrink = decay ? 1.0f - lr * opt->weight_decay : 1.0f;
    /* torch computes denom = sqrt(v)/sqrt(bc2) + eps and step = lr/bc1 * m/denom. */
    const float step = lr / bc1, sqrt_bc2 = sqrtf(bc2);
    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * shrink - step * mi / (sqrtf(vi) / sqrt_bc2 + eps);
    }
}
