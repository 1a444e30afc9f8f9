/* Degeneration measures of a generated sample (docs/metrics.md, "Samples"). Two kinds of
 * repetition are told apart: a collapse onto one token (a loop of newlines: `degenerate`,
 * repetition token_run) and a unit of several tokens looping to the end of the sample
 * ("the king the king ...", or "The the the ..." in characters, whose longest run of one
 * token is 1: repetition ngram_loop). */
#ifndef ABLATE_WORKER_SAMPLE_METRICS_H
#define ABLATE_WORKER_SAMPLE_METRICS_H

#include <stdint.h>

#include "events.h"

/* The longest loop unit looked for, in tokens: a line of verse in characters (~40), a
 * sentence in GPT-2 tokens. */
#define SAMPLE_LOOP_MAX_PERIOD 64

/* degenerate = the most frequent token is at least half of the sample, or one token
 * repeats for at least max(16, n/4) positions in a row.
 * The final loop: the smallest period p (1..SAMPLE_LOOP_MAX_PERIOD) whose periodic tail
 * (the last L tokens with tokens[i] == tokens[i - p]) is at least half the sample and
 * holds at least 3 units (L >= 3p); loop_period = p, loop_frac = L / n (both 0 without).
 * repetition = token_run if degenerate, else ngram_loop if there is a final loop, else
 * none. */
void sample_measure(const int32_t *tokens, int n, SampleEvent *s);

#endif
