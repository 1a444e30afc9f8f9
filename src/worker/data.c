/* Data loading: the whole file is read into memory and tokenized once; training windows are
 * a pure function of (seed, step, b) through the counter-based RNG, validation windows are
 * fixed and evenly spaced over the last val_fraction of the stream. */
#include "data.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/rng.h"

#define BIN_MAGIC        20240520
#define BIN_VERSION      1
#define BIN_HEADER_INTS  256
#define BIN_HEADER_BYTES (BIN_HEADER_INTS * 4)
#define GPT2_VOCAB       50257

static void set_err(char err[ABL_ERR_MAX], const char *fmt, ...) {
    if (!err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, ABL_ERR_MAX, fmt, ap);
    va_end(ap);
}

/* Reads a whole file into a malloc'd buffer (works for pipes and special files too). */
static int read_file(const char *path, unsigned char **out, long *out_len, char err[ABL_ERR_MAX]) {
    *out = NULL;
    *out_len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err(err, "data file %s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 20, len = 0;
    unsigned char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        set_err(err, "data file %s: out of memory", path);
        return -1;
    }
    for (;;) {
        if (len == cap) {
            if (cap > (size_t)LONG_MAX / 2) {
                free(buf);
                fclose(f);
                set_err(err, "data file %s: too large", path);
                return -1;
            }
            unsigned char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                set_err(err, "data file %s: out of memory reading it (%zu bytes so far)", path,
                        len);
                return -1;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        fclose(f);
        set_err(err, "data file %s: cannot read: %s", path, e ? strerror(e) : "read error");
        return -1;
    }
    fclose(f);
    *out = buf;
    *out_len = (long)len;
    return 0;
}

static int32_t read_i32_le(const unsigned char *p) {
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    int32_t r;
    memcpy(&r, &v, sizeof r);
    return r;
}

static int load_text(Dataset *d, const DataConfig *cfg, const unsigned char *buf, long len) {
    d->tokens = malloc((size_t)len * sizeof(int32_t));
    if (!d->tokens) return -1;
    d->n_tokens = len;
    if (cfg->tokenizer == TOK_BYTE) {
        d->vocab_size = 256;
        for (int i = 0; i < 256; i++) {
            d->chars[i] = (unsigned char)i;
            d->char_to_id[i] = i;
        }
    } else {
        int seen[256] = {0};
        for (long i = 0; i < len; i++)
            seen[buf[i]] = 1;
        int n = 0;
        for (int c = 0; c < 256; c++) {
            d->char_to_id[c] = -1;
            if (seen[c]) {
                d->chars[n] = (unsigned char)c;
                d->char_to_id[c] = n++;
            }
        }
        d->vocab_size = n;
    }
    for (long i = 0; i < len; i++)
        d->tokens[i] = d->char_to_id[buf[i]];
    return 0;
}

static int load_bin(Dataset *d, const DataConfig *cfg, const unsigned char *buf, long len,
                    char err[ABL_ERR_MAX]) {
    const char *path = cfg->path;
    if (len < BIN_HEADER_BYTES) {
        set_err(err,
                "data file %s: too short for an llm.c .bin header (%ld bytes, the header alone "
                "is %d)",
                path, len, BIN_HEADER_BYTES);
        return -1;
    }
    int32_t magic = read_i32_le(buf), version = read_i32_le(buf + 4), count = read_i32_le(buf + 8);
    if (magic != BIN_MAGIC) {
        set_err(err,
                "data file %s: bad magic %ld in the header (expected %d for an llm.c .bin token "
                "file; is data.tokenizer right?)",
                path, (long)magic, BIN_MAGIC);
        return -1;
    }
    if (version != BIN_VERSION) {
        set_err(err,
                "data file %s: unsupported .bin version %ld (only version %d, uint16 tokens, is "
                "supported)",
                path, (long)version, BIN_VERSION);
        return -1;
    }
    if (count < 0) {
        set_err(err, "data file %s: corrupt header: negative token count %ld", path, (long)count);
        return -1;
    }
    long avail = (len - BIN_HEADER_BYTES) / 2;
    if (avail < count) {
        set_err(err,
                "data file %s: truncated: the header says %ld tokens but the file holds only %ld",
                path, (long)count, avail);
        return -1;
    }
    if (len != BIN_HEADER_BYTES + 2L * count) {
        set_err(err,
                "data file %s: corrupt: %ld trailing bytes after the %ld tokens the header "
                "declares",
                path, len - BIN_HEADER_BYTES - 2L * count, (long)count);
        return -1;
    }
    int vocab = cfg->vocab_size > 0 ? cfg->vocab_size : GPT2_VOCAB;
    d->vocab_size = vocab;
    d->n_tokens = count;
    d->tokens = malloc((size_t)(count > 0 ? count : 1) * sizeof(int32_t));
    if (!d->tokens) {
        set_err(err, "data file %s: out of memory for %ld tokens", path, (long)count);
        return -1;
    }
    const unsigned char *p = buf + BIN_HEADER_BYTES;
    for (long i = 0; i < count; i++) {
        int32_t t = (int32_t)((unsigned)p[2 * i] | (unsigned)p[2 * i + 1] << 8);
        if (t >= vocab) {
            set_err(err,
                    "data file %s: token %ld has id %ld, out of range for vocab_size %d (set "
                    "data.vocab_size)",
                    path, i, (long)t, vocab);
            return -1;
        }
        d->tokens[i] = t;
    }
    for (int i = 0; i < 256; i++) {
        d->chars[i] = 0;
        d->char_to_id[i] = -1;
    }
    return 0;
}

int dataset_load(Dataset *d, const DataConfig *cfg, int context, char err[ABL_ERR_MAX]) {
    memset(d, 0, sizeof *d);
    d->tokenizer = cfg->tokenizer;
    const char *path = cfg->path;
    if (cfg->tokenizer != TOK_CHAR && cfg->tokenizer != TOK_BYTE && cfg->tokenizer != TOK_TOKENS) {
        set_err(err, "data file %s: unknown tokenizer %d", path, (int)cfg->tokenizer);
        return -1;
    }
    if (!(cfg->val_fraction >= 0.0 && cfg->val_fraction < 1.0)) {
        set_err(err, "data.val_fraction must be in [0, 1), got %g", cfg->val_fraction);
        return -1;
    }
    if (context < 1) {
        set_err(err, "model.context must be at least 1, got %d", context);
        return -1;
    }
    unsigned char *buf;
    long len;
    if (read_file(path, &buf, &len, err) != 0) return -1;
    if (len == 0) {
        free(buf);
        set_err(err, "data file %s: the file is empty", path);
        return -1;
    }
    int rc;
    if (cfg->tokenizer == TOK_TOKENS) {
        rc = load_bin(d, cfg, buf, len, err);
    } else {
        rc = load_text(d, cfg, buf, len);
        if (rc != 0) set_err(err, "data file %s: out of memory for %ld tokens", path, len);
    }
    free(buf);
    if (rc != 0) {
        dataset_free(d);
        return -1;
    }

    long n_val = (long)((double)d->n_tokens * cfg->val_fraction);
    d->n_train = d->n_tokens - n_val;
    long need = (long)context + 1;
    if (d->n_train < need) {
        set_err(err,
                "data file %s: too short: the train split has %ld tokens (of %ld, "
                "data.val_fraction %g) but model.context %d needs at least %ld",
                path, d->n_train, d->n_tokens, cfg->val_fraction, context, need);
        dataset_free(d);
        return -1;
    }
    if (cfg->val_fraction > 0 && n_val < need) {
        set_err(err,
                "data file %s: too short: the validation split has %ld tokens (of %ld, "
                "data.val_fraction %g) but model.context %d needs at least %ld; raise "
                "data.val_fraction or lower model.context",
                path, n_val, d->n_tokens, cfg->val_fraction, context, need);
        dataset_free(d);
        return -1;
    }
    return 0;
}

void dataset_free(Dataset *d) {
    if (!d) return;
    free(d->tokens);
    d->tokens = NULL;
    d->n_tokens = 0;
    d->n_train = 0;
}

void dataset_train_batch(const Dataset *d, uint64_t seed, long step, int B, int T, int32_t *x,
                         int32_t *y) {
    /* Starts in [0, n_train - T - 1], so y[T-1] = tokens[s + T] is at most n_train - 1. */
    uint64_t n_starts = (uint64_t)(d->n_train - T);
    for (int b = 0; b < B; b++) {
        uint64_t counter = (uint64_t)step * (uint64_t)B + (uint64_t)b;
        long s = (long)rng_below(seed, RNG_STREAM_BATCH, counter, n_starts);
        const int32_t *src = d->tokens + s;
        memcpy(x + (size_t)b * T, src, (size_t)T * sizeof(int32_t));
        memcpy(y + (size_t)b * T, src + 1, (size_t)T * sizeof(int32_t));
    }
}

/* The region validation windows come from: the validation split, or the whole train split
 * when there is none (val_fraction 0, evaluation then measures training loss). */
static void val_region(const Dataset *d, int T, long *base, long *len) {
    long n_val = d->n_tokens - d->n_train;
    if (n_val >= (long)T + 1) {
        *base = d->n_train;
        *len = n_val;
    } else {
        *base = 0;
        *len = d->n_train;
    }
}

int dataset_val_windows(const Dataset *d, long eval_tokens, int T) {
    long base, len;
    val_region(d, T, &base, &len);
    long n = eval_tokens / T;
    if (n < 1) n = 1;
    long max_windows = (len - 1) / T; /* non-overlapping inputs, each with its targets */
    if (max_windows < 1) max_windows = 1;
    if (n > max_windows) n = max_windows;
    if (n > INT_MAX) n = INT_MAX;
    return (int)n;
}

void dataset_val_window(const Dataset *d, int i, int n, int T, int32_t *x, int32_t *y) {
    long base, len;
    val_region(d, T, &base, &len);
    long start = base;
    if (n > 1) start = base + (long)i * (len - T - 1) / (n - 1);
    memcpy(x, d->tokens + start, (size_t)T * sizeof(int32_t));
    memcpy(y, d->tokens + start + 1, (size_t)T * sizeof(int32_t));
}

static void describe_byte(unsigned char c, char *buf, size_t cap) {
    if (isprint(c) && c != '\'')
        snprintf(buf, cap, "'%c'", c);
    else
        snprintf(buf, cap, "byte 0x%02x", c);
}

int dataset_encode(const Dataset *d, const char *text, int32_t *out, int max,
                   char err[ABL_ERR_MAX]) {
    int n = 0;
    if (d->tokenizer == TOK_TOKENS) {
        const char *p = text;
        for (;;) {
            while (*p && isspace((unsigned char)*p))
                p++;
            if (!*p) break;
            const char *start = p;
            char *end;
            errno = 0;
            long v = strtol(p, &end, 10);
            if (end == p || (*end && !isspace((unsigned char)*end))) {
                int wlen = 0;
                while (start[wlen] && !isspace((unsigned char)start[wlen]) && wlen < 40)
                    wlen++;
                set_err(err,
                        "prompt: '%.*s' is not a token id (the tokens tokenizer takes "
                        "whitespace-separated integer ids, e.g. \"464 3290\")",
                        wlen, start);
                return -1;
            }
            if (errno == ERANGE || v < 0 || v >= d->vocab_size) {
                set_err(err, "prompt: token id %.*s is out of range [0, %d)", (int)(end - start),
                        start, d->vocab_size);
                return -1;
            }
            if (n >= max) {
                set_err(err, "prompt: more than %d tokens", max);
                return -1;
            }
            out[n++] = (int32_t)v;
            p = end;
        }
        return n;
    }
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        int id = d->char_to_id[*p];
        if (id < 0) {
            char what[32];
            describe_byte(*p, what, sizeof what);
            set_err(err,
                    "prompt: character %s (at offset %ld) is not in the corpus vocabulary "
                    "(%d characters)",
                    what, (long)(p - (const unsigned char *)text), d->vocab_size);
            return -1;
        }
        if (n >= max) {
            set_err(err, "prompt: more than %d tokens", max);
            return -1;
        }
        out[n++] = id;
    }
    return n;
}

int dataset_decode(const Dataset *d, const int32_t *ids, int n, char *out, int cap) {
    if (!out || cap <= 0) return 0;
    int w = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (d->tokenizer == TOK_TOKENS) {
            char tmp[24];
            int k = snprintf(tmp, sizeof tmp, "<%ld>", (long)id);
            if (k < 0 || w + k > cap - 1) break;
            memcpy(out + w, tmp, (size_t)k);
            w += k;
        } else {
            if (w + 1 > cap - 1) break;
            out[w++] = (id >= 0 && id < d->vocab_size) ? (char)d->chars[id] : '?';
        }
    }
    out[w] = '\0';
    return w;
}
