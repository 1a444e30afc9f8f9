/* join_build_view's decisions at the two ends of a joined sweep's views (issue 18): a process
 * that has ended the sweep leaves the last view to the processes still running (their journal
 * locked), and a periodic view that waited for another process's build is not built again.
 * The journals here hold no record: a build writes an OUT.h5 of nothing in place of the text
 * the test left there, so every case shows whether join_build_view built. The test
 * waits for states (a lock held, a request blocked in /proc/locks), never for a time. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
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

typedef struct {
    const Sweep *s;
    int rc;
    char err[ABL_ERR_MAX];
} Call;

static void *periodic(void *arg) {
    Call *c = arg;
    c->rc = join_build_view(c->s->out, c->s->mine, 13, 0, NULL, c->err);
    return NULL;
}

/* Is a lock request blocked on the file fd is open on? /proc/locks marks one with "->". */
static int blocked_on(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return 0;
    char want[64], line[256];
    snprintf(want, sizeof want, ":%lu ", (unsigned long)st.st_ino);
    FILE *f = fopen("/proc/locks", "r");
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, "->") && strstr(line, want);
    if (f) fclose(f);
    return found;
}

/* A periodic build blocked behind another's view.lock; touched: OUT.h5 written meanwhile. */
static int periodic_behind_another(const Sweep *s, int touched) {
    int lock = lock_file(s->lock);
    Call c = {.s = s, .rc = 99};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, periodic, &c) == 0);
    struct timespec tick = {0, 1000000};
    for (long i = 0; i < 600000 && !blocked_on(lock); i++) /* a state; 10 min only if broken */
        nanosleep(&tick, NULL);
    CHECK(blocked_on(lock));
    if (touched) {
        test_write_text(s->out, "new");
        struct stat st;
        CHECK(stat(s->out, &st) == 0);
        struct timespec times[2] = {st.st_atim, st.st_mtim};
        times[1].tv_sec += 1; /* another mtime even where the file system's clock is coarse */
        CHECK(utimensat(AT_FDCWD, s->out, times, 0) == 0);
    }
    close(lock);
    pthread_join(t, NULL);
    if (c.rc != 0) fprintf(stderr, "join_build_view: %s\n", c.err);
    return c.rc;
}

TEST(periodic_view_after_another_dropped) {
    Sweep s;
    make_sweep(&s, "periodic");
    CHECK(periodic_behind_another(&s, 1) == 0);
    CHECK(out_is(&s, "new"));
    /* nobody built while it waited: it builds */
    CHECK(periodic_behind_another(&s, 0) == 0);
    CHECK(!out_is(&s, "new"));
}

int main(int argc, char **argv) {
    if (!test_tmpdir()) return 2;
    return test_main(argc, argv, "test_join_view");
}
