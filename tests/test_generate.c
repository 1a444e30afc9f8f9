/* Generation with the KV cache (src/model/generate.c: gpt.c's forward, one position at a time,
 * with attention reading earlier keys and values from the cache) against the full forward: the
 * logits at every position agree for configs covering every model knob; after a context shift the
 * cache equals a fresh forward over the tokens it kept; and generate()'s greedy tokens equal argmax
 * of full forwards over the same windows. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/generate.h"
#include "model/gpt.h"
#include "test_util.h"
#include "worker/knobs.h"

#define TOL 1e-5 /* max |logit difference| / max |logit|: float32 round-off of two orders */

static const char *const BASE[] = {"model.vocab_size=37", "model.context=12",   "model.d_model=16",
                                   "model.n_head=2",      "model.init_std=0.1", NULL};

/* Every value of every knob the forward reads, spread over a few configs. */
static const char *const CONFIGS[][8] = {
    {NULL},
    {"model.activation=gelu", "model.norm=post", "model.position=rope", NULL},
    {"model.activation=swiglu", "model.norm=peri", "model.norm_type=layernorm",
     "model.norm_affine=true", NULL},
    {"model.qk_norm=true", "model.n_head=4", "model.n_kv_head=1", "model.position=rope",
     "model.norm_affine=true", NULL},
    {"model.activation=relu2", "model.norm=none", "model.position=none",
     "model.tie_embeddings=true", NULL},
    {"model.activation=geglu", "model.qkv_bias=true", "model.out_bias=true", "model.mlp_bias=true",
     "model.final_norm=true", "model.input_norm=false", NULL},
    {"model.activation=tanh", "model.n_head=4", "model.n_kv_head=2", "model.qk_norm=true",
     "model.norm_type=layernorm", "model.norm_affine=true", NULL},
    {"model.activation=silu", "model.norm=post", "model.norm_type=layernorm", NULL},
    {"model.activation=gelu_tanh", "model.rope_base=500", "model.position=rope", NULL},
    {"model.activation=reglu", "model.norm=peri", "model.mlp_ratio=2.5", NULL},
    /* routing is per token, so the cache routes each token as the full forward does */
    {"model.moe_experts=4", "model.moe_top_k=2", "model.activation=gelu", "model.mlp_bias=true",
     NULL},
    {"model.n_head=4", "model.moh_shared=1", "model.moh_top_k=2", "model.moe_experts=3",
     "model.moe_layers=every_other", "model.position=rope", NULL},
};

/* The base config plus sets, weights from a fixed seed, and its KV cache. */
static int make_model(GPT *m, KVCache *kc, const char *const *sets) {
    RunConfig rc;
    run_config_default(&rc);
    char err[ABL_ERR_MAX];
    for (const char *const *s = BASE; *s; s++)
        CHECK_MSG(knob_assign(&rc, *s, err) == 0, "%s: %s", *s, err);
    for (const char *const *s = sets; *s; s++)
        CHECK_MSG(knob_assign(&rc, *s, err) == 0, "%s: %s", *s, err);
    if (gpt_alloc(m, &rc.model, 1, rc.model.context, err) != 0) {
        CHECK_MSG(0, "gpt_alloc: %s", err);
        return -1;
    }
    gpt_init_weights(m, 7);
    if (kvcache_alloc(kc, m, err) != 0) {
        CHECK_MSG(0, "kvcache_alloc: %s", err);
        gpt_free(m);
        return -1;
    }
    return 0;
}

/* max |a - b| / max |b| over n values */
static double rel_err(const float *a, const float *b, int n) {
    double d = 0.0, s = 1e-30;
    for (int i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        s = fmax(s, fabs((double)b[i]));
    }
    return d / s;
}

/* Logits of the last position of a full forward over tokens[0..n). */
static const float *forward_last(GPT *m, const int32_t *tokens, int n) {
    gpt_forward(m, tokens, NULL, 1, n);
    return gpt_logits(m) + (size_t)(n - 1) * m->cfg.vocab_size;
}

static void label(char *buf, size_t size, const char *const *sets) {
    buf[0] = 0;
    for (const char *const *s = sets; *s; s++)
        snprintf(buf + strlen(buf), size - strlen(buf), "%s ", *s);
    if (!buf[0]) snprintf(buf, size, "(base)");
}

TEST(cache_matches_forward) {
    for (size_t k = 0; k < sizeof CONFIGS / sizeof CONFIGS[0]; k++) {
        char name[512];
        label(name, sizeof name, CONFIGS[k]);
        GPT m;
        KVCache kc;
        if (make_model(&m, &kc, CONFIGS[k]) != 0) continue;
        int T = m.cfg.context, V = m.cfg.vocab_size, keep = T / 2;
        int32_t tok[13];
        uint64_t s = 99 + k;
        for (int i = 0; i <= T; i++)
            tok[i] = (int32_t)(test_splitmix64(&s) /* any fixed pseudo-random source will do */ %
                               (uint64_t)V);
        /* every position of a full context */
        gpt_forward(&m, tok, NULL, 1, T);
        float *full = malloc(sizeof(float) * (size_t)T * V);
        memcpy(full, gpt_logits(&m), sizeof(float) * (size_t)T * V);
        kc.len = 0;
        double worst = 0.0;
        for (int t = 0; t < T; t++)
            worst = fmax(worst, rel_err(kvcache_step(&kc, tok[t]), full + (size_t)t * V, V));
        CHECK_MSG(worst <= TOL, "%s: cache vs forward, positions 0..%d: %.3g", name, T - 1, worst);
        /* a context shift: the last `keep` tokens again from position 0, then one more */
        kc.len = 0;
        const float *lc = NULL;
        for (int t = T - keep; t <= T; t++)
            lc = kvcache_step(&kc, tok[t]);
        double e = rel_err(lc, forward_last(&m, tok + T - keep, keep + 1), V);
        CHECK_MSG(e <= TOL, "%s: after a shift: %.3g", name, e);
        free(full);
        kvcache_free(&kc);
        gpt_free(&m);
    }
}

/* generate(), greedy, through two context shifts: each token is the argmax of a full forward
 * over the tokens the cache holds by the shift rule (keep the last context/2), and at the end
 * the cache holds exactly that window: one more step equals a full forward over it. A token
 * whose best two logits are closer than the round-off could go either way, so the token
 * comparison stops there (it never did in practice). */
TEST(generate_greedy) {
    const char *const sets[] = {"model.position=rope", "model.activation=gelu",
                                "model.init_std=0.5", NULL};
    GPT m;
    KVCache kc;
    if (make_model(&m, &kc, sets) != 0) return;
    int T = m.cfg.context, V = m.cfg.vocab_size, keep = T / 2, n = 3 * T;
    int32_t prompt[] = {3, 1, 4, 1, 5}, out[36], hist[64];
    generate(&kc, prompt, 5, n, 0.0, 1, out);
    int len = 5, start = 0, compared = 0, tie = 0;
    memcpy(hist, prompt, sizeof prompt);
    for (int i = 0; i < n; i++) {
        const float *l = forward_last(&m, hist + start, len - start);
        int best = 0, second = -1;
        for (int j = 1; j < V; j++)
            if (l[j] > l[best]) best = j;
        for (int j = 0; j < V; j++)
            if (j != best && (second < 0 || l[j] > l[second])) second = j;
        tie = tie || l[best] - l[second] < 1e-4f * fabsf(l[best]);
        if (!tie) {
            CHECK_MSG(out[i] == best, "greedy token %d: generate %d, full forward %d", i, out[i],
                      best);
            compared++;
        }
        hist[len++] = out[i];
        if (i < n - 1 && len - 1 - start == T) start = len - keep; /* the shift */
    }
    CHECK_MSG(compared >= 2 * T, "only %d of %d tokens compared", compared, n);
    /* the cache holds hist[start, len - 1): the last token was returned, not stepped */
    CHECK_MSG(kc.len == len - 1 - start, "cache holds %d tokens, expected %d", kc.len,
              len - 1 - start);
    if (kc.len < T) {
        double e = rel_err(kvcache_step(&kc, hist[len - 1]),
                           forward_last(&m, hist + start, len - start), V);
        CHECK_MSG(e <= TOL, "cache after generate vs forward over its window: %.3g", e);
    }
    kvcache_free(&kc);
    gpt_free(&m);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_generate");
}
