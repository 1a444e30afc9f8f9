/* nftw is X/Open */
#define _XOPEN_SOURCE 700
#include "test_util.h"

#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int test_failures = 0;

int test_write_corpus(const char *path, long n) {
    static const char *words[] = {"the",  "king", "shall", "not",   "be",   "so",   "my",
                                  "lord", "what", "good",  "night", "to",   "thee", "and",
                                  "love", "is",   "a",     "fair",  "word", "come"};
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    unsigned s = 12345;
    long written = 0;
    while (written < n) {
        s = s * 1103515245u + 12345u;
        const char *w = words[(s >> 16) % 20];
        written += fprintf(f, "%s", w);
        s = s * 1103515245u + 12345u;
        int r = (int)((s >> 16) % 10);
        written += fprintf(f, "%s", r == 0 ? ".\n" : (r == 1 ? ",\n" : " "));
    }
    return fclose(f);
}

const char *test_corpus(const char *tmpdir) {
    const char *env = getenv("ABLATE_TEST_CORPUS");
    if (env && access(env, R_OK) == 0) return env;
    static char path[1024];
    snprintf(path, sizeof path, "%s/corpus.txt", tmpdir);
    if (access(path, R_OK) != 0 && test_write_corpus(path, 200000) != 0) return NULL;
    return path;
}

static char tmpdir_path[256];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* The temporary directory goes when the test passes; a failing test keeps it to look at. */
static void remove_tmpdir(void) {
    if (tmpdir_path[0] && test_failures == 0 && !getenv("ABLATE_TEST_KEEP"))
        nftw(tmpdir_path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *test_tmpdir(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir_path, sizeof tmpdir_path, "%s/ablate-test-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(tmpdir_path)) return NULL;
    atexit(remove_tmpdir);
    return tmpdir_path;
}

int test_finish(const char *name) {
    if (test_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures);
        return 1;
    }
    fprintf(stderr, "%s: all checks passed\n", name);
    return 0;
}
