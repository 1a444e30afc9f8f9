#include "token_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cache_dir.h"
#include "util/file_io.h"
#include "util/sha256.h"
#include "token_file.h"

/* A warning names the directory (up to 2 KB) twice, and a file in it */
#define WHY_MAX CACHE_WHY_MAX

void token_cache_dir(char *out, size_t cap) {
    const char *dir = getenv(TOKEN_CACHE_ENV), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    if (dir && dir[0])
        snprintf(out, cap, "%s", dir);
    else if (xdg && xdg[0])
        snprintf(out, cap, "%s/ablate", xdg);
    else if (home && home[0])
        snprintf(out, cap, "%s/.cache/ablate", home);
    else if (cap)
        out[0] = '\0';
}

/* The verification block: the tag, then the ids', the text's and the vocabulary's SHA-256. */
static int format_block(char *out, size_t cap, const char *ids_hex, const char *text_hex,
                        const char *vocab_hex) {
    return snprintf(out, cap, "%sids %s\ntext %s\nvocab %s\n", TOKEN_CACHE_TAG, ids_hex, text_hex,
                    vocab_hex);
}

/* The 64 hex digits after "key " at *p, into out; advances *p past the line. */
static int field(const char **p, const char *key, char out[65]) {
    size_t k = strlen(key);
    if (strncmp(*p, key, k) != 0 || (*p)[k] != ' ') return -1;
    const char *h = *p + k + 1;
    if (strspn(h, "0123456789abcdef") < 64 || h[64] != '\n') return -1;
    memcpy(out, h, 64);
    out[64] = '\0';
    *p = h + 65;
    return 0;
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* NULL when buf is the cache entry of the text text_hex under the vocabulary vocab_hex whose
 * ids match their digest; else what is wrong (for "token cache file X <what>"). */
static const char *verify(const unsigned char *buf, long len, const char *text_hex,
                          const char *vocab_hex, char *why, size_t cap) {
    if (len < TOKEN_FILE_HEADER_BYTES) {
        snprintf(why, cap, "is truncated: %ld bytes, shorter than the .bin header", len);
        return why;
    }
    if (get_u32(buf) != TOKEN_FILE_MAGIC || get_u32(buf + 4) != TOKEN_FILE_VERSION)
        return "is not an llm.c .bin token file (bad magic or version)";
    /* the header's bytes past the llm.c fields and the block are zero; so no string runs off */
    char block[TOKEN_FILE_HEADER_BYTES];
    memcpy(block, buf + TOKEN_CACHE_BLOCK_AT, TOKEN_FILE_HEADER_BYTES - TOKEN_CACHE_BLOCK_AT);
    block[TOKEN_FILE_HEADER_BYTES - TOKEN_CACHE_BLOCK_AT] = '\0';
    if (strncmp(block, TOKEN_CACHE_TAG, strlen(TOKEN_CACHE_TAG)) != 0) {
        int zero = 1;
        for (int i = 12; i < TOKEN_FILE_HEADER_BYTES && zero; i++)
            zero = buf[i] == 0;
        return zero ? "is in the old format, without digests to verify it"
                    : "has a header that is not a token cache's";
    }
    char ids_hex[65], file_text[65], file_vocab[65];
    const char *p = block + strlen(TOKEN_CACHE_TAG);
    if (field(&p, "ids", ids_hex) || field(&p, "text", file_text) || field(&p, "vocab", file_vocab))
        return "has a damaged verification header";
    if (strcmp(file_vocab, vocab_hex) != 0) {
        snprintf(why, cap, "was built for another vocabulary (%.16s, not %.16s)", file_vocab,
                 vocab_hex);
        return why;
    }
    if (strcmp(file_text, text_hex) != 0) {
        snprintf(why, cap, "holds the tokens of another text (SHA-256 %.16s..., not %.16s...)",
                 file_text, text_hex);
        return why;
    }
    long count = (long)(int32_t)get_u32(buf + 8);
    if (count < 0 || len != TOKEN_FILE_HEADER_BYTES + 2 * count) {
        snprintf(why, cap, "is truncated or damaged: %ld bytes for the %ld tokens it declares", len,
                 count);
        return why;
    }
    char got[65];
    sha256_buf_hex(buf + TOKEN_FILE_HEADER_BYTES, (size_t)(len - TOKEN_FILE_HEADER_BYTES), got);
    if (strcmp(got, ids_hex) != 0) return "has ids that do not match their digest (damaged)";
    return NULL;
}

enum { ENTRY_HIT, ENTRY_ABSENT, ENTRY_BAD };

/* Reads and verifies the entry `name` in the directory dfd: ENTRY_HIT with the ids, or
 * ENTRY_ABSENT, or ENTRY_BAD with what is wrong in why. The checks are on the file opened
 * (fstat), not on a name that could be swapped meanwhile. */
static int read_entry(int dfd, const char *name, const Bpe *b, const char *text_hex, int32_t **ids,
                      long *n, char *why, size_t cap) {
    struct stat st;
    int fd = cache_entry_open(dfd, name, &st, why, cap);
    if (fd < 0) return errno == ENOENT && !why[0] ? ENTRY_ABSENT : ENTRY_BAD;
    long len = (long)st.st_size, got = 0;
    unsigned char *buf = malloc((size_t)(len > 0 ? len : 1));
    while (buf && got < len) {
        ssize_t r = read(fd, buf + got, (size_t)(len - got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += r;
    }
    close(fd);
    if (!buf || got != len) {
        free(buf);
        snprintf(why, cap, "cannot be read whole");
        return ENTRY_BAD;
    }
    const char *bad = verify(buf, len, text_hex, bpe_vocab_digest(b), why, cap);
    char err[ABL_ERR_MAX];
    if (!bad && token_file_parse(name, buf, len, bpe_vocab_size(b), ids, n, err) != 0)
        bad = "has an id out of the vocabulary's range";
    free(buf);
    if (bad) {
        if (bad != why) snprintf(why, cap, "%s", bad);
        return ENTRY_BAD;
    }
    return ENTRY_HIT;
}

/* The entry's bytes, for file_write_atomic_at. */
typedef struct {
    const unsigned char *buf;
    size_t size;
} Bytes;

static int write_bytes(FILE *f, void *ctx) {
    const Bytes *b = ctx;
    return fwrite(b->buf, 1, b->size, f) == b->size ? 0 : -1;
}

/* Writes the entry whole (a new temporary file, fsync'd, renamed over the name, the directory
 * fsync'd: file_write_atomic_at). 0, or -1 with a message in err (cap bytes). */
static int write_entry(int dfd, const char *dir, const char *name, const int32_t *ids, long n,
                       const char *text_hex, const char *vocab_hex, char *err, size_t cap) {
    if (n > INT32_MAX) {
        snprintf(err, cap, "token cache file %s/%s: %ld tokens do not fit a .bin", dir, name, n);
        return -1;
    }
    size_t size = TOKEN_FILE_HEADER_BYTES + 2 * (size_t)n;
    unsigned char *buf = calloc(size, 1);
    if (!buf) {
        snprintf(err, cap, "token cache file %s/%s: out of memory", dir, name);
        return -1;
    }
    const uint32_t head[3] = {TOKEN_FILE_MAGIC, TOKEN_FILE_VERSION, (uint32_t)n};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++)
            buf[4 * i + k] = (unsigned char)(head[i] >> (8 * k));
    unsigned char *p = buf + TOKEN_FILE_HEADER_BYTES;
    for (long i = 0; i < n; i++) { /* GPT-2's ids are below 65536: bpe_encode's output */
        p[2 * i] = (unsigned char)(ids[i] & 0xFF);
        p[2 * i + 1] = (unsigned char)((ids[i] >> 8) & 0xFF);
    }
    char ids_hex[65], block[TOKEN_FILE_HEADER_BYTES];
    sha256_buf_hex(p, 2 * (size_t)n, ids_hex);
    int k = format_block(block, sizeof block, ids_hex, text_hex, vocab_hex);
    memcpy(buf + TOKEN_CACHE_BLOCK_AT, block, (size_t)k);

    char shown[4096], ferr[ABL_ERR_MAX];
    snprintf(shown, sizeof shown, "%s/%s", dir, name);
    Bytes bytes = {buf, size};
    int rc = file_write_atomic_at("token cache file", dfd, name, shown, CACHE_FILE_MODE,
                                  write_bytes, &bytes, ferr);
    free(buf);
    if (rc != 0) snprintf(err, cap, "%s", ferr);
    return rc;
}

long token_cache_encode(Bpe *b, const char *data_path, const unsigned char *text, size_t len,
                        char text_sha256[65], int32_t **ids, char err[ABL_ERR_MAX]) {
    char dir[2048], name[256], lock_name[272], hex[65], why[WHY_MAX];
    long n = -1;
    int dfd = -1, fd = -1, st;
    /* the entry's key is the digest of these very bytes, never one taken on trust: a wrong one
     * would read another text's tokens on a hit, and file this text's under another text's
     * name on a miss (SHA-256 of Tiny Shakespeare's 1.1 MB: about 4 ms) */
    sha256_buf_hex(text, len, hex);
    if (text_sha256) {
        if (text_sha256[0] && strcmp(text_sha256, hex) != 0)
            cache_warn_once("data file %s: its bytes have the SHA-256 %.16s..., not the %.16s... "
                            "it came with (a wrong entry in the data digest cache?): tokenizing "
                            "and recording it by its bytes' digest",
                            data_path, hex, text_sha256);
        memcpy(text_sha256, hex, 65);
    }
    token_cache_dir(dir, sizeof dir);
    const char *vocab_hex = bpe_vocab_digest(b);
    /* 64 bits of the vocabulary's digest tell vocabularies apart; the file holds all 256 */
    snprintf(name, sizeof name, "gpt2-%s-%.16s.bin", hex, vocab_hex);
    snprintf(lock_name, sizeof lock_name, "%s.lock", name);
    if (!dir[0]) {
        cache_warn_once("no token cache directory (no $HOME; set %s); tokenizing %s without the "
                        "cache",
                        TOKEN_CACHE_ENV, data_path);
    } else {
        dfd = cache_dir_open(dir, NULL); /* a directory refused is a warning there */
    }
    if (dfd < 0) {
        n = bpe_encode(b, text, len, ids);
        goto done;
    }
    st = read_entry(dfd, name, b, hex, ids, &n, why, sizeof why);
    if (st == ENTRY_HIT) goto done;
    /* one process tokenizes; the others wait here and then read its file, so a bad entry is
     * reported (and replaced) by the one that finds it under the lock, once */
    fd = openat(dfd, lock_name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, CACHE_FILE_MODE);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        close(fd);
        fd = -1;
    }
    if (fd >= 0) st = read_entry(dfd, name, b, hex, ids, &n, why, sizeof why);
    if (st != ENTRY_HIT) {
        if (st == ENTRY_BAD)
            cache_warn_once("token cache file %s/%s %s; not using it: tokenizing %s again and "
                            "replacing it",
                            dir, name, why, data_path);
        n = bpe_encode(b, text, len, ids);
        char werr[WHY_MAX];
        if (n >= 0 && write_entry(dfd, dir, name, *ids, n, hex, vocab_hex, werr, sizeof werr) != 0)
            cache_warn_once("%s; %s will be tokenized again next time", werr, data_path);
    }
done:
    if (fd >= 0) close(fd); /* releases the lock */
    if (dfd >= 0) close(dfd);
    if (n < 0) snprintf(err, ABL_ERR_MAX, "data file %s: out of memory tokenizing it", data_path);
    return n;
}
