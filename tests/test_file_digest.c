/* The data's identity (issue 17): the digest of the bytes read and its cache keyed by the
 * file's identity on disk (util/file_digest.h), and what dataset_load records
 * (worker/data_identity.h). */
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
    CHECK(file_read_digest("data file", path, cache, &buf, &len, hex, &cached, err) == 0);
    sha256_buf_hex("hello, world\n", 13, want);
    CHECK(len == 13 && !strcmp(hex, want) && cached == 0);
    free(buf);
    CHECK_MSG(count_entries() == 0, "a file written just now was cached");
    test_write_text(path, "world, hello\n"); /* same size, same inode, maybe the same mtime */
    CHECK(file_read_digest("data file", path, cache, &buf, &len, hex, &cached, err) == 0);
    sha256_buf_hex("world, hello\n", 13, want);
    CHECK_MSG(!strcmp(hex, want), "a same-size rewrite kept the old digest");
    free(buf);
    long long size;
    CHECK(file_digest(path, cache, hex, &size, &cached, err) == 0);
    CHECK(!strcmp(hex, want) && size == 13 && cached == 0);
    CHECK(file_digest(path, "", hex, &size, &cached, err) == 0 && !strcmp(hex, want));
    CHECK(file_digest("/nonexistent/data.txt", cache, hex, &size, &cached, err) == -1);
    CHECK(strstr(err, "/nonexistent/data.txt") != NULL);
}

/* A file that has been still for a while (this source file) is hashed once, then known by
 * its identity on disk: the second check reads nothing but the cache entry. */
TEST(cache_hit) {
    const char *src = ABLATE_TEST_SOURCE;
    struct stat st;
    CHECK(stat(src, &st) == 0);
    char hex[65], hex2[65], want[65], err[ABL_ERR_MAX];
    long long size, wsize;
    int cached = -1;
    CHECK(sha256_file(src, want, &wsize) == 0);
    CHECK(file_digest(src, cache, hex, &size, &cached, err) == 0);
    CHECK(!strcmp(hex, want) && size == wsize && cached == 0);
    CHECK(file_digest(src, cache, hex2, &size, &cached, err) == 0);
    CHECK_MSG(cached == 1, "the digest of %s was not cached", src);
    CHECK(!strcmp(hex2, want));
    unsigned char *buf;
    long len;
    CHECK(file_read_digest("data file", src, cache, &buf, &len, hex2, &cached, err) == 0);
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
    CHECK(dataset_load(&da, &dc, 4, err) == 0);
    snprintf(dc.path, sizeof dc.path, "%s", b);
    CHECK(dataset_load(&db, &dc, 4, err) == 0);
    snprintf(dc.path, sizeof dc.path, "%s", c);
    CHECK(dataset_load(&dz, &dc, 4, err) == 0);
    char want[65];
    long long n;
    CHECK(sha256_file(a, want, &n) == 0);
    CHECK(!strcmp(da.identity.sha256, want) && da.identity.bytes == n);
    CHECK(!strcmp(da.identity.tokenizer, "char") && da.identity.vocab_size == 10);
    CHECK(!strcmp(da.identity.vocab, db.identity.vocab));
    CHECK(strcmp(da.identity.sha256, db.identity.sha256) != 0);
    CHECK(!data_identity_same(&da.identity, &db.identity));
    CHECK(strcmp(da.identity.vocab, dz.identity.vocab) != 0);
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

int main(int argc, char **argv) {
    const char *t = test_tmpdir();
    if (!t) return fprintf(stderr, "test_file_digest: no temporary directory\n"), 1;
    snprintf(tmp, sizeof tmp, "%s", t);
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    setenv("ABLATE_CACHE_DIR", cache, 1);
    return test_main(argc, argv, "test_file_digest");
}
