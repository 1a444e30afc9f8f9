#include "token_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/file_io.h"
#include "util/le.h"

static int32_t read_i32_le(const unsigned char *p) {
    uint32_t v = le_get_u32(p);
    int32_t r;
    memcpy(&r, &v, sizeof r);
    return r;
}

int token_file_parse(const char *path, const unsigned char *buf, long len, int vocab,
                     int32_t **tokens, long *n, char err[ABL_ERR_MAX]) {
    *tokens = NULL;
    *n = 0;
    if (len < TOKEN_FILE_HEADER_BYTES) {
        snprintf(err, ABL_ERR_MAX,
                 "data file %s: too short for an llm.c .bin header (%ld bytes, the header alone "
                 "is %d)",
                 path, len, TOKEN_FILE_HEADER_BYTES);
        return -1;
    }
    int32_t magic = read_i32_le(buf), version = read_i32_le(buf + 4), count = read_i32_le(buf + 8);
    if (magic != TOKEN_FILE_MAGIC) {
        snprintf(err, ABL_ERR_MAX,
                 "data file %s: bad magic %ld in the header (expected %d for an llm.c .bin token "
                 "file; is data.tokenizer right?)",
                 path, (long)magic, TOKEN_FILE_MAGIC);
        return -1;
    }
    if (version != TOKEN_FILE_VERSION) {
        snprintf(err, ABL_ERR_MAX,
                 "data file %s: unsupported .bin version %ld (only version %d, uint16 tokens, is "
                 "supported)",
                 path, (long)version, TOKEN_FILE_VERSION);
        return -1;
    }
    if (count < 0) {
        snprintf(err, ABL_ERR_MAX, "data file %s: corrupt header: negative token count %ld", path,
                 (long)count);
        return -1;
    }
    long avail = (len - TOKEN_FILE_HEADER_BYTES) / 2;
    if (avail < count) {
        snprintf(err, ABL_ERR_MAX,
                 "data file %s: truncated: the header says %ld tokens but the file holds only %ld",
                 path, (long)count, avail);
        return -1;
    }
    if (len != TOKEN_FILE_HEADER_BYTES + 2L * count) {
        snprintf(err, ABL_ERR_MAX,
                 "data file %s: corrupt: %ld trailing bytes after the %ld tokens the header "
                 "declares",
                 path, len - TOKEN_FILE_HEADER_BYTES - 2L * count, (long)count);
        return -1;
    }
    int32_t *t = malloc((size_t)(count > 0 ? count : 1) * sizeof(int32_t));
    if (!t) {
        snprintf(err, ABL_ERR_MAX, "data file %s: out of memory for %ld tokens", path, (long)count);
        return -1;
    }
    const unsigned char *p = buf + TOKEN_FILE_HEADER_BYTES;
    for (long i = 0; i < count; i++) {
        t[i] = (int32_t)((unsigned)p[2 * i] | (unsigned)p[2 * i + 1] << 8);
        if (t[i] >= vocab) {
            snprintf(err, ABL_ERR_MAX,
                     "data file %s: token %ld has id %ld, out of range for vocab_size %d (set "
                     "data.vocab_size)",
                     path, i, (long)t[i], vocab);
            free(t);
            return -1;
        }
    }
    *tokens = t;
    *n = count;
    return 0;
}

typedef struct {
    const int32_t *tokens;
    long n;
} BinOut;

static int write_bin(FILE *f, void *ctx) {
    const BinOut *b = ctx;
    unsigned char header[TOKEN_FILE_HEADER_BYTES] = {0};
    const uint32_t fields[3] = {TOKEN_FILE_MAGIC, TOKEN_FILE_VERSION, (uint32_t)b->n};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++)
            header[4 * i + k] = (unsigned char)(fields[i] >> (8 * k));
    if (fwrite(header, 1, sizeof header, f) != sizeof header) return -1;
    unsigned char chunk[8192];
    for (long i = 0; i < b->n;) {
        int m = 0;
        for (; m < (int)sizeof chunk / 2 && i < b->n; m++, i++) {
            chunk[2 * m] = (unsigned char)(b->tokens[i] & 0xFF);
            chunk[2 * m + 1] = (unsigned char)(b->tokens[i] >> 8);
        }
        if (fwrite(chunk, 2, (size_t)m, f) != (size_t)m) return -1;
    }
    return 0;
}

int token_file_write(const char *what, const char *path, const int32_t *tokens, long n,
                     char err[ABL_ERR_MAX]) {
    if (n > INT32_MAX) {
        snprintf(err, ABL_ERR_MAX, "%s %s: %ld tokens do not fit the .bin header's int32 count",
                 what, path, n);
        return -1;
    }
    for (long i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= TOKEN_FILE_MAX_VOCAB) {
            snprintf(err, ABL_ERR_MAX, "%s %s: token %ld has id %ld, not a uint16", what, path, i,
                     (long)tokens[i]);
            return -1;
        }
    BinOut b = {tokens, n};
    return file_write_atomic(what, path, write_bin, &b, err);
}
