/* join_build_view's decisions at the end of a joined sweep: a process that has
 * ended the sweep leaves the last view to the processes still running (their journal
 * locked); a periodic view is not built while another process builds one; and a holder of
 * join/view.lock that is stopped does not keep a process at its end waiting.
 * The journals here hold no record: a build writes an OUT.h5 of nothing in place of the text
 * the test left there, so every case shows whether join_build_view built. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/schedule/join.h"
#include "test_util.h"
#include "util/log.h"

typedef struct {
    char out[512], procs[512], mine[600], other[600], lock[600];
} Sweep;

/* out.h5 ("old"), its join directory with two processes' "journals" */
static void make_sweep(Sweep *s, const char *name) {
    char dir[512];
    test_path(dir, sizeof dir, name);
    CHECK(mkdir(dir, 0777) == 0);
    snprintf(s->out, sizeof s->out, "%s/out.h5", dir);
    test_write_text(s->out, "old");
    snprintf(s->procs, sizeof s->procs, "%s/out.h5.d", dir);
    CHECK(mkdir(s->procs, 0777) == 0);
    snprintf(s->procs, sizeof s->procs, "%s/out.h5.d/join", dir);
    CHECK(mkdir(s->procs, 0777) == 0);
    snprintf(s->lock, sizeof s->lock, "%s/view.lock", s->procs);
    snprintf(s->procs, sizeof s->procs, "%s/out.h5.d/join/procs", dir);
    CHECK(mkdir(s->procs, 0777) == 0);
    const char *names[] = {"a", "b"};
    char *paths[] = {s->mine, s->other};
    for (int k = 0; k < 2; k++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", s->procs, names[k]);
        CHECK(mkdir(p, 0777) == 0);
        snprintf(paths[k], sizeof s->mine, "%s/journal", p);
        test_write_text(paths[k], "not a journal");
    }
}

static int lock_file(const char *path) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0);
    return fd;
}

static int out_is(const Sweep *s, const char *text) {
    char *got = test_read_file(s->out, NULL);
    int same = got && !strcmp(got, text);
    free(got);
    return same;
}

TEST(last_view_left_to_running) {
    Sweep s;
    make_sweep(&s, "last");
    char err[ABL_ERR_MAX] = "";
    /* b still appends its journal (locked): a, ended, leaves the view to it */
    int b = lock_file(s.other);
    CHECK_MSG(join_build_view(s.out, s.mine, 13, 1, NULL, err) == 0, "%s", err);
    CHECK(out_is(&s, "old"));
    /* a periodic view of a running process is built whoever else runs */
    CHECK_MSG(join_build_view(s.out, s.mine, 13, 0, NULL, err) == 0, "%s", err);
    CHECK(!out_is(&s, "old"));
    test_write_text(s.out, "old");
    close(b);
    /* b has ended too: a's last view is built */
    CHECK_MSG(join_build_view(s.out, s.mine, 13, 1, NULL, err) == 0, "%s", err);
    CHECK(!out_is(&s, "old"));
}

/* Another process building holds view.lock: a periodic view is not built meanwhile (that
 * build stands), with no wait; once the lock is free it builds. */
TEST(periodic_view_not_behind_another) {
    Sweep s;
    make_sweep(&s, "periodic");
    char err[ABL_ERR_MAX] = "";
    join_set_view_lock_wait(600); /* a wait would show as a hang, not pass */
    int lock = lock_file(s.lock);
    CHECK_MSG(join_build_view(s.out, s.mine, 13, 0, NULL, err) == 0, "%s", err);
    CHECK(out_is(&s, "old"));
    close(lock);
    CHECK_MSG(join_build_view(s.out, s.mine, 13, 0, NULL, err) == 0, "%s", err);
    CHECK(!out_is(&s, "old"));
    join_set_view_lock_wait(0);
}

/* A process stopped while it holds view.lock (SIGSTOP in a build): a process at its end
 * waits a while for the lock, then goes on without it: it leaves the view to the stopped
 * one (its journal locked, still running), or builds it when none runs. Before, it waited
 * for the lock for as long as the other stayed stopped. */
TEST(last_view_past_a_stopped_holder) {
    Sweep s;
    make_sweep(&s, "stopped");
    char err[ABL_ERR_MAX] = "";
    join_set_view_lock_wait(0.05);
    int lock = lock_file(s.lock), b = lock_file(s.other);
    CHECK_MSG(join_build_view(s.out, s.mine, 13, 1, NULL, err) == 0, "%s", err);
    CHECK(out_is(&s, "old"));
    close(b);
    CHECK_MSG(join_build_view(s.out, s.mine, 13, 1, NULL, err) == 0, "%s", err);
    CHECK(!out_is(&s, "old"));
    close(lock);
    join_set_view_lock_wait(0);
}

int main(int argc, char **argv) {
    if (!test_tmpdir()) return 2;
    return test_main(argc, argv, "test_join_view");
}
