/* The C tests: a test program is a list of named cases, run all at once or one by name.
 *
 *     TEST(codec) { CHECK(decode(encode(x)) == x); }
 *     int main(int argc, char **argv) { return test_main(argc, argv, "test_journal"); }
 *
 * `test_journal` runs every case in the order of the file, `test_journal codec` one,
 * `test_journal --list` names them; CMake registers each case as the CTest test
 * `test_journal.codec`, so `ctest -R test_journal.codec` runs it alone. A failed check
 * prints file:line, the case and the expression, and the program exits non-zero at the
 * end; a failed comparison (CHECK_CMP, CHECK_EQ_STR) prints both values too. (libuv's
 * TEST_IMPL, with the list built by registration instead of by hand.) */
#ifndef ABLATE_TEST_UTIL_H
#define ABLATE_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int test_failures;
extern const char *test_current; /* the case running, "-" outside one */

void test_register(const char *name, void (*fn)(void), int line);
#define TEST(name)                                                                                 \
    static void test_case_##name(void);                                                            \
    __attribute__((constructor)) static void test_register_##name(void) {                          \
        test_register(#name, test_case_##name, __LINE__);                                          \
    }                                                                                              \
    static void test_case_##name(void)

/* Runs the cases named in argv (all when none; --list prints their names) and reports as
 * test_finish does: 0 when every check passed, 1 otherwise, 2 for an unknown case. */
int test_main(int argc, char **argv, const char *program);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: [%s] CHECK failed: %s\n", __FILE__, __LINE__, test_current,    \
                    #cond);                                                                        \
            test_failures++;                                                                       \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: [%s] CHECK failed: %s: ", __FILE__, __LINE__, test_current,    \
                    #cond);                                                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            test_failures++;                                                                       \
        }                                                                                          \
    } while (0)

/* CHECK_CMP(a, op, b) is CHECK((a) op (b)) that also prints both values when it fails:
 *
 *     tests/test_journal.c:40: [codec] CHECK failed: n == 3 (left 2, right 3)
 *
 * a and b are evaluated once each, as in the CHECK, and compared as they are: the same
 * types, converted the same way (the sign-compare warning is off for the comparison because
 * a literal such as the 3 above is a variable of its type here, which would warn where the
 * literal does not). They must be numbers, enums or pointers (a pointer prints as its
 * address: strings go to CHECK_EQ_STR). */
/* clang-format off */
#define CHECK_CMP(a, op, b)                                                                        \
    do {                                                                                           \
        __typeof__(0 ? (a) : (a)) test_a_ = (a);                                                   \
        __typeof__(0 ? (b) : (b)) test_b_ = (b);                                                   \
        _Pragma("GCC diagnostic push")                                                             \
        _Pragma("GCC diagnostic ignored \"-Wsign-compare\"")                                       \
        int test_ok_ = test_a_ op test_b_;                                                        \
        _Pragma("GCC diagnostic pop")                                                              \
        if (!test_ok_) {                                                                           \
            char test_sa_[64], test_sb_[64];                                                       \
            TEST_FMT(test_sa_, test_a_);                                                           \
            TEST_FMT(test_sb_, test_b_);                                                           \
            test_fail_cmp(__FILE__, __LINE__, #a " " #op " " #b, test_sa_, test_sb_);              \
        }                                                                                          \
    } while (0)

/* The value's text, by its type (CHECK_CMP). */
#define TEST_FMT(buf, v)                                                                           \
    _Generic((v),                                                                                  \
        float: test_fmt_dbl, double: test_fmt_dbl, long double: test_fmt_dbl,                      \
        _Bool: test_fmt_int, char: test_fmt_int, signed char: test_fmt_int, short: test_fmt_int,   \
        int: test_fmt_int, long: test_fmt_int, long long: test_fmt_int,                            \
        unsigned char: test_fmt_uint, unsigned short: test_fmt_uint, unsigned: test_fmt_uint,      \
        unsigned long: test_fmt_uint, unsigned long long: test_fmt_uint,                           \
        default: test_fmt_ptr)(buf, sizeof(buf), v)
/* clang-format on */

/* Two strings equal (NULL equals only NULL); on failure prints both, quoted, escaped and cut
 * at 200 bytes. */
#define CHECK_EQ_STR(a, b) test_check_eq_str(__FILE__, __LINE__, #a " == " #b, (a), (b))

void test_fmt_int(char *buf, size_t cap, long long v);
void test_fmt_uint(char *buf, size_t cap, unsigned long long v);
void test_fmt_dbl(char *buf, size_t cap, long double v);
void test_fmt_ptr(char *buf, size_t cap, const volatile void *v);
/* Counts and reports a failed CHECK_CMP. */
void test_fail_cmp(const char *file, int line, const char *expr, const char *a, const char *b);
/* CHECK_EQ_STR's check. */
void test_check_eq_str(const char *file, int line, const char *expr, const char *a, const char *b);

/* Writes a deterministic English-like corpus of n bytes to path (for tests that must run
 * without Tiny Shakespeare). Returns 0 on success. */
int test_write_corpus(const char *path, long n);
/* The test corpus: $ABLATE_TEST_CORPUS if readable, else a generated file under tmpdir. */
const char *test_corpus(const char *tmpdir);
/* A fresh temporary directory (mkdtemp). */
const char *test_tmpdir(void);
/* For programs whose cases train: test_tmpdir() and test_corpus() in it, into *dir and
 * *corpus; -1 with a message naming the program when either cannot be had. */
int test_tmpdir_corpus(const char *program, const char **dir, const char **corpus);

/* text with every "@DATA@" replaced by data (a corpus path), in a buffer of its own (valid
 * until the next call); NULL when the result would not fit in 64 KiB. */
const char *test_with_data(const char *text, const char *data);

/* path = the last test_tmpdir() / name. */
void test_path(char *path, size_t cap, const char *name);

/* Files the tests write and read back: the whole file or nothing. test_write_file returns 0,
 * or -1 when the file could not be written whole; test_write_text also counts that as a
 * failed check in the running case. test_read_file returns the bytes, NUL-terminated (so a
 * text file is a string), malloc'd, with their count in *n (n may be NULL); NULL when the
 * file cannot be read. test_file_size is -1 for a file that is not there. */
int test_write_file(const char *path, const void *data, size_t n);
void test_write_text(const char *path, const char *text);
char *test_read_file(const char *path, long *n);
long test_file_size(const char *path);
/* Entries of a directory whose names do not start with '.'; 0 when it cannot be read. */
int test_dir_entries(const char *dir);

/* SplitMix64: the tests' fixed pseudo-random source (token ids, batches). */
uint64_t test_splitmix64(uint64_t *state);

int test_finish(const char *name);

#endif
