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

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_log");
}
