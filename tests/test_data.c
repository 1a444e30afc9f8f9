/* Data loaders: char/byte/.bin tokenizers, their error messages, the train/validation split,
 * training batches and validation windows. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"
#include "worker/data.h"

static const char *tmp;

static void put_i32(unsigned char *p, int32_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)u;
    p[1] = (unsigned char)(u >> 8);
    p[2] = (unsigned char)(u >> 16);
    p[3] = (unsigned char)(u >> 24);
}

/* Writes an llm.c .bin: header (magic, version, declared count), then `n` uint16 tokens. */
static int write_bin(const char *path, int32_t magic, int32_t version, int32_t declared,
                     const uint16_t *toks, long n) {
    size_t size = 1024 + 2 * (size_t)n;
    unsigned char *buf = calloc(1, size);
    if (!buf) return -1;
    put_i32(buf, magic);
    put_i32(buf + 4, version);
    put_i32(buf + 8, declared);
    for (long i = 0; i < n; i++) {
        buf[1024 + 2 * i] = (unsigned char)(toks[i] & 0xff);
        buf[1024 + 2 * i + 1] = (unsigned char)(toks[i] >> 8);
    }
    int rc = test_write_file(path, buf, size);
    free(buf);
    return rc;
}

static DataConfig data_cfg(const char *path, Tokenizer tok, double val_fraction) {
    DataConfig c;
    memset(&c, 0, sizeof c);
    snprintf(c.path, sizeof c.path, "%s", path);
    c.tokenizer = tok;
    c.val_fraction = val_fraction;
    return c;
}

/* dataset_load must fail, with a message naming the file and containing `word`. */
static void expect_load_error(const DataConfig *cfg, int context, const char *word) {
    Dataset d;
    char err[ABL_ERR_MAX] = "";
    int rc = dataset_load(&d, cfg, context, err);
    CHECK_MSG(rc != 0, "loading %s should fail (%s)", cfg->path, word);
    CHECK_MSG(strstr(err, cfg->path) != NULL, "error does not name the file: %s", err);
    CHECK_MSG(strstr(err, word) != NULL, "error lacks '%s': %s", word, err);
    if (rc == 0) dataset_free(&d);
}

TEST(char) {
    char path[512];
    test_path(path, sizeof path, "small.txt");
    /* 200 bytes over a small alphabet with a newline and a space. */
    char text[201];
    const char *alphabet = "hello world\nthe cat sat";
    for (int i = 0; i < 200; i++)
        text[i] = alphabet[(i * 7 + i / 3) % (int)strlen(alphabet)];
    text[200] = '\0';
    CHECK_CMP(test_write_file(path, text, 200), ==, 0);

    DataConfig cfg = data_cfg(path, TOK_CHAR, 0.1);
    Dataset d;
    char err[ABL_ERR_MAX] = "";
    int rc = dataset_load(&d, &cfg, 8, err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc != 0) return;

    int seen[256] = {0};
    for (int i = 0; i < 200; i++)
        seen[(unsigned char)text[i]] = 1;
    int distinct = 0;
    for (int c = 0; c < 256; c++)
        distinct += seen[c];
    CHECK_CMP(d.vocab_size, ==, distinct);
    CHECK_CMP(d.tokenizer, ==, TOK_CHAR);
    for (int i = 1; i < d.vocab_size; i++)
        CHECK_CMP(d.chars[i - 1], <, d.chars[i]);
    for (int c = 0; c < 256; c++) {
        if (seen[c]) {
            CHECK(d.char_to_id[c] >= 0 && d.chars[d.char_to_id[c]] == c);
        } else {
            CHECK_CMP(d.char_to_id[c], ==, -1);
        }
    }
    CHECK_CMP(d.n_tokens, ==, 200);
    CHECK_CMP(d.n_train, ==, 200 - 20);
    for (long i = 0; i < d.n_tokens; i++)
        CHECK(d.tokens[i] >= 0 && d.tokens[i] < d.vocab_size);

    /* Round trip: the stream decodes to the file; encoding the file gives the stream. */
    char out[256];
    int w = dataset_decode(&d, d.tokens, (int)d.n_tokens, out, sizeof out);
    CHECK_CMP(w, ==, 200);
    CHECK(memcmp(out, text, 200) == 0 && out[200] == '\0');
    int32_t ids[256];
    int n = dataset_encode(&d, text, ids, 256, err);
    CHECK_MSG(n == 200, "%s", err);
    CHECK(n == 200 && memcmp(ids, d.tokens, 200 * sizeof(int32_t)) == 0);

    /* Empty prompt, unknown character, too many tokens. */
    CHECK_CMP(dataset_encode(&d, "", ids, 256, err), ==, 0);
    err[0] = '\0';
    CHECK_CMP(dataset_encode(&d, "hello Z", ids, 256, err), ==, -1);
    CHECK_MSG(strstr(err, "'Z'") && strstr(err, "vocabulary"), "%s", err);
    CHECK_CMP(dataset_encode(&d, "hello", ids, 3, err), ==, -1);

    /* Decode never overflows and always terminates. */
    char small[5];
    memset(small, 'X', sizeof small);
    w = dataset_decode(&d, d.tokens, 10, small, sizeof small);
    CHECK(w == 4 && small[4] == '\0' && memcmp(small, text, 4) == 0);
    CHECK(dataset_decode(&d, d.tokens, 10, small, 1) == 0 && small[0] == '\0');
    dataset_free(&d);

    /* val_fraction 0: everything is train. */
    cfg.val_fraction = 0.0;
    rc = dataset_load(&d, &cfg, 8, err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_CMP(d.n_train, ==, 200);
        dataset_free(&d);
    }

    /* Too short for the context: the train split, then the validation split. */
    cfg.val_fraction = 0.1;
    expect_load_error(&cfg, 200, "model.context");
    expect_load_error(&cfg, 20, "validation split");
    expect_load_error(&cfg, 20, "data.val_fraction");
    rc = dataset_load(&d, &cfg, 19, err); /* val split of 20 holds context 19 + 1 */
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) dataset_free(&d);

    /* Empty and missing text files. */
    char empty[512], missing[512];
    test_path(empty, sizeof empty, "empty.txt");
    test_path(missing, sizeof missing, "no-such-file.txt");
    CHECK_CMP(test_write_file(empty, "", 0), ==, 0);
    DataConfig ce = data_cfg(empty, TOK_CHAR, 0.0);
    expect_load_error(&ce, 4, "empty");
    DataConfig cm = data_cfg(missing, TOK_CHAR, 0.0);
    expect_load_error(&cm, 4, "cannot open");
    expect_load_error(&cm, 4, "No such file");
}

TEST(corpus_file) {
    const char *env = getenv("ABLATE_TEST_CORPUS");
    if (!env || access(env, R_OK) != 0) {
        fprintf(stderr, "test_data: $ABLATE_TEST_CORPUS not readable; Tiny Shakespeare checks "
                        "skipped\n");
        return;
    }
    DataConfig cfg = data_cfg(env, TOK_CHAR, 0.1);
    Dataset d;
    char err[ABL_ERR_MAX] = "";
    int rc = dataset_load(&d, &cfg, 256, err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc != 0) return;
    CHECK_MSG(d.vocab_size == 65, "vocab %d", d.vocab_size);
    CHECK_MSG(d.n_tokens == 1115394, "n_tokens %ld", d.n_tokens);
    CHECK_CMP(d.n_train, ==, 1115394 - 111539);
    dataset_free(&d);
}

TEST(byte) {
    char path[512];
    test_path(path, sizeof path, "bytes.bin");
    unsigned char data[600];
    for (int i = 0; i < 600; i++)
        data[i] = (unsigned char)((i * 37 + 11) % 256);
    CHECK_CMP(test_write_file(path, data, sizeof data), ==, 0);
    DataConfig cfg = data_cfg(path, TOK_BYTE, 0.25);
    Dataset d;
    char err[ABL_ERR_MAX] = "";
    int rc = dataset_load(&d, &cfg, 16, err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc != 0) return;
    CHECK_CMP(d.vocab_size, ==, 256);
    CHECK(d.n_tokens == 600 && d.n_train == 450);
    int ok = 1;
    for (int i = 0; i < 600; i++)
        ok &= d.tokens[i] == data[i];
    CHECK(ok);
    const char *text = "Any bytes: \xc3\xa9\x01~";
    int32_t ids[64];
    int n = dataset_encode(&d, text, ids, 64, err);
    CHECK_CMP(n, ==, (int)strlen(text));
    char out[64];
    CHECK_CMP(dataset_decode(&d, ids, n, out, sizeof out), ==, n);
    CHECK_EQ_STR(out, text);
    dataset_free(&d);
}

TEST(bin) {
    enum { N = 1000 };
    uint16_t toks[N];
    for (int i = 0; i < N; i++)
        toks[i] = (uint16_t)((i * 7919) % 50257);
    char path[512];
    test_path(path, sizeof path, "tokens.bin");
    CHECK_CMP(write_bin(path, 20240520, 1, N, toks, N), ==, 0);

    DataConfig cfg = data_cfg(path, TOK_TOKENS, 0.1);
    Dataset d;
    char err[ABL_ERR_MAX] = "";
    char vocab[1024] = "";
    if (getenv("ABLATE_GPT2_VOCAB"))
        snprintf(vocab, sizeof vocab, "%s", getenv("ABLATE_GPT2_VOCAB"));
    setenv("ABLATE_GPT2_VOCAB", tmp, 1); /* no vocabulary there (tests/test_bpe.c: with one) */
    int rc = dataset_load(&d, &cfg, 32, err);
    if (vocab[0])
        setenv("ABLATE_GPT2_VOCAB", vocab, 1);
    else
        unsetenv("ABLATE_GPT2_VOCAB");
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_CMP(d.vocab_size, ==, 50257);
        CHECK(d.n_tokens == N && d.n_train == N - 100);
        int ok = 1;
        for (int i = 0; i < N; i++)
            ok &= d.tokens[i] == toks[i];
        CHECK(ok);
        /* Without GPT-2's vocabulary, prompts are ids and decoding prints <id>. */
        CHECK_CMP(d.bpe, ==, NULL);
        int32_t ids[8];
        CHECK_CMP(dataset_encode(&d, "  464 3290\n", ids, 8, err), ==, 2);
        CHECK(ids[0] == 464 && ids[1] == 3290);
        CHECK_CMP(dataset_encode(&d, "", ids, 8, err), ==, 0);
        CHECK(dataset_encode(&d, "464 dog", ids, 8, err) == -1 && strstr(err, "dog"));
        CHECK(dataset_encode(&d, "50257", ids, 8, err) == -1 && strstr(err, "range"));
        CHECK_CMP(dataset_encode(&d, "-1", ids, 8, err), ==, -1);
        char out[32];
        ids[0] = 464;
        ids[1] = 3290;
        CHECK(dataset_decode(&d, ids, 2, out, sizeof out) == 11 && strcmp(out, "<464><3290>") == 0);
        CHECK(dataset_decode(&d, ids, 2, out, 9) == 5 && strcmp(out, "<464>") == 0);
        dataset_free(&d);
    }

    /* A smaller vocabulary: valid when it covers the ids, an error naming the index if not. */
    uint16_t small[100];
    for (int i = 0; i < 100; i++)
        small[i] = (uint16_t)(i % 50);
    char spath[512];
    test_path(spath, sizeof spath, "small-vocab.bin");
    CHECK_CMP(write_bin(spath, 20240520, 1, 100, small, 100), ==, 0);
    DataConfig cs = data_cfg(spath, TOK_TOKENS, 0.0);
    cs.vocab_size = 50;
    rc = dataset_load(&d, &cs, 8, err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_CMP(d.vocab_size, ==, 50);
        dataset_free(&d);
    }
    cs.vocab_size = 40;
    expect_load_error(&cs, 8, "out of range");
    expect_load_error(&cs, 8, "token 40 "); /* the first offending index */
    expect_load_error(&cs, 8, "vocab_size 40");

    /* Bad magic (the value found and the expected one). */
    char bpath[512];
    test_path(bpath, sizeof bpath, "bad-magic.bin");
    CHECK_CMP(write_bin(bpath, 12345, 1, N, toks, N), ==, 0);
    DataConfig cb = data_cfg(bpath, TOK_TOKENS, 0.1);
    expect_load_error(&cb, 32, "magic");
    expect_load_error(&cb, 32, "12345");
    expect_load_error(&cb, 32, "20240520");

    /* Unsupported version. */
    char vpath[512];
    test_path(vpath, sizeof vpath, "version.bin");
    CHECK_CMP(write_bin(vpath, 20240520, 7, N, toks, N), ==, 0);
    DataConfig cv = data_cfg(vpath, TOK_TOKENS, 0.1);
    expect_load_error(&cv, 32, "version 7");

    /* Truncated: declares N tokens, holds N/2 (both numbers in the message). */
    char tpath[512];
    test_path(tpath, sizeof tpath, "truncated.bin");
    CHECK_CMP(write_bin(tpath, 20240520, 1, N, toks, N / 2), ==, 0);
    DataConfig ct = data_cfg(tpath, TOK_TOKENS, 0.1);
    expect_load_error(&ct, 32, "truncated");
    expect_load_error(&ct, 32, "1000");
    expect_load_error(&ct, 32, "500");

    /* Shorter than the header. */
    char hpath[512];
    test_path(hpath, sizeof hpath, "short.bin");
    unsigned char hdr[100] = {0};
    put_i32(hdr, 20240520);
    CHECK_CMP(test_write_file(hpath, hdr, sizeof hdr), ==, 0);
    DataConfig ch = data_cfg(hpath, TOK_TOKENS, 0.1);
    expect_load_error(&ch, 32, "header");

    /* Empty, missing. */
    char epath[512], mpath[512];
    test_path(epath, sizeof epath, "empty.bin");
    test_path(mpath, sizeof mpath, "missing.bin");
    CHECK_CMP(test_write_file(epath, "", 0), ==, 0);
    DataConfig ce = data_cfg(epath, TOK_TOKENS, 0.1);
    expect_load_error(&ce, 32, "empty");
    DataConfig cm = data_cfg(mpath, TOK_TOKENS, 0.1);
    expect_load_error(&cm, 32, "cannot open");

    /* Too short for the context: train split, then validation split. */
    expect_load_error(&cfg, 900, "too short");
    expect_load_error(&cfg, 900, "model.context");
    expect_load_error(&cfg, 100, "validation split");
    rc = dataset_load(&d, &cfg, 99, err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) dataset_free(&d);
}

/* A .bin whose token i is i (mod 65536), so a window's tokens reveal its position. */
static int load_ramp(Dataset *d, long n, double val_fraction, int context) {
    uint16_t *toks = malloc((size_t)n * sizeof *toks);
    if (!toks) return -1;
    for (long i = 0; i < n; i++)
        toks[i] = (uint16_t)i;
    char path[512];
    test_path(path, sizeof path, "ramp.bin");
    int rc = write_bin(path, 20240520, 1, (int32_t)n, toks, n);
    free(toks);
    if (rc != 0) return -1;
    DataConfig cfg = data_cfg(path, TOK_TOKENS, val_fraction);
    cfg.vocab_size = 65536;
    char err[ABL_ERR_MAX] = "";
    rc = dataset_load(d, &cfg, context, err);
    if (rc != 0) fprintf(stderr, "load_ramp: %s\n", err);
    return rc;
}

TEST(batches) {
    enum { N = 5000, B = 4, T = 16 };
    Dataset d;
    CHECK_CMP(load_ramp(&d, N, 0.2, T), ==, 0);
    if (!d.tokens) return;
    CHECK_CMP(d.n_train, ==, 4000);
    int32_t x1[B * T], y1[B * T], x2[B * T], y2[B * T];

    /* Same seed and step: identical; a different step or seed: different. */
    dataset_train_batch(&d, 42, 7, B, T, x1, y1);
    dataset_train_batch(&d, 42, 7, B, T, x2, y2);
    CHECK(memcmp(x1, x2, sizeof x1) == 0 && memcmp(y1, y2, sizeof y1) == 0);
    dataset_train_batch(&d, 43, 7, B, T, x2, y2);
    CHECK_CMP(memcmp(x1, x2, sizeof x1), !=, 0);
    dataset_train_batch(&d, 42, 8, B, T, x2, y2);
    CHECK_CMP(memcmp(x1, x2, sizeof x1), !=, 0);

    /* Window b is a pure function of (seed, step, b): a batch of one at counter step*B+b
     * reproduces it (step' = step*B+b with B = 1). */
    for (int b = 0; b < B; b++) {
        int32_t xo[T], yo[T];
        dataset_train_batch(&d, 42, 7L * B + b, 1, T, xo, yo);
        CHECK_CMP(memcmp(xo, x1 + b * T, sizeof xo), ==, 0);
    }

    /* Many windows: contiguous, shifted by one, inside the train split; starts cover it. */
    long min_start = N, max_start = -1;
    int ok_contig = 1, ok_shift = 1, ok_train = 1;
    for (long step = 0; step < 500; step++) {
        dataset_train_batch(&d, 1, step, B, T, x1, y1);
        for (int b = 0; b < B; b++) {
            long s = x1[b * T];
            if (s < min_start) min_start = s;
            if (s > max_start) max_start = s;
            for (int t = 0; t < T; t++) {
                ok_contig &= x1[b * T + t] == s + t;
                ok_shift &= y1[b * T + t] == x1[b * T + t] + 1;
            }
            ok_train &= y1[b * T + T - 1] <= d.n_train - 1; /* y ends at index <= n_train */
        }
    }
    CHECK(ok_contig);
    CHECK(ok_shift);
    CHECK(ok_train);
    CHECK(min_start >= 0 && min_start < 100);
    CHECK(max_start <= d.n_train - T - 1 && max_start > d.n_train - T - 101);
    dataset_free(&d);
}

/* Walks a layout's windows: every window's targets follow its inputs by one, windows are
 * T long but the last (shorter when T does not divide the count), and the targets seen, in
 * order, are written to seen[] (stream positions; on the ramp a token's id is its position).
 * Returns the number of targets, -1 when a window breaks the layout. */
static long walk_layout(const Dataset *d, const EvalLayout *l, long *seen, long cap) {
    long n = 0;
    int32_t x[256], y[256];
    for (int k = 0; k < l->n_windows; k++) {
        int len = dataset_eval_window(d, l, k, x, y);
        int last = k == l->n_windows - 1;
        if (len < 1 || len > l->T || (!last && len != l->T)) return -1;
        for (int j = 0; j < len; j++) {
            if (y[j] != x[j] + 1 || (j > 0 && x[j] != y[j - 1])) return -1;
            if (y[j] != l->first + (long)k * l->T + j) return -1;
            if (n < cap) seen[n] = y[j];
            n++;
        }
    }
    return n;
}

TEST(eval_layout) {
    enum { N = 5000 };
    Dataset d;
    CHECK_CMP(load_ramp(&d, N, 0.2, 64), ==, 0);
    if (!d.tokens) return;
    long n_val = N - d.n_train; /* 1000 */

    /* The same targets at every context: the first eval_tokens tokens after the split's
     * first, each once, windows of T with a shorter last one. */
    static long seen[1000], ref[1000];
    int Ts[] = {1, 7, 16, 32, 64};
    long counts[] = {1, 100, 160, 999};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++) {
            int T = Ts[k];
            EvalLayout l = dataset_eval_layout(&d, SPLIT_VAL, counts[c], T);
            CHECK_CMP(l.first, ==, d.n_train + 1);
            CHECK_CMP(l.n_targets, ==, counts[c]);
            CHECK_CMP(l.n_windows, ==, (int)((counts[c] + T - 1) / T));
            long n = walk_layout(&d, &l, k == 0 ? ref : seen, 1000);
            CHECK_MSG(n == counts[c], "eval_tokens %ld T %d: %ld targets", counts[c], T, n);
            if (k > 0)
                CHECK_MSG(memcmp(seen, ref, (size_t)counts[c] * sizeof *ref) == 0,
                          "eval_tokens %ld: T %d scores other tokens than T 1", counts[c], T);
        }
    }
    /* 100 targets at T 32: windows of 32, 32, 32 and 4, the last ending at target 100 */
    EvalLayout l = dataset_eval_layout(&d, SPLIT_VAL, 100, 32);
    int32_t x[32], y[32];
    CHECK_CMP(l.n_windows, ==, 4);
    CHECK_CMP(dataset_eval_window(&d, &l, 3, x, y), ==, 4);
    CHECK(x[0] == d.n_train + 96 && y[3] == d.n_train + 100);
    /* more than the split holds: every token after its first, and no further */
    l = dataset_eval_layout(&d, SPLIT_VAL, 1000000, 16);
    CHECK_CMP(l.n_targets, ==, n_val - 1);
    CHECK_CMP(walk_layout(&d, &l, seen, 1000), ==, n_val - 1);
    CHECK_CMP(seen[n_val - 2], ==, N - 1);
    /* eval_tokens 0 still scores one token; no test split: nothing */
    CHECK_CMP(dataset_eval_layout(&d, SPLIT_VAL, 0, 16).n_targets, ==, 1);
    CHECK_CMP(dataset_eval_layout(&d, SPLIT_TEST, 100, 16).n_targets, ==, 0);
    CHECK_CMP(dataset_eval_layout(&d, SPLIT_TEST, 100, 16).n_windows, ==, 0);
    dataset_free(&d);

    /* No validation split (val_fraction 0): the targets come from the train split. */
    CHECK_CMP(load_ramp(&d, 500, 0.0, 16), ==, 0);
    if (d.tokens) {
        l = dataset_eval_layout(&d, SPLIT_VAL, 100000, 16);
        CHECK(l.first == 1 && l.n_targets == 499);
        CHECK_CMP(walk_layout(&d, &l, seen, 1000), ==, 499);
        CHECK_CMP(seen[498], ==, 499);
        dataset_free(&d);
    }
}

int main(int argc, char **argv) {
    tmp = test_tmpdir();
    if (!tmp) {
        fprintf(stderr, "test_data: cannot create a temporary directory\n");
        return 1;
    }
    return test_main(argc, argv, "test_data");
}
