/* GPT-2 byte-level BPE. Tokens are handled as ids throughout: a piece of text starts as the
 * ids of its bytes' single-byte tokens, and a merge (a, b) -> ab of rank r is a hash-table
 * entry keyed by the pair of ids, which is the same as GPT-2's merging by strings because
 * ids and token strings are in one-to-one correspondence. */
#include "bpe.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/file_io.h"
#include "util/grow.h"
#include "unicode_class.h"
#include "util/utf8.h"

typedef struct {
    uint64_t key; /* (a << 32) | b; UINT64_MAX = empty */
    int32_t rank, id;
} Merge;

typedef struct {
    uint64_t hash;
    size_t key_off, ids_off;
    uint32_t key_len, n_ids; /* key_len 0 = empty (pieces are never empty) */
} CacheSlot;

#define CACHE_MAX_ENTRIES (1u << 19) /* distinct pieces kept (a 32 MB table at most) */
#define CACHE_MAX_PIECE   256        /* longer pieces are rare and not worth keeping */

struct Bpe {
    int n_tokens;
    unsigned char *tok_bytes; /* the bytes of token i are tok_bytes[tok_off[i] .. tok_off[i+1]) */
    uint32_t *tok_off;
    int32_t *tok_slots; /* bytes -> id, open addressing; -1 = empty */
    uint32_t tok_mask;
    int32_t byte_id[256]; /* the single-byte tokens */
    Merge *merges;
    uint32_t merge_mask;
    char digest[65]; /* hex */
    /* the piece cache: piece bytes -> ids */
    CacheSlot *cache;
    uint32_t cache_mask, cache_used;
    unsigned char *ckeys;
    size_t ckeys_len, ckeys_cap;
    int32_t *cids;
    size_t cids_len, cids_cap;
    int32_t *work; /* scratch for one piece */
    size_t work_cap;
};

/* ------------------------------------------------------------------ byte alphabet */

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes
 * (controls, space, DEL, NBSP, soft hyphen) for U+0100.. in byte order. Token strings in
 * encoder.json and vocab.bpe are written in this alphabet. */
#define ALPHABET_MAX 324 /* 256 + 68 */

static int printable_latin1(int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

static void byte_of_codepoint(int16_t out[ALPHABET_MAX]) {
    for (int i = 0; i < ALPHABET_MAX; i++)
        out[i] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++)
        out[printable_latin1(b) ? b : 256 + n++] = (int16_t)b;
}

/* ------------------------------------------------------------------ hashing */

static uint64_t hash_bytes(const unsigned char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static uint32_t hash_pair(uint64_t key) {
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32);
}

static uint32_t pow2_at_least(uint32_t n) {
    uint32_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

static int32_t token_lookup(const Bpe *b, const unsigned char *s, size_t n) {
    for (uint32_t i = (uint32_t)hash_bytes(s, n) & b->tok_mask;; i = (i + 1) & b->tok_mask) {
        int32_t id = b->tok_slots[i];
        if (id < 0) return -1;
        uint32_t off = b->tok_off[id], len = b->tok_off[id + 1] - off;
        if (len == n && memcmp(b->tok_bytes + off, s, n) == 0) return id;
    }
}

static const Merge *merge_find(const Bpe *b, int32_t x, int32_t y) {
    uint64_t key = (uint64_t)(uint32_t)x << 32 | (uint32_t)y;
    for (uint32_t i = hash_pair(key) & b->merge_mask;; i = (i + 1) & b->merge_mask) {
        const Merge *m = &b->merges[i];
        if (m->key == key) return m;
        if (m->key == UINT64_MAX) return NULL;
    }
}

/* ------------------------------------------------------------------ loading */

typedef struct {
    const char *path;
    const unsigned char *buf;
    long len, pos;
    char *err;
} Reader;

static int line_of(const Reader *r, long pos) {
    int line = 1;
    for (long i = 0; i < pos && i < r->len; i++)
        line += r->buf[i] == '\n';
    return line;
}

static int fail_at(Reader *r, long pos, const char *what) {
    snprintf(r->err, ABL_ERR_MAX,
             "vocabulary file %s: line %d (byte %ld): %s; the file is damaged (reinstall it with "
             "scripts/install-deps.sh)",
             r->path, line_of(r, pos), pos, what);
    return -1;
}

static void skip_ws(Reader *r) {
    while (r->pos < r->len && (r->buf[r->pos] == ' ' || r->buf[r->pos] == '\n' ||
                               r->buf[r->pos] == '\r' || r->buf[r->pos] == '\t'))
        r->pos++;
}

static int hex4(Reader *r, uint32_t *v) {
    if (r->pos + 4 > r->len) return -1;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        int c = r->buf[r->pos++], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* A JSON string of alphabet characters, turned into the bytes they stand for. */
static int json_token(Reader *r, const int16_t *alpha, unsigned char *out, size_t cap, size_t *n) {
    long start = r->pos;
    if (r->pos >= r->len || r->buf[r->pos] != '"') return fail_at(r, r->pos, "expected a string");
    r->pos++;
    *n = 0;
    for (;;) {
        if (r->pos >= r->len) return fail_at(r, start, "unterminated string");
        uint32_t cp;
        long at = r->pos;
        unsigned char c = r->buf[r->pos];
        if (c == '"') {
            r->pos++;
            return 0;
        }
        if (c == '\\') {
            if (r->pos + 1 >= r->len) return fail_at(r, at, "unterminated escape");
            unsigned char e = r->buf[r->pos + 1];
            r->pos += 2;
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *hit = e ? strchr(from, e) : NULL;
            if (hit) {
                cp = (unsigned char)to[hit - from];
            } else if (e == 'u') {
                if (hex4(r, &cp) != 0) return fail_at(r, at, "bad \\u escape");
                if (cp >= 0xD800 && cp <= 0xDBFF) { /* a surrogate pair */
                    uint32_t lo;
                    if (r->pos + 2 > r->len || r->buf[r->pos] != '\\' ||
                        r->buf[r->pos + 1] != 'u' || (r->pos += 2, hex4(r, &lo) != 0) ||
                        lo < 0xDC00 || lo > 0xDFFF)
                        return fail_at(r, at, "bad surrogate pair");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
            } else {
                return fail_at(r, at, "bad escape");
            }
        } else {
            int l = utf8_next(r->buf + r->pos, (size_t)(r->len - r->pos), &cp);
            if (cp == UTF8_INVALID || cp < 0x20) return fail_at(r, at, "invalid character");
            r->pos += l;
        }
        if (cp >= ALPHABET_MAX || alpha[cp] < 0)
            return fail_at(r, at, "a character outside GPT-2's byte alphabet");
        if (*n >= cap) return fail_at(r, start, "token too long");
        out[(*n)++] = (unsigned char)alpha[cp];
    }
}

static int json_int(Reader *r, long *v) {
    long at = r->pos;
    *v = 0;
    int digits = 0;
    while (r->pos < r->len && r->buf[r->pos] >= '0' && r->buf[r->pos] <= '9' && digits < 9) {
        *v = *v * 10 + (r->buf[r->pos++] - '0');
        digits++;
    }
    if (digits == 0 || (r->pos < r->len && r->buf[r->pos] >= '0' && r->buf[r->pos] <= '9'))
        return fail_at(r, at, "expected a token id (a non-negative integer)");
    return 0;
}

#define TOKEN_BYTES_MAX 1024

/* encoder.json: {"token": id, ...} with ids 0..n-1, each once. */
static int load_encoder(Bpe *b, Reader *r, const int16_t *alpha) {
    size_t pool_cap = 1 << 20, pool_len = 0;
    unsigned char *pool = malloc(pool_cap);
    uint32_t *off = malloc(sizeof(uint32_t) * (BPE_GPT2_VOCAB + 1));
    int32_t *id_of = malloc(sizeof(int32_t) * BPE_GPT2_VOCAB);
    int rc = -1, n = 0;
    if (!pool || !off || !id_of) {
        snprintf(r->err, ABL_ERR_MAX, "vocabulary file %s: out of memory", r->path);
        goto done;
    }
    skip_ws(r);
    if (r->pos >= r->len || r->buf[r->pos++] != '{') {
        fail_at(r, r->pos > 0 ? r->pos - 1 : 0, "expected '{' (a JSON object)");
        goto done;
    }
    skip_ws(r);
    if (r->pos < r->len && r->buf[r->pos] == '}')
        r->pos++;
    else
        for (;;) {
            unsigned char tok[TOKEN_BYTES_MAX];
            size_t tn;
            long at;
            skip_ws(r);
            at = r->pos;
            if (json_token(r, alpha, tok, sizeof tok, &tn) != 0) goto done;
            skip_ws(r);
            if (r->pos >= r->len || r->buf[r->pos++] != ':') {
                fail_at(r, r->pos - 1, "expected ':'");
                goto done;
            }
            skip_ws(r);
            long id;
            if (json_int(r, &id) != 0) goto done;
            if (n >= BPE_GPT2_VOCAB) {
                fail_at(r, at, "more than GPT-2's 50257 tokens");
                goto done;
            }
            if (tn == 0) {
                fail_at(r, at, "an empty token");
                goto done;
            }
            if (GROW(pool, pool_cap, pool_len + tn) != 0) {
                snprintf(r->err, ABL_ERR_MAX, "vocabulary file %s: out of memory", r->path);
                goto done;
            }
            memcpy(pool + pool_len, tok, tn);
            off[n] = (uint32_t)pool_len;
            id_of[n++] = (int32_t)id;
            pool_len += tn;
            skip_ws(r);
            if (r->pos < r->len && r->buf[r->pos] == ',') {
                r->pos++;
                continue;
            }
            if (r->pos < r->len && r->buf[r->pos] == '}') {
                r->pos++;
                break;
            }
            fail_at(r, r->pos, "expected ',' or '}'");
            goto done;
        }
    skip_ws(r);
    if (r->pos != r->len) {
        fail_at(r, r->pos, "text after the JSON object");
        goto done;
    }
    if (n != BPE_GPT2_VOCAB) {
        snprintf(r->err, ABL_ERR_MAX,
                 "vocabulary file %s: %d tokens, not GPT-2's %d; the file is damaged or "
                 "truncated (reinstall it with scripts/install-deps.sh)",
                 r->path, n, BPE_GPT2_VOCAB);
        goto done;
    }
    off[n] = (uint32_t)pool_len;
    /* lay the tokens out in id order */
    b->n_tokens = n;
    b->tok_bytes = malloc(pool_len);
    b->tok_off = malloc(sizeof(uint32_t) * (size_t)(n + 1));
    uint32_t *len_of = calloc((size_t)n, sizeof(uint32_t));
    int32_t *entry_of = malloc(sizeof(int32_t) * (size_t)n);
    if (!b->tok_bytes || !b->tok_off || !len_of || !entry_of) {
        free(len_of);
        free(entry_of);
        snprintf(r->err, ABL_ERR_MAX, "vocabulary file %s: out of memory", r->path);
        goto done;
    }
    for (int i = 0; i < n; i++)
        entry_of[i] = -1;
    for (int e = 0; e < n; e++) {
        int32_t id = id_of[e];
        if (id >= n || entry_of[id] >= 0) {
            snprintf(r->err, ABL_ERR_MAX,
                     "vocabulary file %s: token id %ld is %s; the file is damaged (reinstall it "
                     "with scripts/install-deps.sh)",
                     r->path, (long)id, id >= n ? "out of range" : "given twice");
            free(len_of);
            free(entry_of);
            goto done;
        }
        entry_of[id] = e;
    }
    uint32_t o = 0;
    for (int id = 0; id < n; id++) {
        int e = entry_of[id];
        uint32_t len = off[e + 1] - off[e];
        b->tok_off[id] = o;
        memcpy(b->tok_bytes + o, pool + off[e], len);
        o += len;
    }
    b->tok_off[n] = o;
    free(len_of);
    free(entry_of);
    rc = 0;
done:
    free(pool);
    free(off);
    free(id_of);
    return rc;
}

static int build_token_index(Bpe *b, const char *path, char err[ABL_ERR_MAX]) {
    b->tok_mask = pow2_at_least((uint32_t)b->n_tokens * 2) - 1;
    b->tok_slots = malloc(sizeof(int32_t) * ((size_t)b->tok_mask + 1));
    if (!b->tok_slots) {
        snprintf(err, ABL_ERR_MAX, "vocabulary file %s: out of memory", path);
        return -1;
    }
    memset(b->tok_slots, 0xFF, sizeof(int32_t) * ((size_t)b->tok_mask + 1));
    for (int32_t id = 0; id < b->n_tokens; id++) {
        const unsigned char *s = b->tok_bytes + b->tok_off[id];
        size_t n = b->tok_off[id + 1] - b->tok_off[id];
        if (token_lookup(b, s, n) >= 0) {
            snprintf(err, ABL_ERR_MAX,
                     "vocabulary file %s: token id %ld repeats the token of id %ld; the file is "
                     "damaged (reinstall it with scripts/install-deps.sh)",
                     path, (long)id, (long)token_lookup(b, s, n));
            return -1;
        }
        uint32_t i = (uint32_t)hash_bytes(s, n) & b->tok_mask;
        while (b->tok_slots[i] >= 0)
            i = (i + 1) & b->tok_mask;
        b->tok_slots[i] = id;
    }
    for (int c = 0; c < 256; c++) {
        unsigned char byte = (unsigned char)c;
        b->byte_id[c] = token_lookup(b, &byte, 1);
        if (b->byte_id[c] < 0) {
            snprintf(err, ABL_ERR_MAX,
                     "vocabulary file %s: no token for byte 0x%02x; the file is damaged "
                     "(reinstall it with scripts/install-deps.sh)",
                     path, c);
            return -1;
        }
    }
    return 0;
}

/* One space-separated symbol of a vocab.bpe line, as bytes. */
static int merge_symbol(Reader *r, const int16_t *alpha, long end, unsigned char *out, size_t cap,
                        size_t *n) {
    *n = 0;
    while (r->pos < end && r->buf[r->pos] != ' ' && r->buf[r->pos] != '\t' &&
           r->buf[r->pos] != '\r') {
        uint32_t cp;
        long at = r->pos;
        r->pos += utf8_next(r->buf + r->pos, (size_t)(end - r->pos), &cp);
        if (cp == UTF8_INVALID || cp >= ALPHABET_MAX || alpha[cp] < 0)
            return fail_at(r, at, "a character outside GPT-2's byte alphabet");
        if (*n >= cap) return fail_at(r, at, "symbol too long");
        out[(*n)++] = (unsigned char)alpha[cp];
    }
    return *n > 0 ? 0 : fail_at(r, r->pos, "expected two symbols separated by a space");
}

/* vocab.bpe: a "#version" line, then one merge "a b" per line, in rank order. */
static int load_merges(Bpe *b, Reader *r, const int16_t *alpha) {
    b->merge_mask = pow2_at_least(BPE_GPT2_MERGES * 2) - 1;
    b->merges = malloc(sizeof(Merge) * ((size_t)b->merge_mask + 1));
    if (!b->merges) {
        snprintf(r->err, ABL_ERR_MAX, "vocabulary file %s: out of memory", r->path);
        return -1;
    }
    for (uint32_t i = 0; i <= b->merge_mask; i++)
        b->merges[i].key = UINT64_MAX;
    if (r->len < 8 || memcmp(r->buf, "#version", 8) != 0)
        return fail_at(r, 0, "expected a '#version' line first");
    int rank = 0;
    const unsigned char *nl = memchr(r->buf, '\n', (size_t)r->len);
    r->pos = nl ? nl - r->buf + 1 : r->len;
    while (r->pos < r->len) {
        nl = memchr(r->buf + r->pos, '\n', (size_t)(r->len - r->pos));
        long end = nl ? nl - r->buf : r->len, line_start = r->pos;
        skip_ws(r);
        if (r->pos >= end) { /* a blank line */
            r->pos = end + 1;
            continue;
        }
        unsigned char x[TOKEN_BYTES_MAX], y[TOKEN_BYTES_MAX], xy[2 * TOKEN_BYTES_MAX];
        size_t nx, ny;
        if (merge_symbol(r, alpha, end, x, sizeof x, &nx) != 0) return -1;
        while (r->pos < end && (r->buf[r->pos] == ' ' || r->buf[r->pos] == '\t'))
            r->pos++;
        if (merge_symbol(r, alpha, end, y, sizeof y, &ny) != 0) return -1;
        while (r->pos < end &&
               (r->buf[r->pos] == ' ' || r->buf[r->pos] == '\t' || r->buf[r->pos] == '\r'))
            r->pos++;
        if (r->pos != end) return fail_at(r, r->pos, "more than two symbols on a merge line");
        memcpy(xy, x, nx);
        memcpy(xy + nx, y, ny);
        int32_t ix = token_lookup(b, x, nx), iy = token_lookup(b, y, ny),
                ixy = token_lookup(b, xy, nx + ny);
        if (ix < 0 || iy < 0 || ixy < 0)
            return fail_at(r, line_start, "a merge whose parts or result are not in encoder.json");
        if (rank >= BPE_GPT2_MERGES) return fail_at(r, line_start, "more than 50000 merges");
        uint64_t key = (uint64_t)(uint32_t)ix << 32 | (uint32_t)iy;
        uint32_t i = hash_pair(key) & b->merge_mask;
        while (b->merges[i].key != UINT64_MAX && b->merges[i].key != key)
            i = (i + 1) & b->merge_mask;
        if (b->merges[i].key == key) return fail_at(r, line_start, "a merge given twice");
        b->merges[i] = (Merge){key, rank++, ixy};
        r->pos = end + 1;
    }
    if (rank != BPE_GPT2_MERGES) {
        snprintf(r->err, ABL_ERR_MAX,
                 "vocabulary file %s: %d merges, not GPT-2's %d; the file is damaged or "
                 "truncated (reinstall it with scripts/install-deps.sh)",
                 r->path, rank, BPE_GPT2_MERGES);
        return -1;
    }
    return 0;
}

static void join_path(char *out, size_t cap, const char *dir, const char *name) {
    size_t n = strlen(dir);
    snprintf(out, cap, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
}

Bpe *bpe_load(const char *dir, char err[ABL_ERR_MAX]) {
    char enc_path[BPE_VOCAB_DIR_MAX + 32], bpe_path[BPE_VOCAB_DIR_MAX + 32];
    join_path(enc_path, sizeof enc_path, dir, BPE_ENCODER_FILE);
    join_path(bpe_path, sizeof bpe_path, dir, BPE_MERGES_FILE);
    Bpe *b = calloc(1, sizeof *b);
    unsigned char *enc = NULL, *mer = NULL;
    long enc_len = 0, mer_len = 0;
    if (!b) {
        snprintf(err, ABL_ERR_MAX, "out of memory for the GPT-2 vocabulary");
        return NULL;
    }
    int16_t alpha[ALPHABET_MAX];
    byte_of_codepoint(alpha);
    int rc = -1;
    if (file_read_all("vocabulary file", enc_path, &enc, &enc_len, err) != 0 ||
        file_read_all("vocabulary file", bpe_path, &mer, &mer_len, err) != 0) {
        size_t n = strlen(err);
        snprintf(err + n, ABL_ERR_MAX - n,
                 " (GPT-2's vocabulary: run scripts/install-deps.sh, or set %s to the "
                 "directory holding %s and %s)",
                 BPE_VOCAB_ENV, BPE_ENCODER_FILE, BPE_MERGES_FILE);
        goto done;
    }
    Reader re = {enc_path, enc, enc_len, 0, err}, rm = {bpe_path, mer, mer_len, 0, err};
    if (load_encoder(b, &re, alpha) != 0 || build_token_index(b, enc_path, err) != 0 ||
        load_merges(b, &rm, alpha) != 0)
        goto done;
    char both[2 * 64 + 1];
    sha256_buf_hex(enc, (size_t)enc_len, both);
    sha256_buf_hex(mer, (size_t)mer_len, both + 64);
    sha256_buf_hex(both, 2 * 64, b->digest);
    b->cache_mask = (1u << 14) - 1;
    b->cache = calloc((size_t)b->cache_mask + 1, sizeof(CacheSlot));
    if (!b->cache) {
        snprintf(err, ABL_ERR_MAX, "out of memory for the GPT-2 vocabulary");
        goto done;
    }
    rc = 0;
done:
    free(enc);
    free(mer);
    if (rc != 0) {
        bpe_free(b);
        return NULL;
    }
    return b;
}

void bpe_free(Bpe *b) {
    if (!b) return;
    free(b->tok_bytes);
    free(b->tok_off);
    free(b->tok_slots);
    free(b->merges);
    free(b->cache);
    free(b->ckeys);
    free(b->cids);
    free(b->work);
    free(b);
}

int bpe_vocab_size(const Bpe *b) {
    return b->n_tokens;
}

const char *bpe_vocab_digest(const Bpe *b) {
    return b->digest;
}

const unsigned char *bpe_token_bytes(const Bpe *b, int32_t id, int *len) {
    if (id < 0 || id >= b->n_tokens) {
        *len = 0;
        return NULL;
    }
    *len = (int)(b->tok_off[id + 1] - b->tok_off[id]);
    return b->tok_bytes + b->tok_off[id];
}

void bpe_vocab_dir(char out[BPE_VOCAB_DIR_MAX]) {
    const char *env = getenv(BPE_VOCAB_ENV);
    if (env && env[0]) {
        snprintf(out, BPE_VOCAB_DIR_MAX, "%s", env);
        return;
    }
    char exe[BPE_VOCAB_DIR_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(out, BPE_VOCAB_DIR_MAX, "%s", BPE_VOCAB_SUBDIR); /* relative to the cwd */
        return;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0'; /* the binary's directory */
    static const char *const under[] = {"/../" BPE_VOCAB_SUBDIR, "/../share/ablate/gpt2"};
    for (int i = 0; i < 2; i++) {
        char probe[BPE_VOCAB_DIR_MAX + 64];
        snprintf(out, BPE_VOCAB_DIR_MAX, "%s%s", exe, under[i]);
        join_path(probe, sizeof probe, out, BPE_ENCODER_FILE);
        if (access(probe, F_OK) == 0) return;
    }
    /* neither has it: name where it belongs, the prefix's share/ablate when this binary is an
     * installed one (that directory exists), else the build tree's data/gpt2 */
    char share[BPE_VOCAB_DIR_MAX + 32];
    snprintf(share, sizeof share, "%s/../share/ablate", exe);
    snprintf(out, BPE_VOCAB_DIR_MAX, "%s%s", exe, under[access(share, F_OK) == 0 ? 1 : 0]);
}

/* ------------------------------------------------------------------ pre-tokenization */

static UnicodeClass codepoint_class(uint32_t cp) {
    static uint8_t ascii[128];
    static int ascii_ready;
    if (cp < 128 && ascii_ready) return (UnicodeClass)ascii[cp];
    int lo = 0, hi = unicode_class_count - 1;
    UnicodeClass c = UC_OTHER;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const UnicodeRange *r = &unicode_class_ranges[mid];
        if (cp < r->first)
            hi = mid - 1;
        else if (cp > r->last)
            lo = mid + 1;
        else {
            c = (UnicodeClass)r->cls;
            break;
        }
    }
    if (cp == 127) { /* fill the ASCII table once (idempotent, so harmless if raced) */
        for (uint32_t i = 0; i < 127; i++)
            ascii[i] = (uint8_t)codepoint_class(i);
        ascii[127] = (uint8_t)c;
        ascii_ready = 1;
    }
    return c;
}

static UnicodeClass class_at(const unsigned char *t, size_t len, size_t p, int *l) {
    if (t[p] < 0x80) {
        *l = 1;
        return codepoint_class(t[p]);
    }
    uint32_t cp;
    *l = utf8_next(t + p, len - p, &cp);
    /* invalid bytes are "other", like Python's surrogate escapes (category Cs) */
    return cp == UTF8_INVALID ? UC_OTHER : codepoint_class(cp);
}

static size_t run_end(const unsigned char *t, size_t len, size_t p, UnicodeClass c) {
    while (p < len) {
        int l;
        if (class_at(t, len, p, &l) != c) break;
        p += (size_t)l;
    }
    return p;
}

/* The end of the piece GPT-2's pattern matches at p: its alternatives in order. */
static size_t next_piece(const unsigned char *t, size_t len, size_t p) {
    /* 's|'t|'re|'ve|'m|'ll|'d (case-sensitive, as in GPT-2) */
    if (t[p] == '\'' && p + 1 < len) {
        unsigned char c = t[p + 1], d = p + 2 < len ? t[p + 2] : 0;
        if (c == 's' || c == 't' || c == 'm' || c == 'd') return p + 2;
        if ((c == 'r' && d == 'e') || (c == 'v' && d == 'e') || (c == 'l' && d == 'l'))
            return p + 3;
    }
    /* ' ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+' with the optional space */
    if (t[p] == ' ' && p + 1 < len) {
        int l;
        UnicodeClass c = class_at(t, len, p + 1, &l);
        if (c != UC_SPACE) return run_end(t, len, p + 1, c);
    }
    int l0;
    UnicodeClass c0 = class_at(t, len, p, &l0);
    if (c0 != UC_SPACE) return run_end(t, len, p, c0);
    /* \s+(?!\S)|\s+ : a run of white space gives up its last character to the piece after it
     * (" word"), unless the run ends the text or is a single character */
    size_t q = p, last = p;
    while (q < len) {
        int l;
        if (class_at(t, len, q, &l) != UC_SPACE) break;
        last = q;
        q += (size_t)l;
    }
    if (q == len || last == p) return q;
    return last;
}

/* ------------------------------------------------------------------ merging */

/* Merges the byte tokens of one piece in place, lowest rank first; returns the count. */
static size_t merge_piece(const Bpe *b, const unsigned char *s, size_t n, int32_t *w) {
    for (size_t i = 0; i < n; i++)
        w[i] = b->byte_id[s[i]];
    size_t m = n;
    while (m > 1) {
        int32_t best = INT32_MAX, merged = -1, x = 0, y = 0;
        for (size_t i = 0; i + 1 < m; i++) {
            const Merge *g = merge_find(b, w[i], w[i + 1]);
            if (g && g->rank < best) {
                best = g->rank;
                merged = g->id;
                x = w[i];
                y = w[i + 1];
            }
        }
        if (merged < 0) break;
        size_t o = 0;
        for (size_t i = 0; i < m;) {
            if (i + 1 < m && w[i] == x && w[i + 1] == y) {
                w[o++] = merged;
                i += 2;
            } else {
                w[o++] = w[i++];
            }
        }
        m = o;
    }
    return m;
}

static int cache_rehash(Bpe *b) {
    uint32_t mask = b->cache_mask * 2 + 1;
    CacheSlot *slots = calloc((size_t)mask + 1, sizeof(CacheSlot));
    if (!slots) return -1;
    for (uint32_t i = 0; i <= b->cache_mask; i++) {
        CacheSlot *s = &b->cache[i];
        if (!s->key_len) continue;
        uint32_t j = (uint32_t)s->hash & mask;
        while (slots[j].key_len)
            j = (j + 1) & mask;
        slots[j] = *s;
    }
    free(b->cache);
    b->cache = slots;
    b->cache_mask = mask;
    return 0;
}

/* The ids of one piece: from the cache, or merged (and cached). NULL when out of memory. */
static const int32_t *encode_piece(Bpe *b, const unsigned char *s, size_t n, size_t *count) {
    uint64_t h = 0;
    uint32_t i = 0;
    int cacheable = n <= CACHE_MAX_PIECE;
    if (cacheable) {
        h = hash_bytes(s, n);
        for (i = (uint32_t)h & b->cache_mask; b->cache[i].key_len; i = (i + 1) & b->cache_mask) {
            const CacheSlot *c = &b->cache[i];
            if (c->hash == h && c->key_len == n && memcmp(b->ckeys + c->key_off, s, n) == 0) {
                *count = c->n_ids;
                return b->cids + c->ids_off;
            }
        }
    }
    if (GROW(b->work, b->work_cap, n) != 0) return NULL;
    size_t m = merge_piece(b, s, n, b->work);
    *count = m;
    /* full (or a failed rehash left it crowded): answer without caching */
    if (!cacheable || b->cache_used >= CACHE_MAX_ENTRIES ||
        (size_t)b->cache_used * 4 >= ((size_t)b->cache_mask + 1) * 3)
        return b->work;
    if (GROW(b->ckeys, b->ckeys_cap, b->ckeys_len + n) != 0 ||
        GROW(b->cids, b->cids_cap, b->cids_len + m) != 0)
        return b->work; /* no room to cache it: still a correct answer */
    memcpy(b->ckeys + b->ckeys_len, s, n);
    memcpy(b->cids + b->cids_len, b->work, m * sizeof(int32_t));
    b->cache[i] = (CacheSlot){h, b->ckeys_len, b->cids_len, (uint32_t)n, (uint32_t)m};
    b->ckeys_len += n;
    b->cids_len += m;
    if (++b->cache_used * 2 > b->cache_mask) cache_rehash(b); /* a failed rehash only slows */
    return b->work;
}

long bpe_encode(Bpe *b, const unsigned char *text, size_t len, int32_t **out) {
    size_t cap = len / 3 + 16, n = 0;
    int32_t *ids = malloc(cap * sizeof(int32_t));
    if (!ids) return -1;
    for (size_t p = 0; p < len;) {
        size_t e = next_piece(text, len, p), m;
        const int32_t *piece = encode_piece(b, text + p, e - p, &m);
        if (!piece || GROW(ids, cap, n + m) != 0) {
            free(ids);
            return -1;
        }
        memcpy(ids + n, piece, m * sizeof(int32_t));
        n += m;
        p = e;
    }
    *out = ids;
    return (long)n;
}
