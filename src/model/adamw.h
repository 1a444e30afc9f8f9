/* AdamW (Loshchilov & Hutter): decoupled weight decay, bias-corrected moments. */
#ifndef ABLATE_MODEL_ADAMW_H
#define ABLATE_MODEL_ADAMW_H

#include <stddef.h>

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
} AdamW;

/* One update of n parameters at optimizer step t (1-based). Weight decay only when decay
 * is set (2-D tensors), as p -= lr * wd * p before the Adam step, as torch.optim.AdamW. */
void adamw_update(float *p, const float *g, float *m, float *v, size_t n, int decay,
                  const AdamW *opt, long t);

#endif
