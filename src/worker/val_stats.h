/* Activation statistics over a whole evaluation (stats.val): the statistics of each
 * validation batch's forward folded into one act row per layer, split "val" (docs/metrics.md).
 * The maximum is over every validation batch, as one states "the largest activation". */
#ifndef ABLATE_WORKER_VAL_STATS_H
#define ABLATE_WORKER_VAL_STATS_H

#include "model/gpt.h"
#include "events.h"

typedef struct {
    double n, zeros, sum, sq;          /* MLP hidden values, exact zeros, sums of h and h^2 */
    double max, min, pre_max, pre_min; /* of h and of its pre-activation */
    double resid_n, resid_sq;          /* the residual stream after the block */
} ValStats;

/* Empties n_layer accumulators before an evaluation. */
void val_stats_reset(ValStats *v, int n_layer);
/* Folds in one batch's statistics s[n_layer], of a forward over resid_values residual
 * values per layer (batch x context x d_model). */
void val_stats_add(ValStats *v, const LayerStats *s, int n_layer, double resid_values);
/* Layer l's act row (split val) at step: the MLP statistics and resid_rms; the attention,
 * gradient, near-zero and routing fields are not measured (n_head 0, NaN, empty). */
void val_stats_event(const ValStats *v, const ModelConfig *c, long step, int l, ActEvent *a);

#endif
