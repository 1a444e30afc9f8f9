/* Degeneration measures of a generated sample. A model whose greedy output collapses onto
 * one token (a loop of newlines) is flagged; word-level loops, normal for tiny models,
 * are not. */
#ifndef ABLATE_WORKER_SAMPLE_METRICS_H
#define ABLATE_WORKER_SAMPLE_METRICS_H

#include <stdint.h>

#include "events.h"

/* degenerate = the most frequent token is at least half of the sample, or one token
 * repeats for at least max(16, n/4) positions in a row. */
void sample_measure(const int32_t *tokens, int n, SampleEvent *s);

#endif
