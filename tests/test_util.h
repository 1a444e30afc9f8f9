/* Minimal assertion helpers for the C tests: a failed check prints file:line and the
 * expression, and the test exits non-zero at the end. */
#ifndef ABLATE_TEST_UTIL_H
#define ABLATE_TEST_UTIL_H

#include <stdio.h>

extern int test_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            test_failures++;                                                                       \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            test_failures++;                                                                       \
        }                                                                                          \
    } while (0)

/* Writes a deterministic English-like corpus of n bytes to path (for tests that must run
 * without Tiny Shakespeare). Returns 0 on success. */
int test_write_corpus(const char *path, long n);
/* The test corpus: $ABLATE_TEST_CORPUS if readable, else a generated file under tmpdir. */
const char *test_corpus(const char *tmpdir);
/* A fresh temporary directory (mkdtemp). */
const char *test_tmpdir(void);

int test_finish(const char *name);

#endif
