#include "data_identity.h"

#include <stdio.h>
#include <string.h>

int data_identity_same(const DataIdentity *a, const DataIdentity *b) {
    return !strcmp(a->tokenizer, b->tokenizer) && !strcmp(a->vocab, b->vocab) &&
           a->vocab_size == b->vocab_size && a->val_fraction == b->val_fraction &&
           !strcmp(a->sha256, b->sha256) && a->bytes == b->bytes;
}

void data_identity_describe(const DataIdentity *d, char *out, size_t n) {
    snprintf(out, n,
             "%s (sha256 %.12s..., %lld bytes, %s vocabulary of %d %.8s..., val_fraction %g)",
             d->path, d->sha256, d->bytes, d->tokenizer, d->vocab_size, d->vocab, d->val_fraction);
}
