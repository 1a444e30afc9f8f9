/* The one stderr writer (util/log.h): each call is one whole line with its prefix, and a
 * status line (the sweep's progress on a terminal) is never overwritten mid-line: the next
 * message starts on a line of its own, and the next status rewrites it in place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"
#include "util/log.h"

/* What the calls in fn wrote to stderr. */
static char *capture(void (*fn)(void)) {
    static char got[8192];
    FILE *tmp = tmpfile();
    CHECK(tmp != NULL);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    CHECK(dup2(fileno(tmp), STDERR_FILENO) >= 0);
    fn();
    CHECK(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    rewind(tmp);
    size_t n = fread(got, 1, sizeof got - 1, tmp);
    got[n] = 0;
    fclose(tmp);
    return got;
}

static void prefixes(void) {
    log_set_command("run");
    log_cmd("bad %s", "spec");
    log_warn("w");
    log_info("i");
    log_line("plain");
    log_set_command(NULL);
    log_cmd("x");
}

TEST(prefixes) {
    CHECK(strcmp(capture(prefixes),
                 "ablate run: bad spec\nablate: warning: w\nablate: i\nplain\nablate: x\n") == 0);
}

static void status_then_lines(void) {
    log_status("[1/4 done]");
    log_status("[2/4 done]");
    log_info("SIGUSR1: checkpointing 1 run(s) in progress");
    log_info("stopped");
    log_status("[3/4 done]");
    log_warn("w");
}

TEST(status_line_broken_once) {
    CHECK(strcmp(capture(status_then_lines),
                 "\r\033[K[1/4 done]\r\033[K[2/4 done]\nablate: SIGUSR1: checkpointing 1 run(s) "
                 "in progress\nablate: stopped\n\r\033[K[3/4 done]\nablate: warning: w\n") == 0);
}

static void long_line(void) {
    char big[6000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    log_info("%s", big);
}

TEST(long_line_cut_visibly) {
    const char *got = capture(long_line);
    size_t n = strlen(got);
    CHECK(n < 4096 + 16 && got[n - 1] == '\n' && !strncmp(got + n - 4, "...", 3));
    CHECK(strchr(got, '\n') == got + n - 1); /* still one line */
}

static void hostile(void) {
    log_status("[1/2] a\033]0;title\007b");
    log_info("run %s: %s", "x\033[2Jy",
             "caf\xc3\xa9 \xc2\x9b"
             "31m \x9b \x7f");
    log_warn("two\nlines\ttab\r");
}

/* A message quotes run names, grid values, paths and samples: terminal controls in them are
 * shown as text on every line (a title change, a screen clear, an 8-bit CSI as U+009B or as
 * a lone byte, DEL), UTF-8 passes, newline and tab stay; the status line's own "\r\033[K"
 * is not the message's. */
TEST(controls_shown_as_text) {
    const char *got = capture(hostile);
    const char *want = "\r\033[K[1/2] a\\u001b]0;title\\u0007b\n"
                       "ablate: run x\\u001b[2Jy: caf\xc3\xa9 \\u009b"
                       "31m \\x9b \\u007f\n"
                       "ablate: warning: two\nlines\ttab\\u000d\n";
    CHECK_MSG(strcmp(got, want) == 0, "got:\n%s", got);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_log");
}
