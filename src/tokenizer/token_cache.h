/* The GPT-2 token cache: a text's tokens, kept on disk in llm.c's .bin format under a name
 * made of the SHA-256 of the text and of the vocabulary, so every run of a sweep (and every
 * later sweep) on the same text reads them instead of tokenizing again. Safe when several
 * ranks or jobs start at once: one tokenizes under a lock file while the others wait, and
 * the file appears by rename, whole. */
#ifndef ABLATE_WORKER_TOKEN_CACHE_H
#define ABLATE_WORKER_TOKEN_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "bpe.h"

#define TOKEN_CACHE_ENV "ABLATE_CACHE_DIR"

/* The cache directory: $ABLATE_CACHE_DIR, else $XDG_CACHE_HOME/ablate, else
 * $HOME/.cache/ablate; "" when none can be named (then nothing is cached). */
void token_cache_dir(char *out, size_t cap);

/* The tokens of text (the contents of data file `path`), from the cache or encoded and then
 * cached. text_sha256: the text's digest when the caller has it (hex), else NULL. A cache that
 * cannot be used is a warning on stderr, never an error. Returns the count (*ids malloc'd), or -1
 * with a message. */
long token_cache_encode(Bpe *b, const char *path, const unsigned char *text, size_t len,
                        const char *text_sha256, int32_t **ids, char err[ABL_ERR_MAX]);

#endif
