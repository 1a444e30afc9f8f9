/* The data's identity: the digest of the bytes read and its cache keyed by the
 * file's identity on disk (util/file_digest.h), and what dataset_load records
 * (worker/data_identity.h). The cache is trusted only as far as who could have written it:
 * an entry of another file copied or linked under a file's name, one in
 * the old format, a damaged one, one of another owner, and any entry in a directory others can
 * write are not used (one warning, the file hashed); new entries and directories are never
 * group/other-writable, even under umask 0. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"
#include "util/file_digest.h"
#include "util/sha256.h"
#include "worker/data.h"

static char tmp[512], cache[600];

/* The name of path's entry, as the cache names it (docs/spec.md, "The data's identity"). */
static void entry_name(const char *path, char *out, size_t cap) {
    struct stat st;
    CHECK_CMP(stat(path, &st), ==, 0);
    snprintf(out, cap, "%llx-%llx-%lld-%lld.%09ld-%lld.%09ld", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
             (long)st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec, (long)st.st_ctim.tv_nsec);
}

static void entry_path(const char *dir, const char *path, char *out, size_t cap) {
    char name[200];
    entry_name(path, name, sizeof name);
    snprintf(out, cap, "%s/%s/%s", dir, FILE_DIGEST_SUBDIR, name);
}

/* The digest of path with what the call says on stderr caught in warn (one string); read: by
 * file_read_digest (else file_digest). */
static int digest_said(const char *path, const char *dir, int read, char hex[65], int *cached,
                       char *warn, size_t cap) {
    char out[700], err[ABL_ERR_MAX] = "";
    snprintf(out, sizeof out, "%s/stderr.txt", tmp);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(saved >= 0 && fd >= 0 && dup2(fd, STDERR_FILENO) >= 0);
    close(fd);
    int rc;
    if (read) {
        unsigned char *buf = NULL;
        long len;
        rc = file_read_digest("data file", path, dir, &buf, &len, hex, cached, err);
        free(buf);
    } else {
        long long size;
        rc = file_digest(path, dir, hex, &size, cached, err);
    }
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    CHECK_MSG(rc == 0, "%s", err);
    char *said = test_read_file(out, NULL);
    snprintf(warn, cap, "%s", said ? said : "");
    free(said);
    if (warn[0]) fprintf(stderr, "    said: %s", warn);
    return rc;
}

/* Exactly one warning line, holding each of a and b (b may be NULL). */
static int one_warning(const char *warn, const char *a, const char *b) {
    const char *nl = strchr(warn, '\n');
    return strstr(warn, "warning") && strstr(warn, a) && (!b || strstr(warn, b)) && nl &&
           nl[1] == '\0';
}

/* A fresh cache directory for one case. */
static void fresh_cache(char *dir, size_t cap, const char *name) {
    snprintf(dir, cap, "%s/cache-%s", tmp, name);
}

/* old: a file still for a while (this source file), whose entry the cache writes; young: a
 * file written just now (hashed at each load, never cached), whose digest is sha */
static const char *old_file(void) {
    return ABLATE_TEST_SOURCE;
}
static void young_file(char *path, size_t cap, char sha[65]) {
    snprintf(path, cap, "%s/young.txt", tmp);
    test_write_text(path, "the young file's bytes\n");
    sha256_buf_hex("the young file's bytes\n", 23, sha);
}

/* Loads the young file with the bad entry `what` in place: its own digest, not cached, one
 * warning naming the entry and what; then no warning and the same digest. */
static void expect_refused(const char *dir, const char *path, const char *sha, const char *what) {
    char entry[1024], hex[65], warn[4096];
    entry_path(dir, path, entry, sizeof entry);
    for (int read = 0; read < 2; read++) {
        int cached = -1;
        digest_said(path, dir, read, hex, &cached, warn, sizeof warn);
        if (read == 0)
            CHECK_MSG(one_warning(warn, entry, what), "expected one warning naming %s and '%s'",
                      entry, what);
        else
            CHECK_MSG(warn[0] == '\0', "the same entry refused twice: %s", warn);
        CHECK_MSG(!strcmp(hex, sha) && cached == 0, "the digest came from the bad entry: %s", hex);
    }
}

/* The entry the cache wrote for the old file, copied (renamed, linked) under the young file's
 * name: a well-formed entry of another file, which must not answer for this one. */
static void plant_old_entry(const char *dir, const char *young, int how) {
    char from[1024], to[1024], hex[65], warn[4096];
    int cached;
    digest_said(old_file(), dir, 0, hex, &cached, warn, sizeof warn);
    entry_path(dir, old_file(), from, sizeof from);
    entry_path(dir, young, to, sizeof to);
    CHECK_MSG(access(from, F_OK) == 0, "the cache wrote no entry for %s", old_file());
    if (how == 0) {
        long n;
        char *text = test_read_file(from, &n);
        CHECK(text && test_write_file(to, text, (size_t)n) == 0);
        free(text);
    } else {
        CHECK_CMP(symlink(from, to), ==, 0);
    }
}

static int count_entries(void) {
    char dir[700];
    snprintf(dir, sizeof dir, "%s/%s", cache, FILE_DIGEST_SUBDIR);
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls %s 2>/dev/null | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1) n = -1;
        pclose(p);
    }
    return n;
}

/* The digest is that of the bytes read; a file changed moments ago is never cached, so a
 * same-size rewrite within one clock tick cannot be answered by a stale entry. */
TEST(read_digest) {
    char path[700], hex[65], want[65], err[ABL_ERR_MAX];
    snprintf(path, sizeof path, "%s/a.txt", tmp);
    test_write_text(path, "hello, world\n");
    unsigned char *buf;
    long len;
    int cached = -1;
    CHECK_CMP(file_read_digest("data file", path, cache, &buf, &len, hex, &cached, err), ==, 0);
    sha256_buf_hex("hello, world\n", 13, want);
    CHECK(len == 13 && !strcmp(hex, want) && cached == 0);
    free(buf);
    CHECK_MSG(count_entries() == 0, "a file written just now was cached");
    test_write_text(path, "world, hello\n"); /* same size, same inode, maybe the same mtime */
    CHECK_CMP(file_read_digest("data file", path, cache, &buf, &len, hex, &cached, err), ==, 0);
    sha256_buf_hex("world, hello\n", 13, want);
    CHECK_MSG(!strcmp(hex, want), "a same-size rewrite kept the old digest");
    free(buf);
    long long size;
    CHECK_CMP(file_digest(path, cache, hex, &size, &cached, err), ==, 0);
    CHECK(!strcmp(hex, want) && size == 13 && cached == 0);
    CHECK(file_digest(path, "", hex, &size, &cached, err) == 0 && !strcmp(hex, want));
    CHECK_CMP(file_digest("/nonexistent/data.txt", cache, hex, &size, &cached, err), ==, -1);
    CHECK_CMP(strstr(err, "/nonexistent/data.txt"), !=, NULL);
}

/* A file that has been still for a while (this source file) is hashed once, then known by
 * its identity on disk: the second check reads nothing but the cache entry. */
TEST(cache_hit) {
    const char *src = ABLATE_TEST_SOURCE;
    struct stat st;
    CHECK_CMP(stat(src, &st), ==, 0);
    char hex[65], hex2[65], want[65], err[ABL_ERR_MAX];
    long long size, wsize;
    int cached = -1;
    CHECK_CMP(sha256_file(src, want, &wsize), ==, 0);
    CHECK_CMP(file_digest(src, cache, hex, &size, &cached, err), ==, 0);
    CHECK(!strcmp(hex, want) && size == wsize && cached == 0);
    CHECK_CMP(file_digest(src, cache, hex2, &size, &cached, err), ==, 0);
    CHECK_MSG(cached == 1, "the digest of %s was not cached", src);
    CHECK_EQ_STR(hex2, want);
    unsigned char *buf;
    long len;
    CHECK_CMP(file_read_digest("data file", src, cache, &buf, &len, hex2, &cached, err), ==, 0);
    CHECK(cached == 1 && !strcmp(hex2, want) && len == wsize);
    free(buf);
}

/* dataset_load's identity: the same characters in another order are other data with the
 * same vocabulary; another character set has another vocabulary too. */
TEST(dataset_identity) {
    char a[700], b[700], c[700], err[ABL_ERR_MAX];
    snprintf(a, sizeof a, "%s/x.txt", tmp);
    snprintf(b, sizeof b, "%s/y.txt", tmp);
    snprintf(c, sizeof c, "%s/z.txt", tmp);
    test_write_text(a, "abcdefgh abcdefgh abcdefgh abcdefgh\n");
    test_write_text(b, "hgfedcba hgfedcba hgfedcba hgfedcba\n");
    test_write_text(c, "abcdxxxx abcdxxxx abcdxxxx abcdxxxx\n");
    DataConfig dc;
    memset(&dc, 0, sizeof dc);
    dc.tokenizer = TOK_CHAR;
    dc.val_fraction = 0.0;
    Dataset da, db, dz;
    snprintf(dc.path, sizeof dc.path, "%s", a);
    CHECK_CMP(dataset_load(&da, &dc, 4, err), ==, 0);
    snprintf(dc.path, sizeof dc.path, "%s", b);
    CHECK_CMP(dataset_load(&db, &dc, 4, err), ==, 0);
    snprintf(dc.path, sizeof dc.path, "%s", c);
    CHECK_CMP(dataset_load(&dz, &dc, 4, err), ==, 0);
    char want[65];
    long long n;
    CHECK_CMP(sha256_file(a, want, &n), ==, 0);
    CHECK(!strcmp(da.identity.sha256, want) && da.identity.bytes == n);
    CHECK(!strcmp(da.identity.tokenizer, "char") && da.identity.vocab_size == 10);
    CHECK_EQ_STR(da.identity.vocab, db.identity.vocab);
    CHECK_CMP(strcmp(da.identity.sha256, db.identity.sha256), !=, 0);
    CHECK(!data_identity_same(&da.identity, &db.identity));
    CHECK_CMP(strcmp(da.identity.vocab, dz.identity.vocab), !=, 0);
    DataIdentity moved = da.identity; /* the same bytes under another path are the same data */
    snprintf(moved.path, sizeof moved.path, "elsewhere.txt");
    CHECK(data_identity_same(&da.identity, &moved));
    moved.val_fraction = 0.1;
    CHECK(!data_identity_same(&da.identity, &moved));
    char line[2048];
    data_identity_describe(&da.identity, line, sizeof line);
    CHECK(strstr(line, a) && strstr(line, "36 bytes") && strstr(line, "char vocabulary of 10"));
    dataset_free(&da);
    dataset_free(&db);
    dataset_free(&dz);
    unlink(a);
    unlink(b);
    unlink(c);
}

/* Corpus B's entry copied over corpus A's: A's own digest, with one warning (the entry names
 * another file); so is the entry of another file reached by a symlink. */
TEST(foreign_entry) {
    char dir[700], young[700], sha[65];
    fresh_cache(dir, sizeof dir, "foreign");
    young_file(young, sizeof young, sha);
    plant_old_entry(dir, young, 0);
    expect_refused(dir, young, sha, "names another file");
    fresh_cache(dir, sizeof dir, "link");
    plant_old_entry(dir, young, 1);
    expect_refused(dir, young, sha, "symbolic link");
}

/* Entries that are not this cache's entry for the file: the bare digest (the old format: a
 * digest with nothing that ties it to a file), a damaged one (a digit of the digest changed) */
TEST(bad_entries) {
    char dir[700], young[700], sha[65], entry[1024], digests[800];
    fresh_cache(dir, sizeof dir, "bad");
    young_file(young, sizeof young, sha);
    snprintf(digests, sizeof digests, "%s/%s", dir, FILE_DIGEST_SUBDIR);
    CHECK(mkdir(dir, 0755) == 0 && mkdir(digests, 0755) == 0);
    entry_path(dir, young, entry, sizeof entry);
    char other[65], text[1024], check[65];
    sha256_buf_hex("corpus B", 8, other);
    snprintf(text, sizeof text, "%s\n", other);
    test_write_text(entry, text);
    expect_refused(dir, young, sha, "old format");
    /* A's entry, well formed, then its digest changed to B's (the check line left as it was) */
    char name[200];
    entry_name(young, name, sizeof name);
    int k = snprintf(text, sizeof text, "%sfile %s\nsha256 %s\n", FILE_DIGEST_TAG, name, sha);
    sha256_buf_hex(text, (size_t)k, check);
    snprintf(text + k, sizeof text - (size_t)k, "check %s\n", check);
    char *digit = strstr(text, sha);
    memcpy(digit, other, 64);
    test_write_text(entry, text);
    expect_refused(dir, young, sha, "damaged");
}

/* An entry that belongs to another user (not root) is not used, whatever it says. */
TEST(other_owner_entry) {
    if (geteuid() != 0) {
        fprintf(stderr, "test_file_digest: not root, cannot give a file away: skipped\n");
        return;
    }
    char dir[700], young[700], sha[65], entry[1024];
    fresh_cache(dir, sizeof dir, "owner");
    young_file(young, sizeof young, sha);
    plant_old_entry(dir, young, 0);
    entry_path(dir, young, entry, sizeof entry);
    CHECK_CMP(chown(entry, 4242, 4242), ==, 0);
    expect_refused(dir, young, sha, "belongs to uid 4242");
}

/* A digests directory (or a cache directory) that others can write, or a symlink in place of
 * digests/: the cache is not used at all, neither read nor written; one warning with advice. */
TEST(untrusted_dir) {
    char dir[700], young[700], sha[65], entry[1024], digests[800], hex[65], warn[4096];
    int cached;
    young_file(young, sizeof young, sha);
    for (int c = 0; c < 3; c++) {
        fresh_cache(dir, sizeof dir, c == 0 ? "gwdigests" : c == 1 ? "gwroot" : "linked");
        snprintf(digests, sizeof digests, "%s/%s", dir, FILE_DIGEST_SUBDIR);
        plant_old_entry(dir, young, 0);
        entry_path(dir, young, entry, sizeof entry);
        const char *bad = c == 2 ? digests : c == 1 ? dir : digests;
        if (c == 0) CHECK_CMP(chmod(digests, 0775), ==, 0);
        if (c == 1) CHECK_CMP(chmod(dir, 0777), ==, 0);
        if (c == 2) { /* digests/ moved away, a symlink to it in its place */
            char moved[900];
            snprintf(moved, sizeof moved, "%s/elsewhere", dir);
            CHECK(rename(digests, moved) == 0 && symlink(moved, digests) == 0);
        }
        for (int read = 0; read < 2; read++) {
            digest_said(young, dir, read, hex, &cached, warn, sizeof warn);
            CHECK_MSG(!strcmp(hex, sha) && cached == 0, "the digest came from the entry: %s", hex);
            if (read == 1) {
                CHECK_MSG(warn[0] == '\0', "the same warning twice in one process: %s", warn);
                continue;
            }
            char advice[1024];
            snprintf(advice, sizeof advice, "chmod go-w %s", bad);
            CHECK_MSG(one_warning(warn, bad, c == 2 ? "symbolic link" : advice) &&
                          strstr(warn, "ABLATE_CACHE_DIR") &&
                          (c == 2 || strstr(warn, "writable by group or others")),
                      "%s", warn);
        }
        /* nor written: the old file's entry removed is not written again */
        char old_entry[1024];
        entry_path(dir, old_file(), old_entry, sizeof old_entry);
        CHECK_CMP(unlink(old_entry), ==, 0);
        digest_said(old_file(), dir, 0, hex, &cached, warn, sizeof warn);
        CHECK_MSG(cached == 0 && access(old_entry, F_OK) != 0, "an untrusted cache was written");
    }
}

/* Under umask 0 the cache creates its directories 0755 and its entries 0644. */
TEST(modes_under_umask_0) {
    char dir[700], digests[800], entry[1024], hex[65], warn[4096];
    int cached;
    fresh_cache(dir, sizeof dir, "umask");
    snprintf(digests, sizeof digests, "%s/%s", dir, FILE_DIGEST_SUBDIR);
    mode_t old = umask(0);
    digest_said(old_file(), dir, 0, hex, &cached, warn, sizeof warn);
    umask(old);
    entry_path(dir, old_file(), entry, sizeof entry);
    struct stat sr, sd, se;
    CHECK(stat(dir, &sr) == 0 && stat(digests, &sd) == 0 && stat(entry, &se) == 0);
    CHECK_MSG((sr.st_mode & 07777) == 0755 && (sd.st_mode & 07777) == 0755,
              "cache directories %04o and %04o", (unsigned)(sr.st_mode & 07777),
              (unsigned)(sd.st_mode & 07777));
    CHECK_MSG((se.st_mode & 07777) == 0644, "entry mode %04o", (unsigned)(se.st_mode & 07777));
    digest_said(old_file(), dir, 1, hex, &cached, warn, sizeof warn);
    CHECK_MSG(cached == 1 && warn[0] == '\0', "the entry written under umask 0 is not used");
}

int main(int argc, char **argv) {
    const char *t = test_tmpdir();
    if (!t) return fprintf(stderr, "test_file_digest: no temporary directory\n"), 1;
    snprintf(tmp, sizeof tmp, "%s", t);
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    setenv("ABLATE_CACHE_DIR", cache, 1);
    return test_main(argc, argv, "test_file_digest");
}
