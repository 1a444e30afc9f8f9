/* llm.c's token file format (.bin): a header of 256 little-endian int32 (magic 20240520,
 * version 1, token count) followed by the tokens as little-endian uint16. What
 * data.tokenizer: tokens reads, `ablate tokenize` writes, and the GPT-2 token cache holds. */
#ifndef ABLATE_WORKER_TOKEN_FILE_H
#define ABLATE_WORKER_TOKEN_FILE_H

#include <stdint.h>

#include "util/sizes.h"

#define TOKEN_FILE_MAGIC        20240520
#define TOKEN_FILE_VERSION      1
#define TOKEN_FILE_HEADER_BYTES (256 * 4)
#define TOKEN_FILE_MAX_VOCAB    65536 /* uint16 tokens */

/* Parses a whole .bin file held in buf; tokens must be below vocab. *tokens is malloc'd.
 * Errors name path: bad magic or version, truncated, trailing bytes, token out of range. */
int token_file_parse(const char *path, const unsigned char *buf, long len, int vocab,
                     int32_t **tokens, long *n, char err[ABL_ERR_MAX]);

/* Writes n tokens (each in [0, 65536)) as a .bin file, atomically (tmp + rename). */
int token_file_write(const char *what, const char *path, const int32_t *tokens, long n,
                     char err[ABL_ERR_MAX]);

#endif
