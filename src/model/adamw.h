/* AdamW (Loshchilov & Hutter): decoupled weight decay, bias-corrected moments. */
#ifndef ABLATE_MODEL_ADAMW_H
#define ABLATE_MODEL_ADAMW_H

#include <stddef.h>

#include "gpt.h"

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
} AdamW;

/* One update of n parameters at optimizer step t (1-based). Weight decay only when decay
 * is set (2-D tensors), as p -= lr * wd * p before the Adam step, as torch.optim.AdamW. */
void adamw_update(float *p, const float *g, float *m, float *v, size_t n, int decay,
                  const AdamW *opt, long t);

/* The optimizer step of a whole model in one pass over its parameters, gradients and the
 * moments m, v (laid out as m->params): every gradient scaled by `scale` as it is read
 * (gradient clipping; the gradients themselves are left as they are, unclipped: writing
 * them back cost an eighth of the pass's memory traffic), then adamw_update's arithmetic
 * with each tensor's decay flag. Bit-identical to a separate pass g *= scale followed by
 * adamw_update per tensor: the same float operations in the same order, minus two reads
 * and a write of every gradient. */
void adamw_step(GPT *model, float *m, float *v, float scale, const AdamW *opt, long t);

#endif
