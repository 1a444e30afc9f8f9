#include "run_id.h"

#include "id_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_knob(uint64_t h, const Knob *k, const RunConfig *c) {
    char val[ABL_PATH_MAX + 64];
    h = fnv1a(h, k->name, strlen(k->name));
    h = fnv1a(h, "=", 1);
    int n = knob_format(c, k, val, sizeof val);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof val) n = (int)sizeof val - 1;
    h = fnv1a(h, val, (size_t)n);
    return fnv1a(h, "\n", 1);
}

static uint64_t hash_seed(uint64_t h, uint64_t seed) {
    char val[32];
    int n = snprintf(val, sizeof val, "seed=%llu\n", (unsigned long long)seed);
    return fnv1a(h, val, (size_t)n);
}

uint64_t run_id_hash_table(const Knob *table, int n, const RunConfig *c, const uint64_t *seed) {
    RunConfig def;
    run_config_default(&def);
    uint64_t h = FNV1A_BASIS;
    for (int i = 0; i < n; i++)
        if (!knob_equal(c, &def, &table[i])) h = hash_knob(h, &table[i], c);
    return seed ? hash_seed(h, *seed) : h;
}

uint64_t run_id_hash(const RunConfig *c, const uint64_t *seed) {
    return run_id_hash_table(knob_table, knob_count, c, seed);
}

uint64_t run_id_hash_tuned(const RunConfig *c, const Knob *const *tuned, int n_tuned,
                           const uint64_t *seed) {
    RunConfig def;
    run_config_default(&def);
    uint64_t h = FNV1A_BASIS;
    for (int i = 0; i < knob_count; i++) {
        const Knob *k = &knob_table[i];
        int is_tuned = 0;
        for (int j = 0; j < n_tuned; j++)
            is_tuned |= tuned[j] == k;
        if (is_tuned) {
            h = fnv1a(h, k->name, strlen(k->name));
            h = fnv1a(h, "=tuned\n", 7);
        } else if (!knob_equal(c, &def, k)) {
            h = hash_knob(h, k, c);
        }
    }
    return seed ? hash_seed(h, *seed) : h;
}

uint64_t run_id_hash_v1_table(const Knob *table, int n, const RunConfig *c, uint64_t seed) {
    uint64_t h = FNV1A_BASIS;
    for (int i = 0; i < n; i++)
        h = hash_knob(h, &table[i], c);
    return hash_seed(h, seed);
}

/* Scheme 1 hashed every knob of ablate 0.1.0, in its table order: exactly these, frozen, so
 * that a knob added since (one row in knobs.c) leaves the ids of 0.1.0's journals alone. */
static const char *const v1_knobs[] = {
    "model.vocab_size",     "model.context",      "model.d_model",      "model.n_layer",
    "model.n_head",         "model.n_kv_head",    "model.mlp_ratio",    "model.activation",
    "model.norm",           "model.norm_type",    "model.norm_affine",  "model.norm_eps",
    "model.input_norm",     "model.final_norm",   "model.qk_norm",      "model.position",
    "model.rope_base",      "model.qkv_bias",     "model.out_bias",     "model.mlp_bias",
    "model.tie_embeddings", "model.init_std",     "train.lr",           "train.beta1",
    "train.beta2",          "train.eps",          "train.weight_decay", "train.schedule",
    "train.warmup_steps",   "train.min_lr",       "train.grad_clip",    "train.batch_size",
    "train.steps",          "train.tokens",       "train.seconds",      "train.eval_every",
    "train.eval_tokens",    "train.log_every",    "data.path",          "data.tokenizer",
    "data.val_fraction",    "data.vocab_size",    "stats.every",        "sample.prompt",
    "sample.tokens",        "sample.temperature", "save_weights"};

uint64_t run_id_hash_v1(const RunConfig *c, uint64_t seed) {
    enum { N = sizeof v1_knobs / sizeof *v1_knobs };
    static Knob table[N];
    static int n = -1;
    if (n < 0) { /* a 0.1.0 knob since removed is simply not hashed (none is, so far) */
        int k = 0;
        for (int i = 0; i < N; i++) {
            const Knob *kn = knob_find(v1_knobs[i]);
            if (kn) table[k++] = *kn;
        }
        n = k;
    }
    return run_id_hash_v1_table(table, n, c, seed);
}

void run_id_format(uint64_t h, char out[RUN_ID_CHARS]) {
    snprintf(out, RUN_ID_CHARS, "%016llx", (unsigned long long)h);
}
