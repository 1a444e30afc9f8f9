/* The GPT-2 token cache trusts nothing it did not verify: a cache file whose
 * ids were changed, a truncated one, one holding another text's or another vocabulary's
 * tokens renamed into place, and one in the old format without digests are each rebuilt with
 * one warning naming the file, and the ids returned are the fresh tokenization's; a cache file
 * or directory that others can write (or that belongs to another user) is not read. A clean
 * entry is still a hit (the file is not rewritten), new files and directories are created
 * without group/other write whatever the umask, and several processes meeting a damaged entry
 * at once warn once and all get the right ids. The digest a caller hands in is never taken on
 * trust: the cache keys and returns the digest of the text itself. Needs GPT-2's vocabulary in
 * $ABLATE_GPT2_VOCAB (CTest sets it; scripts/install-deps.sh installs it): without it, every case
 * is skipped with the reason. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"
#include "tokenizer/bpe.h"
#include "tokenizer/token_cache.h"
#include "tokenizer/token_file.h"
#include "util/sha256.h"

static const char *tmp;
static Bpe *bpe; /* GPT-2's vocabulary; NULL: every case is skipped */
static char vocab_dir[BPE_VOCAB_DIR_MAX];

/* Two texts with different tokens. */
static const char text_a[] = "Hello world. The dog's 42 caf\xc3\xa9s sat on the mat, and then "
                             "the king said: to be or not to be, that is the question.\n";
static const char text_b[] = "Entirely other words: quantum chromodynamics, glue balls, and "
                             "lattice gauge theory on a torus of side 48.\n";

/* A fresh cache directory for one case, named by it, set as $ABLATE_CACHE_DIR. */
static void use_cache(char *dir, size_t cap, const char *name) {
    snprintf(dir, cap, "%s/cache-%s", tmp, name);
    setenv(TOKEN_CACHE_ENV, dir, 1);
}

/* The entry's path, as the cache names it (docs/spec.md, "The token cache"). */
static void entry_path(char *out, size_t cap, const char *dir, const char *text) {
    char hex[65];
    sha256_buf_hex(text, strlen(text), hex);
    snprintf(out, cap, "%s/gpt2-%s-%.16s.bin", dir, hex, bpe_vocab_digest(bpe));
}

/* token_cache_encode with what it says on stderr caught in warn (one string); given: the digest
 * the caller hands in (NULL: none), set to the one the cache returns. */
static long encode_given(Bpe *b, const char *text, char *given, int32_t **ids, char *warn,
                         size_t cap) {
    char path[600];
    test_path(path, sizeof path, "stderr.txt");
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(saved >= 0 && fd >= 0 && dup2(fd, STDERR_FILENO) >= 0);
    close(fd);
    char err[ABL_ERR_MAX] = "";
    long n = token_cache_encode(b, "text.txt", (const unsigned char *)text, strlen(text), given,
                                ids, err);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    CHECK_MSG(n > 0, "%s", err);
    char *said = test_read_file(path, NULL);
    snprintf(warn, cap, "%s", said ? said : "");
    free(said);
    if (warn[0]) fprintf(stderr, "    said: %s", warn);
    return n;
}

static long encode(Bpe *b, const char *text, int32_t **ids, char *warn, size_t cap) {
    return encode_given(b, text, NULL, ids, warn, cap);
}

/* The ids equal a fresh tokenization of text. */
static int fresh_ids(const char *text, const int32_t *ids, long n) {
    int32_t *want;
    long m = bpe_encode(bpe, (const unsigned char *)text, strlen(text), &want);
    int same = m == n && memcmp(want, ids, sizeof(int32_t) * (size_t)n) == 0;
    free(want);
    return same;
}

/* Exactly one line, naming path and holding what. */
static int one_warning(const char *warn, const char *path, const char *what) {
    const char *nl = strchr(warn, '\n');
    return strstr(warn, "warning") && strstr(warn, path) && strstr(warn, what) && nl &&
           nl[1] == '\0';
}

static int same_file(const struct stat *a, const struct stat *b) {
    return a->st_ino == b->st_ino && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Builds the entry of text in dir; its stat in *st. */
static void build(const char *text, const char *path, struct stat *st) {
    int32_t *ids;
    char warn[1024];
    long n = encode(bpe, text, &ids, warn, sizeof warn);
    CHECK_MSG(warn[0] == '\0', "a first build warned: %s", warn);
    CHECK(fresh_ids(text, ids, n));
    free(ids);
    CHECK_MSG(stat(path, st) == 0, "no cache file %s", path);
}

/* A fresh cache directory NAME with text_a's entry built in it (dir, path; st of the file). */
static void built_entry(const char *name, char *dir, size_t dn, char *path, size_t pn,
                        struct stat *st) {
    use_cache(dir, dn, name);
    entry_path(path, pn, dir, text_a);
    build(text_a, path, st);
}

/* Loads text expecting a rebuild with one warning naming path and what; the file afterwards
 * is a clean hit. */
static void expect_rebuilt(const char *text, const char *path, const char *what) {
    int32_t *ids;
    char warn[1024];
    long n = encode(bpe, text, &ids, warn, sizeof warn);
    CHECK_MSG(one_warning(warn, path, what), "expected one warning naming %s and '%s', got: %s",
              path, what, warn);
    CHECK_MSG(fresh_ids(text, ids, n), "the ids differ from a fresh tokenization");
    free(ids);
    struct stat st, again;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 022) == 0);
    n = encode(bpe, text, &ids, warn, sizeof warn);
    CHECK_MSG(warn[0] == '\0', "the rebuilt entry is not a clean hit: %s", warn);
    CHECK(fresh_ids(text, ids, n));
    free(ids);
    CHECK(stat(path, &again) == 0 && same_file(&st, &again));
}

#define NEED_VOCAB()                                                                               \
    do {                                                                                           \
        if (!bpe) {                                                                                \
            fprintf(stderr, "test_token_cache: no GPT-2 vocabulary in %s: skipped\n", vocab_dir);  \
            return;                                                                                \
        }                                                                                          \
    } while (0)

TEST(clean_hit) {
    NEED_VOCAB();
    char dir[512], path[700];
    use_cache(dir, sizeof dir, "hit");
    entry_path(path, sizeof path, dir, text_a);
    /* no group/other write bits on what the cache creates, whatever the umask */
    mode_t old = umask(0);
    struct stat st, again, ds;
    build(text_a, path, &st);
    umask(old);
    CHECK_MSG((st.st_mode & 022) == 0, "cache file mode %04o", (unsigned)(st.st_mode & 07777));
    CHECK_CMP(stat(dir, &ds), ==, 0);
    CHECK_MSG((ds.st_mode & 022) == 0, "cache directory mode %04o", (unsigned)(ds.st_mode & 07777));
    /* the second load reads the file: no warning, the same ids, the file untouched */
    int32_t *ids;
    char warn[1024];
    long n = encode(bpe, text_a, &ids, warn, sizeof warn);
    CHECK_MSG(warn[0] == '\0', "%s", warn);
    CHECK(fresh_ids(text_a, ids, n));
    free(ids);
    CHECK(stat(path, &again) == 0 && same_file(&st, &again));
    /* still a valid llm.c .bin: the ids follow the 1024-byte header */
    long len;
    unsigned char *buf = (unsigned char *)test_read_file(path, &len);
    int32_t *parsed;
    long m;
    char err[ABL_ERR_MAX];
    CHECK(buf && token_file_parse(path, buf, len, 50257, &parsed, &m, err) == 0);
    if (buf && m > 0) {
        CHECK(fresh_ids(text_a, parsed, m));
        free(parsed);
    }
    free(buf);
}

/* Flips the low bit of the id at index i (header intact). */
static void flip_id(const char *path, long i) {
    long len;
    unsigned char *buf = (unsigned char *)test_read_file(path, &len);
    CHECK(buf && len > TOKEN_FILE_HEADER_BYTES + 2 * (i + 1));
    if (!buf) return;
    buf[TOKEN_FILE_HEADER_BYTES + 2 * i] ^= 1;
    CHECK_CMP(test_write_file(path, buf, (size_t)len), ==, 0);
    free(buf);
}

TEST(flipped_id) {
    NEED_VOCAB();
    char dir[512], path[700];
    struct stat st;
    built_entry("flip", dir, sizeof dir, path, sizeof path, &st);
    flip_id(path, 3);
    expect_rebuilt(text_a, path, "digest");
}

TEST(truncated) {
    NEED_VOCAB();
    char dir[512], path[700];
    struct stat st;
    built_entry("trunc", dir, sizeof dir, path, sizeof path, &st);
    CHECK_CMP(truncate(path, st.st_size - 2), ==, 0);
    expect_rebuilt(text_a, path, "truncated");
}

TEST(foreign_text) {
    NEED_VOCAB();
    char dir[512], path_a[700], path_b[700];
    struct stat st;
    use_cache(dir, sizeof dir, "text");
    entry_path(path_a, sizeof path_a, dir, text_a);
    entry_path(path_b, sizeof path_b, dir, text_b);
    build(text_b, path_b, &st);
    CHECK_CMP(rename(path_b, path_a), ==, 0); /* another text's whole, valid entry under a's name */
    expect_rebuilt(text_a, path_a, "another text");
}

/* Copies GPT-2's vocabulary into dir with the first two merges swapped: a valid vocabulary
 * with another digest (and other merge priorities). */
static Bpe *other_vocabulary(const char *dir) {
    char from[1024], to[1024];
    mkdir(dir, 0700);
    snprintf(from, sizeof from, "%s/encoder.json", vocab_dir);
    snprintf(to, sizeof to, "%s/encoder.json", dir);
    long len;
    char *s = test_read_file(from, &len);
    CHECK(s && test_write_file(to, s, (size_t)len) == 0);
    free(s);
    snprintf(from, sizeof from, "%s/vocab.bpe", vocab_dir);
    snprintf(to, sizeof to, "%s/vocab.bpe", dir);
    s = test_read_file(from, &len);
    CHECK_CMP(s, !=, NULL);
    if (!s) return NULL;
    /* line 0 is "#version: 0.2"; lines 1 and 2 the first two merges */
    char *l1 = strchr(s, '\n') + 1, *l2 = strchr(l1, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
    size_t n1 = (size_t)(l2 - l1), n2 = (size_t)(l3 - l2);
    char *out = malloc((size_t)len);
    size_t k = (size_t)(l1 - s);
    memcpy(out, s, k);
    memcpy(out + k, l2, n2);
    memcpy(out + k + n2, l1, n1);
    memcpy(out + k + n1 + n2, l3, (size_t)len - (size_t)(l3 - s));
    CHECK_CMP(test_write_file(to, out, (size_t)len), ==, 0);
    free(out);
    free(s);
    char err[ABL_ERR_MAX];
    Bpe *b = bpe_load(dir, err);
    CHECK_MSG(b != NULL, "%s", err);
    return b;
}

TEST(foreign_vocabulary) {
    NEED_VOCAB();
    char dir[512], path[700], other[700], vdir[600];
    use_cache(dir, sizeof dir, "vocab");
    entry_path(path, sizeof path, dir, text_a);
    snprintf(vdir, sizeof vdir, "%s/other-vocab", tmp);
    Bpe *b2 = other_vocabulary(vdir);
    if (!b2) return;
    CHECK_CMP(strcmp(bpe_vocab_digest(b2), bpe_vocab_digest(bpe)), !=, 0);
    int32_t *ids;
    char warn[1024], hex[65];
    long n = encode(b2, text_a, &ids, warn, sizeof warn);
    CHECK_CMP(n, >, 0);
    free(ids);
    sha256_buf_hex(text_a, strlen(text_a), hex);
    snprintf(other, sizeof other, "%s/gpt2-%s-%.16s.bin", dir, hex, bpe_vocab_digest(b2));
    CHECK_CMP(rename(other, path), ==, 0); /* the same text under another vocabulary */
    expect_rebuilt(text_a, path, "another vocabulary");
    bpe_free(b2);
}

TEST(old_format) {
    NEED_VOCAB();
    char dir[512], path[700], err[ABL_ERR_MAX];
    use_cache(dir, sizeof dir, "old");
    entry_path(path, sizeof path, dir, text_a);
    /* what earlier versions wrote: a plain .bin with the right ids and nothing to verify them */
    int32_t *ids;
    long n = bpe_encode(bpe, (const unsigned char *)text_a, strlen(text_a), &ids);
    CHECK_CMP(mkdir(dir, 0700), ==, 0);
    CHECK_MSG(token_file_write("test", path, ids, n, err) == 0, "%s", err);
    CHECK_CMP(chmod(path, 0644), ==, 0);
    free(ids);
    expect_rebuilt(text_a, path, "old format");
}

/* A valid entry made writable by group (umask 002 in an earlier version, or a chmod): not
 * read, replaced by a private file. */
TEST(group_writable_file) {
    NEED_VOCAB();
    char dir[512], path[700];
    struct stat st;
    built_entry("gw", dir, sizeof dir, path, sizeof path, &st);
    CHECK_CMP(chmod(path, 0664), ==, 0);
    expect_rebuilt(text_a, path, "writable by group or others");
    struct stat now;
    CHECK(stat(path, &now) == 0 && now.st_ino != st.st_ino); /* replaced, not chmod'ed */
}

TEST(other_owner) {
    NEED_VOCAB();
    if (geteuid() != 0) {
        fprintf(stderr, "test_token_cache: not root, cannot give a file away: skipped\n");
        return;
    }
    char dir[512], path[700];
    struct stat st;
    built_entry("owner", dir, sizeof dir, path, sizeof path, &st);
    CHECK_CMP(chown(path, 4242, 4242), ==, 0);
    expect_rebuilt(text_a, path, "belongs to uid 4242");
}

/* A directory others can write: not used at all (neither read nor written), with advice. */
TEST(group_writable_dir) {
    NEED_VOCAB();
    char dir[512], path[700];
    struct stat st;
    built_entry("gwdir", dir, sizeof dir, path, sizeof path, &st);
    flip_id(path, 2); /* if it were read, the ids would be wrong */
    CHECK_CMP(stat(path, &st), ==, 0);
    CHECK_CMP(chmod(dir, 0775), ==, 0);
    for (int round = 0; round < 2; round++) {
        int32_t *ids;
        char warn[1024];
        long n = encode(bpe, text_a, &ids, warn, sizeof warn);
        if (round == 0) {
            char advice[600];
            snprintf(advice, sizeof advice, "chmod go-w %s", dir);
            CHECK_MSG(one_warning(warn, dir, advice) && strstr(warn, TOKEN_CACHE_ENV) &&
                          strstr(warn, "writable by group or others"),
                      "%s", warn);
        } else {
            CHECK_MSG(warn[0] == '\0', "the same warning twice in one process: %s", warn);
        }
        CHECK(fresh_ids(text_a, ids, n));
        free(ids);
        struct stat now;
        CHECK(stat(path, &now) == 0 && same_file(&st, &now)); /* not replaced either */
    }
    /* nor written: without an entry, none appears */
    unlink(path);
    int32_t *ids;
    char warn[1024];
    encode(bpe, text_a, &ids, warn, sizeof warn);
    free(ids);
    CHECK_CMP(access(path, F_OK), !=, 0);
    if (geteuid() == 0) { /* a directory of another user */
        CHECK(chmod(dir, 0755) == 0 && chown(dir, 4242, 4242) == 0);
        encode(bpe, text_a, &ids, warn, sizeof warn);
        free(ids);
        CHECK_MSG(one_warning(warn, dir, "belongs to uid 4242"), "%s", warn);
        CHECK_CMP(access(path, F_OK), !=, 0);
    }
}

/* The caller hands in another text's digest (a forged or damaged data digest cache entry said
 * text a is text b): the cache neither reads b's entry on a hit nor files a's tokens under b's
 * name on a miss; it tokenizes by the digest of the bytes it was given, warns once, and hands
 * that digest back for the run to record. */
TEST(wrong_digest_given) {
    NEED_VOCAB();
    char dir[512], path_a[700], path_b[700], hex_a[65], hex_b[65], given[65], warn[1024];
    struct stat st_b, now;
    sha256_buf_hex(text_a, strlen(text_a), hex_a);
    sha256_buf_hex(text_b, strlen(text_b), hex_b);
    for (int hit = 1; hit >= 0; hit--) {
        use_cache(dir, sizeof dir, hit ? "given-hit" : "given-miss");
        entry_path(path_a, sizeof path_a, dir, text_a);
        entry_path(path_b, sizeof path_b, dir, text_b);
        if (hit) build(text_b, path_b, &st_b);
        int32_t *ids;
        memcpy(given, hex_b, sizeof given);
        long n = encode_given(bpe, text_a, given, &ids, warn, sizeof warn);
        CHECK_MSG(fresh_ids(text_a, ids, n), "text a got the tokens of the digest it came with");
        free(ids);
        CHECK_MSG(!strcmp(given, hex_a), "the digest handed back is not the text's: %s", given);
        if (hit) /* the same warning is not given twice in one process */
            CHECK_MSG(one_warning(warn, "text.txt", "it came with"), "%s", warn);
        if (hit) CHECK(stat(path_b, &now) == 0 && same_file(&st_b, &now)); /* b's entry untouched */
        /* b's entry, if any, holds b's tokens: a later load of b is right */
        n = encode(bpe, text_b, &ids, warn, sizeof warn);
        CHECK_MSG(fresh_ids(text_b, ids, n), "text b got text a's tokens from its entry");
        free(ids);
        CHECK_CMP(access(path_a, F_OK), ==, 0);
    }
}

/* Four processes meet a damaged entry at once: one warns and rebuilds under the lock, the
 * others read its file; all get the fresh tokenization. */
TEST(concurrent_damage) {
    NEED_VOCAB();
    char dir[512], path[700];
    struct stat st;
    built_entry("conc", dir, sizeof dir, path, sizeof path, &st);
    flip_id(path, 1);
    enum { KIDS = 4 };
    int go[2];
    CHECK_CMP(pipe(go), ==, 0);
    pid_t pid[KIDS];
    for (int k = 0; k < KIDS; k++) {
        if ((pid[k] = fork()) == 0) {
            char c;
            close(go[1]);
            if (read(go[0], &c, 1) != 0) _exit(3); /* all start when the pipe closes */
            char out[600];
            snprintf(out, sizeof out, "%s/kid%d.txt", tmp, k);
            int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            dup2(fd, STDERR_FILENO);
            int32_t *ids;
            char err[ABL_ERR_MAX];
            long n = token_cache_encode(bpe, "text.txt", (const unsigned char *)text_a,
                                        strlen(text_a), NULL, &ids, err);
            _exit(n > 0 && fresh_ids(text_a, ids, n) ? 0 : 1);
        }
    }
    close(go[0]);
    close(go[1]);
    int warnings = 0;
    for (int k = 0; k < KIDS; k++) {
        int status;
        CHECK_CMP(waitpid(pid[k], &status, 0), ==, pid[k]);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d got other ids", k);
        char out[600];
        snprintf(out, sizeof out, "%s/kid%d.txt", tmp, k);
        char *said = test_read_file(out, NULL);
        for (const char *p = said; p && (p = strstr(p, "warning")); p++)
            warnings++;
        free(said);
    }
    CHECK_MSG(warnings == 1, "%d warnings from %d processes", warnings, KIDS);
}

int main(int argc, char **argv) {
    tmp = test_tmpdir();
    if (!tmp) {
        fprintf(stderr, "test_token_cache: cannot create a temporary directory\n");
        return 1;
    }
    bpe_vocab_dir(vocab_dir);
    char err[ABL_ERR_MAX];
    bpe = bpe_load(vocab_dir, err);
    if (!bpe) fprintf(stderr, "test_token_cache: %s\n", err);
    int rc = test_main(argc, argv, "test_token_cache");
    bpe_free(bpe);
    return rc;
}
