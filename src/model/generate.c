#include "generate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h" /* softmax_row */
#include "rng.h"

/* The K and V of every layer, head and position. */
static double kv_floats(const ModelConfig *c) {
    return 2.0 * c->n_layer * model_kv_heads(c) * c->context * model_head_dim(c);
}

double kvcache_bytes(const ModelConfig *c) {
    return sizeof(float) * kv_floats(c) + gpt_acts_bytes(c, 1, 1, 0);
}

int kvcache_alloc(KVCache *kc, const GPT *m, char err[ABL_ERR_MAX]) {
    const ModelConfig *c = &m->cfg;
    size_t per = (size_t)c->n_layer * model_kv_heads(c) * c->context * model_head_dim(c);
    memset(kc, 0, sizeof *kc);
    kc->m = m;
    kc->k = calloc(2 * per, sizeof(float));
    kc->v = kc->k ? kc->k + per : NULL;
    kc->acts = gpt_acts_alloc(c, 1, 1, 0);
    if (!kc->k || !kc->acts) {
        snprintf(err, ABL_ERR_MAX, "cannot allocate the KV cache (%zu floats)", 2 * per);
        kvcache_free(kc);
        return -1;
    }
    return 0;
}

void kvcache_free(KVCache *kc) {
    free(kc->k);
    gpt_acts_free(kc->acts);
    memset(kc, 0, sizeof *kc);
}

const float *kvcache_step(KVCache *kc, int32_t token) {
    return gpt_forward_cached(kc->m, kc->acts, kc->k, kc->v, kc->len++, token);
}

static int32_t pick(const float *logits, int V, double temperature, uint64_t seed, long i,
                    float *scratch) {
    if (temperature <= 0) {
        int best = 0;
        for (int j = 1; j < V; j++)
            if (logits[j] > logits[best]) best = j;
        return best;
    }
    for (int j = 0; j < V; j++)
        scratch[j] = logits[j] / (float)temperature;
    softmax_row(scratch, V);
    float u = rng_uniform(seed, RNG_STREAM_SAMPLE, (uint64_t)i), cdf = 0.0f;
    for (int j = 0; j < V; j++) {
        cdf += scratch[j];
        if (u < cdf) return j;
    }
    return V - 1;
}

void generate(KVCache *kc, const int32_t *prompt, int n_prompt, int n, double temperature,
              uint64_t seed, int32_t *out) {
    const ModelConfig *c = &kc->m->cfg;
    int Tc = c->context, V = c->vocab_size, keep = Tc / 2 > 0 ? Tc / 2 : 1;
    /* history = prompt + generated; the cache always holds a suffix of it */
    int32_t *hist = malloc(sizeof(int32_t) * (size_t)(n_prompt + n + 1));
    float *scratch = malloc(sizeof(float) * (size_t)V);
    if (!hist || !scratch) {
        free(hist);
        free(scratch);
        memset(out, 0, sizeof(int32_t) * (size_t)n);
        return;
    }
    int len = 0;
    if (n_prompt == 0) hist[len++] = 0; /* an empty prompt starts from token 0 */
    for (int i = 0; i < n_prompt; i++)
        hist[len++] = prompt[i];
    kc->len = 0;
    const float *logits = NULL;
    int start = len > Tc ? len - Tc : 0;
    for (int i = start; i < len; i++)
        logits = kvcache_step(kc, hist[i]);
    for (int i = 0; i < n; i++) {
        int32_t t = pick(logits, V, temperature, seed, i, scratch);
        out[i] = t;
        hist[len++] = t;
        if (i == n - 1) break;
        if (kc->len == Tc) { /* context shift: re-encode the last `keep` tokens */
            kc->len = 0;
            for (int j = len - keep; j < len; j++)
                logits = kvcache_step(kc, hist[j]);
        } else {
            logits = kvcache_step(kc, t);
        }
    }
    free(hist);
    free(scratch);
}
