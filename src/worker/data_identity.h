/* The identity of the data a run trained on: the tokenizer and its vocabulary's digest,
 * data.val_fraction, and the SHA-256 and size of the bytes the loader parsed (computed in
 * the same pass that read them: util/file_digest.h). Two runs trained on the same token
 * stream iff their identities are equal; the path is carried to name the file in messages
 * but is not part of the identity (the same bytes under another path are the same data). */
#ifndef ABLATE_WORKER_DATA_IDENTITY_H
#define ABLATE_WORKER_DATA_IDENTITY_H

#include <stddef.h>

#include "run_config.h"

typedef struct {
    char tokenizer[8]; /* tokenizer_names */
    char vocab[65];    /* SHA-256 (hex) of the vocabulary: char: its sorted distinct bytes;
                        * byte: the 256 bytes; tokens: "ids:N"; gpt2: GPT-2's files */
    int vocab_size;
    double val_fraction;
    double test_fraction; /* 0: no test split (and in journals written before it existed) */
    char sha256[65];      /* of the data file's bytes as parsed */
    long long bytes;
    char path[ABL_PATH_MAX];
} DataIdentity;

/* Equal data: tokenizer, vocabulary, the splits and bytes (not the path). */
int data_identity_same(const DataIdentity *a, const DataIdentity *b);
/* One source of a plan (the key every side matches data by): the same data.path, tokenizer
 * and splits (val_fraction, test_fraction); against another identity, or a run's config. */
int data_source_same(const DataIdentity *a, const DataIdentity *b);
int data_source_is(const DataIdentity *id, const DataConfig *dc);
/* One phrase for messages: "PATH (sha256 1a2b3c4d5e6f..., 1115394 bytes, char vocabulary of
 * 65, val_fraction 0.1)". */
void data_identity_describe(const DataIdentity *d, char *out, size_t n);

#endif
