/* GPT-2's byte-level BPE tokenizer: the vocabulary (encoder.json: token -> id; vocab.bpe:
 * merges in rank order), GPT-2's pre-tokenization pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * matched by hand, the byte-to-unicode alphabet, and the merges applied lowest rank first.
 * Text is bytes: an invalid UTF-8 sequence is kept as its raw bytes (one "other" character
 * to the pattern, as Python's surrogateescape would make it), so decode(encode(x)) == x
 * for every byte string. */
#ifndef ABLATE_WORKER_BPE_H
#define ABLATE_WORKER_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "util/sizes.h"
#include "util/sha256.h"

#define BPE_GPT2_VOCAB    50257
#define BPE_GPT2_MERGES   50000
#define BPE_ENCODER_FILE  "encoder.json"
#define BPE_MERGES_FILE   "vocab.bpe"
#define BPE_VOCAB_ENV     "ABLATE_GPT2_VOCAB"
#define BPE_VOCAB_SUBDIR  "data/gpt2" /* beside the build directory (scripts/install-deps.sh) */
#define BPE_VOCAB_DIR_MAX 1024

typedef struct Bpe Bpe;

/* The directory GPT-2's vocabulary is read from: $ABLATE_GPT2_VOCAB if set, else the first
 * of <dir of the ablate binary>/../data/gpt2 and <dir of the binary>/../share/ablate/gpt2
 * that holds encoder.json (the first when neither does, so errors name a place). */
void bpe_vocab_dir(char out[BPE_VOCAB_DIR_MAX]);

/* Reads and checks the vocabulary in dir. A missing or damaged file is an error naming it
 * (and the line or byte offset where it goes wrong). */
Bpe *bpe_load(const char *dir, char err[ABL_ERR_MAX]);
void bpe_free(Bpe *b);

int bpe_vocab_size(const Bpe *b);
/* SHA-256 (hex) over both vocabulary files' digests: half of the token cache's key. */
const char *bpe_vocab_digest(const Bpe *b);

/* Encodes len bytes of text; *ids is malloc'd (the caller frees it). Returns the number of
 * ids, or -1 when out of memory. Pieces seen before come from an in-memory cache. */
long bpe_encode(Bpe *b, const unsigned char *text, size_t len, int32_t **ids);

/* The bytes of token id (*len of them), or NULL for an id outside the vocabulary. */
const unsigned char *bpe_token_bytes(const Bpe *b, int32_t id, int *len);

#endif
