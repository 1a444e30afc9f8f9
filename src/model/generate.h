/* Autoregressive generation with a KV cache: each new token costs one token's forward.
 * When the cache reaches model.context tokens it shifts: the last context/2 tokens are
 * re-encoded at positions 0.. and generation continues (documented in docs/metrics.md). */
#ifndef ABLATE_MODEL_GENERATE_H
#define ABLATE_MODEL_GENERATE_H

#include <stdint.h>

#include "gpt.h"

typedef struct {
    const GPT *m;
    float *k, *v;  /* (L, KV, context, hd): keys and values of positions [0, len) */
    GptActs *acts; /* one position's activations: the forward is gpt.c's */
    int len;       /* cached positions */
} KVCache;

/* Bytes kvcache_alloc takes for a model of this config. */
double kvcache_bytes(const ModelConfig *c);
int kvcache_alloc(KVCache *kc, const GPT *m, char err[ABL_ERR_MAX]);
void kvcache_free(KVCache *kc);

/* Appends one token at the next position and returns its (V) logits. */
const float *kvcache_step(KVCache *kc, int32_t token);

/* Generates n tokens after the prompt. temperature <= 0 is greedy (argmax, lowest id on
 * ties); otherwise token i is drawn from softmax(logits / temperature) with
 * rng(seed, RNG_STREAM_SAMPLE, i). out receives the n new tokens. */
void generate(KVCache *kc, const int32_t *prompt, int n_prompt, int n, double temperature,
              uint64_t seed, int32_t *out);

#endif
