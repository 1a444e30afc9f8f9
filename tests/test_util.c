/* nftw is X/Open */
#define _XOPEN_SOURCE 700
#include "test_util.h"

#include "util/file_io.h"

#include <dirent.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int test_failures = 0;
const char *test_current = "-";

#define TEST_MAX_CASES 64
static struct {
    const char *name;
    void (*fn)(void);
    int line;
} cases[TEST_MAX_CASES];
static int n_cases;

void test_register(const char *name, void (*fn)(void), int line) {
    if (n_cases == TEST_MAX_CASES) {
        fprintf(stderr, "test_util: more than %d cases in one program: raise TEST_MAX_CASES\n",
                TEST_MAX_CASES);
        exit(2);
    }
    cases[n_cases].name = name;
    cases[n_cases].fn = fn;
    cases[n_cases].line = line;
    n_cases++;
}

void test_fmt_int(char *buf, size_t cap, long long v) {
    snprintf(buf, cap, "%lld", v);
}

void test_fmt_uint(char *buf, size_t cap, unsigned long long v) {
    snprintf(buf, cap, "%llu", v);
}

/* 17 digits: two doubles that differ print differently. */
void test_fmt_dbl(char *buf, size_t cap, long double v) {
    snprintf(buf, cap, "%.17Lg", v);
}

void test_fmt_ptr(char *buf, size_t cap, const volatile void *v) {
    snprintf(buf, cap, "%p", (void *)(uintptr_t)v);
}

void test_fail_cmp(const char *file, int line, const char *expr, const char *a, const char *b) {
    fprintf(stderr, "%s:%d: [%s] CHECK failed: %s (left %s, right %s)\n", file, line, test_current,
            expr, a, b);
    test_failures++;
}

/* s quoted, bytes outside printable ASCII as \xHH, cut at 200 bytes (a failure line stays
 * one line). */
static void print_quoted(const char *s) {
    if (!s) {
        fputs("NULL", stderr);
        return;
    }
    fputc('"', stderr);
    size_t i = 0;
    for (; s[i] && i < 200; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(stderr, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(stderr, "\\x%02x", c);
        else
            fputc(c, stderr);
    }
    fputs(s[i] ? "\"..." : "\"", stderr);
}

void test_check_eq_str(const char *file, int line, const char *expr, const char *a, const char *b) {
    if (a == b || (a && b && !strcmp(a, b))) return;
    fprintf(stderr, "%s:%d: [%s] CHECK failed: %s (left ", file, line, test_current, expr);
    print_quoted(a);
    fputs(", right ", stderr);
    print_quoted(b);
    fputs(")\n", stderr);
    test_failures++;
}

/* Constructors run in no promised order: the file's order is the line order. */
static int by_line(const void *a, const void *b) {
    return ((const int *)a)[0] - ((const int *)b)[0];
}

int test_main(int argc, char **argv, const char *program) {
    int order[TEST_MAX_CASES][2]; /* line, index */
    for (int i = 0; i < n_cases; i++)
        order[i][0] = cases[i].line, order[i][1] = i;
    qsort(order, (size_t)n_cases, sizeof order[0], by_line);
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < n_cases; i++)
            printf("%s\n", cases[order[i][1]].name);
        return 0;
    }
    for (int a = 1; a < argc; a++) {
        int found = 0;
        for (int i = 0; i < n_cases; i++)
            found |= !strcmp(cases[i].name, argv[a]);
        if (!found) {
            fprintf(stderr, "%s: no case '%s' (--list names them)\n", program, argv[a]);
            return 2;
        }
    }
    for (int i = 0; i < n_cases; i++) {
        int c = order[i][1], wanted = argc == 1;
        for (int a = 1; a < argc; a++)
            wanted |= !strcmp(cases[c].name, argv[a]);
        if (!wanted) continue;
        int before = test_failures;
        test_current = cases[c].name;
        cases[c].fn();
        test_current = "-";
        fprintf(stderr, "%s: %s: %s\n", program, cases[c].name,
                test_failures == before ? "ok" : "FAILED");
    }
    return test_finish(program);
}

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

const char *test_with_data(const char *text, const char *data) {
    static char out[65536];
    size_t o = 0, dn = strlen(data);
    for (const char *p = text; *p;) {
        int at = !strncmp(p, "@DATA@", 6);
        size_t n = at ? dn : 1;
        if (o + n + 1 > sizeof out) return NULL;
        memcpy(out + o, at ? data : p, n);
        o += n;
        p += at ? 6 : 1;
    }
    out[o] = '\0';
    return out;
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

void test_path(char *path, size_t cap, const char *name) {
    snprintf(path, cap, "%s/%s", tmpdir_path, name);
}

int test_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = n == 0 || fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

void test_write_text(const char *path, const char *text) {
    CHECK_MSG(test_write_file(path, text, strlen(text)) == 0, "cannot write %s", path);
}

char *test_read_file(const char *path, long *n) {
    unsigned char *bytes;
    long len;
    char err[ABL_ERR_MAX];
    if (file_read_all("test file", path, &bytes, &len, err) != 0) return NULL;
    char *text = realloc(bytes, (size_t)len + 1); /* room for the NUL */
    if (!text) {
        free(bytes);
        return NULL;
    }
    text[len] = 0;
    if (n) *n = len;
    return text;
}

long test_file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

int test_dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

uint64_t test_splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int test_tmpdir_corpus(const char *program, const char **dir, const char **corpus) {
    *dir = test_tmpdir();
    *corpus = *dir ? test_corpus(*dir) : NULL;
    if (*corpus) return 0;
    fprintf(stderr, "%s: no temporary directory or corpus\n", program);
    return -1;
}

int test_finish(const char *name) {
    if (test_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures);
        return 1;
    }
    fprintf(stderr, "%s: all checks passed\n", name);
    return 0;
}
