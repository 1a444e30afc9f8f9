/* The GPT-2 token cache: a text's tokens, kept on disk in llm.c's .bin format under a name
 * made of the SHA-256 of the text and of the vocabulary, so every run of a sweep (and every
 * later sweep) on the same text reads them instead of tokenizing again. Safe when several
 * ranks or jobs start at once: one tokenizes under a lock file while the others wait, and
 * the file appears by rename, whole.
 *
 * Nothing in the cache is trusted unverified, since it decides what a run trains on while the
 * run's recorded data digest names the text: each file carries, in the unused part of its
 * .bin header, the SHA-256 of its ids, of the text and of the vocabulary it was built from
 * (TOKEN_CACHE_TAG and three lines "ids/text/vocab <hex>"), and is used only when all three
 * match. The text's digest is computed here from the bytes tokenized, never taken from the
 * caller (whose digest may come from a wrong data digest cache entry: util/file_digest.h).
 * A file that is damaged, truncated, of another text or vocabulary, in the old format without
 * digests, not a regular file, or writable by group/others or owned by another user (not root)
 * is not read: one warning naming it and what is wrong, then the text is tokenized and the
 * entry replaced. A cache directory writable by group/others or owned by another user (not
 * root) is not used at all (util/cache_dir.h): one warning saying what to do. New files and
 * directories never have group/other write bits, whatever the umask. */
#ifndef ABLATE_WORKER_TOKEN_CACHE_H
#define ABLATE_WORKER_TOKEN_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "bpe.h"
#include "util/cache_dir.h"

#define TOKEN_CACHE_ENV CACHE_DIR_ENV
/* The first line of the verification block at byte TOKEN_CACHE_BLOCK_AT of the header (llm.c
 * reads only the first 12 bytes of its 1024-byte header; the rest is zero in its files). */
#define TOKEN_CACHE_TAG      "ablate token cache 1\n"
#define TOKEN_CACHE_BLOCK_AT 16

/* The cache directory: $ABLATE_CACHE_DIR, else $XDG_CACHE_HOME/ablate, else
 * $HOME/.cache/ablate; "" when none can be named (then nothing is cached). */
void token_cache_dir(char *out, size_t cap);

/* The tokens of text (the contents of data file `path`), from the cache or encoded and then
 * cached. text_sha256 (may be NULL): in, the digest the caller has for text ("" if none); out,
 * the SHA-256 of text, computed here (about 4 ms for 1 MB), which is what the run must record.
 * A digest in that differs from the text's is a warning. A cache that cannot be used is a
 * warning on stderr (each distinct warning once per process), never an error. Returns the
 * count (*ids malloc'd), or -1 with a message. */
long token_cache_encode(Bpe *b, const char *path, const unsigned char *text, size_t len,
                        char text_sha256[65], int32_t **ids, char err[ABL_ERR_MAX]);

#endif
