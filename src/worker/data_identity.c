#include "data_identity.h"

#include <stdio.h>
#include <string.h>

int data_identity_same(const DataIdentity *a, const DataIdentity *b) {
    return !strcmp(a->tokenizer, b->tokenizer) && !strcmp(a->vocab, b->vocab) &&
           a->vocab_size == b->vocab_size && a->val_fraction == b->val_fraction &&
           a->test_fraction == b->test_fraction && !strcmp(a->sha256, b->sha256) &&
           a->bytes == b->bytes;
}

int data_source_same(const DataIdentity *a, const DataIdentity *b) {
    return !strcmp(a->path, b->path) && !strcmp(a->tokenizer, b->tokenizer) &&
           a->val_fraction == b->val_fraction && a->test_fraction == b->test_fraction;
}

int data_source_is(const DataIdentity *id, const DataConfig *dc) {
    return !strcmp(id->path, dc->path) && !strcmp(id->tokenizer, tokenizer_names[dc->tokenizer]) &&
           id->val_fraction == dc->val_fraction && id->test_fraction == dc->test_fraction;
}

void data_identity_describe(const DataIdentity *d, char *out, size_t n) {
    char test[48] = "";
    if (d->test_fraction > 0) snprintf(test, sizeof test, ", test_fraction %g", d->test_fraction);
    snprintf(
        out, n, "%s (sha256 %.12s..., %lld bytes, %s vocabulary of %d %.8s..., val_fraction %g%s)",
        d->path, d->sha256, d->bytes, d->tokenizer, d->vocab_size, d->vocab, d->val_fraction, test);
}
