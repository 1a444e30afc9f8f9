/* GPT-2 tokens inside ablate: SHA-256 and UTF-8 decoding against known answers,
 * data.tokenizer: gpt2 (ids of known words, prompts, decoded samples with invalid UTF-8 shown
 * as U+FFFD and never cut inside a character, the token cache file), and tokens runs that
 * decode to text once GPT-2's vocabulary is at hand. Needs $ABLATE_GPT2_VOCAB (CTest sets it;
 * scripts/install-deps.sh installs the files). The comparison with the reference encoder is
 * tests/e2e/test_gpt2_tokens.py. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"
#include "worker/data.h"
#include "util/sha256.h"
#include "tokenizer/token_cache.h"
#include "tokenizer/token_file.h"
#include "util/utf8.h"

static const char *tmp;

TEST(sha256) {
    static const struct {
        const char *in, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        sha256_buf_hex(v[i].in, strlen(v[i].in), hex);
        CHECK_MSG(strcmp(hex, v[i].hex) == 0, "sha256(\"%s\") = %s", v[i].in, hex);
    }
    /* a million 'a's, fed in uneven pieces */
    Sha256 s;
    sha256_init(&s);
    char chunk[1000];
    memset(chunk, 'a', sizeof chunk);
    for (long done = 0, k = 1; done < 1000000; k = k % 997 + 1) {
        long n = k < 1000000 - done ? k : 1000000 - done;
        sha256_update(&s, chunk, (size_t)n);
        done += n;
    }
    sha256_hex(&s, hex);
    CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0);
}

TEST(utf8) {
    static const struct {
        const char *s;
        int len;
        uint32_t cp;
    } v[] = {
        {"A", 1, 'A'},
        {"\xc3\xa9", 2, 0xE9},
        {"\xe2\x82\xac", 3, 0x20AC},
        {"\xf0\x9f\x98\x80", 4, 0x1F600},
        {"\xff", 1, UTF8_INVALID},
        {"\x80", 1, UTF8_INVALID},
        {"\xc0\xaf", 1, UTF8_INVALID},         /* overlong: C0 can start nothing */
        {"\xe0\x80\x80", 1, UTF8_INVALID},     /* overlong: E0 needs A0..BF next */
        {"\xed\xa0\x80", 1, UTF8_INVALID},     /* a surrogate */
        {"\xf4\x90\x80\x80", 1, UTF8_INVALID}, /* past U+10FFFF */
        {"\xe2\x82(", 2, UTF8_INVALID},        /* truncated: the maximal subpart is 2 bytes */
        {"\xf0\x9f\x98", 3, UTF8_INVALID},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint32_t cp;
        int len = utf8_next((const unsigned char *)v[i].s, strlen(v[i].s), &cp);
        CHECK_MSG(len == v[i].len && cp == v[i].cp, "case %zu: len %d cp %x", i, len, cp);
    }
    char out[16];
    /* one U+FFFD per maximal subpart, as Python's errors="replace" and TextDecoder do */
    CHECK(utf8_replace_copy((const unsigned char *)"a\xe2\x82z\xff", 5, out, sizeof out) == 8);
    CHECK(strcmp(out, "a\xef\xbf\xbdz\xef\xbf\xbd") == 0);
    /* never cut inside a character */
    CHECK(utf8_replace_copy((const unsigned char *)"ab\xe2\x82\xac", 5, out, 5) == 2);
}

static void remove_dir(const char *dir) {
    DIR *dh = opendir(dir);
    if (!dh) return;
    struct dirent *e;
    char p[1024];
    while ((e = readdir(dh)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(dh);
    rmdir(dir);
}

static int count_cache_files(const char *dir) {
    DIR *dh = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (dh && (e = readdir(dh)))
        n += strncmp(e->d_name, "gpt2-", 5) == 0 && strstr(e->d_name, ".bin") &&
             !strstr(e->d_name, ".lock");
    if (dh) closedir(dh);
    return n;
}

TEST(gpt2_dataset) {
    char text[512], cache[512];
    snprintf(text, sizeof text, "%s/text.txt", tmp);
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    setenv(TOKEN_CACHE_ENV, cache, 1);
    char body[4096] = "";
    for (int i = 0; i < 40; i++)
        strcat(body, "Hello world. The dog's 42 caf\xc3\xa9s!\n");
    test_write_text(text, body);
    DataConfig cfg = {.tokenizer = TOK_GPT2, .val_fraction = 0.1};
    snprintf(cfg.path, sizeof cfg.path, "%s", text);
    Dataset d;
    char err[ABL_ERR_MAX] = "";
    int rc = dataset_load(&d, &cfg, 8, err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc != 0) return;
    CHECK(d.vocab_size == 50257 && d.bpe != NULL);
    /* "Hello" " world" "." "\n" "The" " dog" "'s" ... (GPT-2's ids) */
    CHECK(d.tokens[0] == 15496 && d.tokens[1] == 995 && d.tokens[2] == 13);
    CHECK(count_cache_files(cache) == 1);

    int32_t ids[16];
    int n = dataset_encode(&d, "The dog", ids, 16, err);
    CHECK(n == 2 && ids[0] == 464 && ids[1] == 3290);
    CHECK(dataset_encode(&d, "The dog", ids, 1, err) == -1 && strstr(err, "more than 1"));
    char out[64];
    CHECK(dataset_decode(&d, ids, 2, out, sizeof out) == 7 && strcmp(out, "The dog") == 0);
    /* a lone byte token decodes to U+FFFD, as GPT-2's decoder (errors="replace") shows it */
    n = dataset_encode(&d, "caf\xc3\xa9", ids, 16, err);
    CHECK(n >= 2);
    int32_t half[2] = {ids[0], 0};
    n = dataset_encode(&d, "\xc3", half + 1, 1, err);
    CHECK(n == 1);
    CHECK(dataset_decode(&d, half, 2, out, sizeof out) > 0 && strstr(out, "\xef\xbf\xbd"));
    /* truncated output stops before a character that does not fit */
    n = dataset_encode(&d, "\xc3\xa9\xc3\xa9", ids, 16, err);
    CHECK(dataset_decode(&d, ids, n, out, 4) == 2 && strcmp(out, "\xc3\xa9") == 0);

    /* the second load reads the cache: the same tokens */
    Dataset d2;
    rc = dataset_load(&d2, &cfg, 8, err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(d2.n_tokens == d.n_tokens &&
              memcmp(d2.tokens, d.tokens, sizeof(int32_t) * (size_t)d.n_tokens) == 0);
        dataset_free(&d2);
    }

    /* a tokens run over the same ids: text prompts and decoded samples with the vocabulary */
    char bin[512];
    snprintf(bin, sizeof bin, "%s/tokens.bin", tmp);
    CHECK(token_file_write("test file", bin, d.tokens, d.n_tokens, err) == 0);
    DataConfig tc = {.tokenizer = TOK_TOKENS, .val_fraction = 0.1};
    snprintf(tc.path, sizeof tc.path, "%s", bin);
    rc = dataset_load(&d2, &tc, 8, err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(d2.bpe != NULL);
        CHECK(dataset_encode(&d2, "464 3290", ids, 16, err) == 2 && ids[1] == 3290);
        CHECK(dataset_encode(&d2, "The dog", ids, 16, err) == 2 && ids[1] == 3290);
        CHECK(dataset_decode(&d2, ids, 2, out, sizeof out) == 7 && strcmp(out, "The dog") == 0);
        dataset_free(&d2);
    }
    unlink(bin);
    dataset_free(&d);
    unlink(text);
    remove_dir(cache);
    unsetenv(TOKEN_CACHE_ENV);
}

TEST(missing_vocabulary) {
    char text[512], none[512];
    snprintf(text, sizeof text, "%s/text.txt", tmp);
    snprintf(none, sizeof none, "%s/no-vocab", tmp);
    test_write_text(text, "some text that is long enough for a context of four\n");
    char saved[1024] = "";
    if (getenv(BPE_VOCAB_ENV)) snprintf(saved, sizeof saved, "%s", getenv(BPE_VOCAB_ENV));
    setenv(BPE_VOCAB_ENV, none, 1);
    DataConfig cfg = {.tokenizer = TOK_GPT2, .val_fraction = 0.0};
    snprintf(cfg.path, sizeof cfg.path, "%s", text);
    Dataset d;
    char err[ABL_ERR_MAX] = "", want[600];
    snprintf(want, sizeof want, "%s/encoder.json", none);
    CHECK(dataset_load(&d, &cfg, 4, err) == -1);
    CHECK_MSG(strstr(err, want) && strstr(err, "cannot open"), "%s", err);
    if (saved[0])
        setenv(BPE_VOCAB_ENV, saved, 1);
    else
        unsetenv(BPE_VOCAB_ENV);
    unlink(text);
}

int main(int argc, char **argv) {
    tmp = test_tmpdir();
    if (!tmp) {
        fprintf(stderr, "test_bpe: cannot create a temporary directory\n");
        return 1;
    }
    if (!getenv(BPE_VOCAB_ENV)) {
        fprintf(stderr, "test_bpe: set %s to GPT-2's vocabulary (scripts/install-deps.sh)\n",
                BPE_VOCAB_ENV);
        return 1;
    }
    return test_main(argc, argv, "test_bpe");
}
