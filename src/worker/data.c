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

#include "model/rng.h"
#include "util/file_digest.h"
#include "util/file_io.h"
#include "util/sha256.h"
#include "tokenizer/token_cache.h"
#include "tokenizer/token_file.h"
#include "util/utf8.h"

static void set_err(char err[ABL_ERR_MAX], const char *fmt, ...) {
    if (!err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, ABL_ERR_MAX, fmt, ap);
    va_end(ap);
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
    int vocab = cfg->vocab_size > 0 ? cfg->vocab_size : BPE_GPT2_VOCAB;
    d->vocab_size = vocab;
    if (token_file_parse(cfg->path, buf, len, vocab, &d->tokens, &d->n_tokens, err) != 0) return -1;
    for (int i = 0; i < 256; i++) {
        d->chars[i] = 0;
        d->char_to_id[i] = -1;
    }
    /* llm.c's .bin files hold GPT-2 tokens: with GPT-2's vocabulary at hand, samples are
     * decoded to text and prompts may be text; without it, they stay ids */
    if (vocab == BPE_GPT2_VOCAB) {
        char dir[BPE_VOCAB_DIR_MAX], ignored[ABL_ERR_MAX];
        bpe_vocab_dir(dir);
        d->bpe = bpe_load(dir, ignored);
    }
    return 0;
}

static int load_gpt2(Dataset *d, const DataConfig *cfg, const unsigned char *buf, long len,
                     char err[ABL_ERR_MAX]) {
    char dir[BPE_VOCAB_DIR_MAX];
    bpe_vocab_dir(dir);
    if (!(d->bpe = bpe_load(dir, err))) return -1;
    d->vocab_size = bpe_vocab_size(d->bpe);
    d->n_tokens = token_cache_encode(d->bpe, cfg->path, buf, (size_t)len, d->identity.sha256,
                                     &d->tokens, err);
    return d->n_tokens < 0 ? -1 : 0;
}

/* The rest of the data's identity, once it is parsed (the digest was taken as it was read). */
static void identity_fill(Dataset *d, const DataConfig *cfg, long len) {
    DataIdentity *id = &d->identity;
    snprintf(id->tokenizer, sizeof id->tokenizer, "%s", tokenizer_names[cfg->tokenizer]);
    snprintf(id->path, sizeof id->path, "%s", cfg->path);
    id->bytes = len;
    id->val_fraction = cfg->val_fraction;
    id->test_fraction = cfg->test_fraction;
    id->vocab_size = d->vocab_size;
    if (cfg->tokenizer == TOK_GPT2 && d->bpe) {
        snprintf(id->vocab, sizeof id->vocab, "%s", bpe_vocab_digest(d->bpe));
    } else if (cfg->tokenizer == TOK_TOKENS) {
        char ids[32];
        int n = snprintf(ids, sizeof ids, "ids:%d", d->vocab_size);
        sha256_buf_hex(ids, (size_t)n, id->vocab);
    } else {
        sha256_buf_hex(d->chars, (size_t)d->vocab_size, id->vocab);
    }
}

int dataset_load(Dataset *d, const DataConfig *cfg, int context, char err[ABL_ERR_MAX]) {
    memset(d, 0, sizeof *d);
    d->tokenizer = cfg->tokenizer;
    const char *path = cfg->path;
    if (cfg->tokenizer < 0 || cfg->tokenizer >= TOK_COUNT) {
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
    char cache[2048];
    token_cache_dir(cache, sizeof cache);
    /* the digest of the very bytes parsed below (cached by the file's identity on disk) */
    if (file_read_digest("data file", path, cache, &buf, &len, d->identity.sha256, NULL, err) != 0)
        return -1;
    if (len == 0) {
        free(buf);
        set_err(err, "data file %s: the file is empty", path);
        return -1;
    }
    int rc;
    if (cfg->tokenizer == TOK_TOKENS) {
        rc = load_bin(d, cfg, buf, len, err);
    } else if (cfg->tokenizer == TOK_GPT2) {
        rc = load_gpt2(d, cfg, buf, len, err);
    } else {
        rc = load_text(d, cfg, buf, len);
        if (rc != 0) set_err(err, "data file %s: out of memory for %ld tokens", path, len);
    }
    free(buf);
    if (rc != 0) {
        dataset_free(d);
        return -1;
    }
    identity_fill(d, cfg, len);

    long n_val = (long)((double)d->n_tokens * cfg->val_fraction);
    d->n_test = (long)((double)d->n_tokens * cfg->test_fraction);
    d->n_train = d->n_tokens - n_val - d->n_test;
    long need = (long)context + 1;
    if (d->n_train < need) {
        set_err(err,
                "data file %s: too short: the train split has %ld tokens (of %ld, "
                "data.val_fraction %g) but model.context %d needs at least %ld",
                path, d->n_train, d->n_tokens, cfg->val_fraction, context, need);
        dataset_free(d);
        return -1;
    }
    if (cfg->test_fraction > 0 && d->n_test < need) {
        set_err(err,
                "data file %s: too short: the test split has %ld tokens (of %ld, "
                "data.test_fraction %g) but model.context %d needs at least %ld; raise "
                "data.test_fraction or lower model.context",
                path, d->n_test, d->n_tokens, cfg->test_fraction, context, need);
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
    bpe_free(d->bpe);
    d->bpe = NULL;
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

/* The region a split's targets come from (the tokens a window may read). Validation: the
 * validation split, or the whole train split when there is none (val_fraction 0, evaluation
 * then measures training loss). Test: the test split, or nothing (len 0). Not a function of
 * the context: dataset_load has refused a split too short for it. */
static void split_region(const Dataset *d, Split s, long *base, long *len) {
    if (s == SPLIT_TEST) {
        *base = d->n_tokens - d->n_test;
        *len = d->n_test >= 2 ? d->n_test : 0;
        return;
    }
    long n_val = d->n_tokens - d->n_test - d->n_train;
    if (n_val >= 2) {
        *base = d->n_train;
        *len = n_val;
    } else {
        *base = 0;
        *len = d->n_train;
    }
}

EvalLayout dataset_eval_layout(const Dataset *d, Split s, long eval_tokens, int T) {
    long base, len;
    split_region(d, s, &base, &len);
    EvalLayout l = {.first = base + 1, .n_targets = 0, .T = T, .n_windows = 0};
    if (len < 2 || T < 1) return l;
    long n = eval_tokens < len - 1 ? eval_tokens : len - 1;
    if (n < 1) n = 1;
    if (n / T >= INT_MAX) n = (long)(INT_MAX - 1) * T; /* the window count stays an int */
    long w = (n + T - 1) / T;
    l.n_targets = n;
    l.n_windows = (int)w;
    return l;
}

int dataset_eval_window(const Dataset *d, const EvalLayout *l, int k, int32_t *x, int32_t *y) {
    long off = (long)k * l->T;
    long len = l->n_targets - off < l->T ? l->n_targets - off : l->T;
    const int32_t *src = d->tokens + l->first - 1 + off;
    memcpy(x, src, (size_t)len * sizeof(int32_t));
    memcpy(y, src + 1, (size_t)len * sizeof(int32_t));
    return (int)len;
}

static void describe_byte(unsigned char c, char *buf, size_t cap) {
    if (isprint(c) && c != '\'')
        snprintf(buf, cap, "'%c'", c);
    else
        snprintf(buf, cap, "byte 0x%02x", c);
}

/* A prompt through GPT-2's BPE. */
static int encode_bpe(const Dataset *d, const char *text, int32_t *out, int max,
                      char err[ABL_ERR_MAX]) {
    int32_t *ids;
    long n = bpe_encode(d->bpe, (const unsigned char *)text, strlen(text), &ids);
    if (n < 0) {
        set_err(err, "prompt: out of memory encoding it");
        return -1;
    }
    if (n > max) {
        free(ids);
        set_err(err, "prompt: more than %d tokens", max);
        return -1;
    }
    memcpy(out, ids, (size_t)n * sizeof(int32_t));
    free(ids);
    return (int)n;
}

/* A prompt written as whitespace-separated token ids ("464 3290"). */
static int encode_ids(const Dataset *d, const char *text, int32_t *out, int max,
                      char err[ABL_ERR_MAX]) {
    int n = 0;
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
                    "whitespace-separated integer ids, e.g. \"464 3290\", or text once GPT-2's "
                    "vocabulary is installed)",
                    wlen, start);
            return -1;
        }
        if (errno == ERANGE || v < 0 || v >= d->vocab_size) {
            set_err(err, "prompt: token id %.*s is out of range [0, %d)", (int)(end - start), start,
                    d->vocab_size);
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

int dataset_encode(const Dataset *d, const char *text, int32_t *out, int max,
                   char err[ABL_ERR_MAX]) {
    if (d->tokenizer == TOK_GPT2) return encode_bpe(d, text, out, max, err);
    if (d->tokenizer == TOK_TOKENS) {
        int n = encode_ids(d, text, out, max, err);
        /* text that is not a list of ids: GPT-2's BPE when the vocabulary is at hand */
        if (n < 0 && d->bpe && strstr(err, "is not a token id"))
            return encode_bpe(d, text, out, max, err);
        return n;
    }
    int n = 0;
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
    if (d->bpe) { /* GPT-2 tokens: their bytes, with invalid UTF-8 shown as U+FFFD */
        size_t len = 0, room = 4 * (size_t)cap;
        unsigned char *bytes = malloc(room);
        if (!bytes) {
            out[0] = '\0';
            return 0;
        }
        for (int i = 0; i < n; i++) {
            int l;
            const unsigned char *t = bpe_token_bytes(d->bpe, ids[i], &l);
            if (!t) t = (const unsigned char *)"?", l = 1;
            if (len + (size_t)l > room) break; /* more than the output can hold anyway */
            memcpy(bytes + len, t, (size_t)l);
            len += (size_t)l;
        }
        size_t w = utf8_replace_copy(bytes, len, out, (size_t)cap);
        free(bytes);
        return (int)w;
    }
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
