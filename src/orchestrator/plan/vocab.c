#include "vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VOCAB_CACHE_MAX 16

struct VocabCache {
    int n;
    DataConfig key[VOCAB_CACHE_MAX];
    int context[VOCAB_CACHE_MAX];
    Dataset data[VOCAB_CACHE_MAX];
};

VocabCache *vocab_cache_new(void) {
    return calloc(1, sizeof(VocabCache));
}

void vocab_cache_free(VocabCache *vc) {
    if (!vc) return;
    for (int i = 0; i < vc->n; i++)
        dataset_free(&vc->data[i]);
    free(vc);
}

static int same_source(const DataConfig *a, const DataConfig *b) {
    return strcmp(a->path, b->path) == 0 && a->tokenizer == b->tokenizer &&
           a->val_fraction == b->val_fraction && a->test_fraction == b->test_fraction &&
           a->vocab_size == b->vocab_size;
}

const Dataset *vocab_dataset(VocabCache *vc, const RunConfig *cfg, char err[ABL_ERR_MAX]) {
    for (int i = 0; i < vc->n; i++)
        if (same_source(&vc->key[i], &cfg->data) && vc->context[i] >= cfg->model.context)
            return &vc->data[i];
    int slot;
    if (vc->n < VOCAB_CACHE_MAX) {
        slot = vc->n++;
    } else { /* full: reuse the last slot */
        slot = VOCAB_CACHE_MAX - 1;
        dataset_free(&vc->data[slot]);
    }
    if (dataset_load(&vc->data[slot], &cfg->data, cfg->model.context, err) != 0) {
        vc->n--; /* the slot is always the last one */
        return NULL;
    }
    vc->key[slot] = cfg->data;
    vc->context[slot] = cfg->model.context;
    return &vc->data[slot];
}
