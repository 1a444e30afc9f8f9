/* tests/test_util.h's checks themselves: a failed comparison prints both values, a failed
 * string check both strings (quoted, escaped), and each counts one failure. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs fn with stderr going to a file; returns what it wrote (malloc'd) and takes back the
 * failures it counted into *failed, so that the checks checked here do not fail the case. */
static char *stderr_of(void (*fn)(void), int *failed) {
    char path[512];
    test_path(path, sizeof path, "stderr.txt");
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w");
    if (saved < 0 || !f) return NULL;
    dup2(fileno(f), 2);
    int before = test_failures;
    fn();
    fflush(stderr);
    *failed = test_failures - before;
    test_failures = before;
    dup2(saved, 2);
    close(saved);
    fclose(f);
    return test_read_file(path, NULL);
}

static void failing_cmp(void) {
    size_t n = 2;
    double x = 0.1 + 0.2;
    CHECK_CMP(n, ==, 3);
    CHECK_CMP(-1, <, (int)n - 5);
    CHECK_CMP(x, ==, 0.3);
    CHECK_CMP(n, ==, 2); /* passes: prints nothing */
}

static void failing_str(void) {
    const char *s = "ab\x1b[2J\"";
    CHECK_EQ_STR(s, "ab");
    CHECK_EQ_STR(NULL, "x");
    CHECK_EQ_STR(s, s); /* passes */
}

TEST(cmp_prints_both_values) {
    int failed = 0;
    char *text = stderr_of(failing_cmp, &failed);
    CHECK(text != NULL);
    CHECK_CMP(failed, ==, 3);
    if (!text) return;
    CHECK_MSG(strstr(text, "CHECK failed: n == 3 (left 2, right 3)\n"), "%s", text);
    CHECK_MSG(strstr(text, "CHECK failed: -1 < (int)n - 5 (left -1, right -3)\n"), "%s", text);
    CHECK_MSG(strstr(text, "(left 0.30000000000000004, right 0.29999999999999999)\n"), "%s", text);
    CHECK_MSG(strstr(text, "[cmp_prints_both_values]"), "%s", text);
    free(text);
}

TEST(str_prints_both_strings) {
    int failed = 0;
    char *text = stderr_of(failing_str, &failed);
    CHECK(text != NULL);
    CHECK_CMP(failed, ==, 2);
    if (!text) return;
    CHECK_MSG(strstr(text, "CHECK failed: s == \"ab\" (left \"ab\\x1b[2J\\\"\", right \"ab\")\n"),
              "%s", text);
    CHECK_MSG(strstr(text, "(left NULL, right \"x\")\n"), "%s", text);
    free(text);
}

int main(int argc, char **argv) {
    if (!test_tmpdir()) return 1;
    return test_main(argc, argv, "test_check");
}
