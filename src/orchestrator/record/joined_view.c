/* The view of a joined sweep (schedule/join.h), the record's side of it: which journals it
 * has (OUT.h5.d/join/procs/NAME/journal), and its builds one process at a time under
 * join/view.lock, the last process to end building the last one. */
#include "joined_view.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/backoff.h"
#include "util/clock.h"
#include "util/grow.h"
#include "util/log.h"
#include "journal.h"
#include "view_check.h"

int join_exists(const char *out_path) {
    char base[ABL_PATH_MAX], dir[ABL_PATH_MAX + 8];
    if (journal_dir_for(out_path, base, sizeof base) != 0) return 0;
    snprintf(dir, sizeof dir, "%s/join", base);
    struct stat st;
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int join_list_journals(const char *out_path, char ***paths, int *n, char err[ABL_ERR_MAX]) {
    char base[ABL_PATH_MAX], dir[ABL_PATH_MAX + 16];
    *paths = NULL;
    *n = 0;
    if (journal_dir_for(out_path, base, sizeof base) != 0) {
        snprintf(err, ABL_ERR_MAX, "%s: path too long", out_path);
        return -1;
    }
    snprintf(dir, sizeof dir, "%s/join/procs", base);
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, ABL_ERR_MAX, "cannot read %s: %s", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    char **v = NULL;
    int cnt = 0, rc = 0;
    size_t cap = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[ABL_PATH_MAX + 300];
        snprintf(p, sizeof p, "%s/%s/journal", dir, e->d_name);
        if (access(p, R_OK) != 0) continue; /* a process that died before its journal */
        if (GROW(v, cap, (size_t)cnt + 1) != 0) {
            rc = -1;
            break;
        }
        if (!(v[cnt] = strdup(p))) {
            rc = -1;
            break;
        }
        cnt++;
    }
    closedir(d);
    if (rc != 0) {
        join_free_list(v, cnt);
        snprintf(err, ABL_ERR_MAX, "out of memory");
        return -1;
    }
    qsort(v, (size_t)cnt, sizeof *v, cmp_str);
    *paths = v;
    *n = cnt;
    return 0;
}

void join_free_list(char **paths, int n) {
    for (int i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}

/* Seconds a build waits for join/view.lock before it goes on without it (tests shorten it). */
static double view_lock_wait = JOIN_VIEW_LOCK_WAIT;

void join_set_view_lock_wait(double seconds) {
    view_lock_wait = seconds > 0 ? seconds : JOIN_VIEW_LOCK_WAIT;
}

/* join/view.lock, held (flock) until the returned descriptor is closed; -1 when it cannot
 * be opened. Waits at most `wait` seconds (0: one try): a process stopped or hung in a build
 * keeps the lock for as long, and a process at its end must not wait on it forever
 * (e2e_join's hung case). *busy: another process still held it; the descriptor is then
 * returned unlocked, as where the file system has no flock. */
int join_view_lock(const char *out_path, double wait, int *busy) {
    char base[ABL_PATH_MAX], lock[ABL_PATH_MAX + 32];
    if (wait < 0) wait = view_lock_wait;
    journal_dir_for(out_path, base, sizeof base);
    snprintf(lock, sizeof lock, "%s/join/view.lock", base);
    int fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    *busy = 0;
    Backoff b = BACKOFF_INIT(1000000, 100000000);
    double end = clock_seconds() + wait;
    while (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) break; /* no flock here: unlocked */
        if (clock_seconds() >= end) {
            *busy = 1;
            break;
        }
        backoff_sleep(&b, (long)((end - clock_seconds()) * 1e9) + 1);
    }
    return fd;
}

/* Processes whose journal is still locked (journal.h: held while a process appends), so
 * they will end later and build the last view themselves. Where the file system has no
 * flock none is counted: every process builds, as before. */
static int others_running(char **paths, int n, int own) {
    int running = 0;
    for (int k = 0; k < n; k++)
        running += k != own && journal_lock_held(paths[k]) == 1;
    return running;
}

int join_build_view(const char *out_path, const char *own, uint64_t limit, int last,
                    H5ViewStats *st, char err[ABL_ERR_MAX]) {
    char **paths, base[ABL_PATH_MAX];
    int n, limited = -1;
    /* one build at a time: at the end every process may build, and they would only thrash;
     * the journals are listed under the lock, as join_forget removes one under it. A
     * periodic view does not wait for another process's build (16 processes near the end
     * each built all 10^4 runs in turn, ~0.75 s each, waiting for one another's); the others
     * wait a while, then go on without the lock (its holder may be stopped) */
    int periodic = own && !last, busy;
    int fd = join_view_lock(out_path, periodic ? 0 : view_lock_wait, &busy);
    if (periodic && busy) {
        if (st) memset(st, 0, sizeof *st);
        close(fd);
        return 0;
    }
    if (busy)
        log_info("%s: join/view.lock held by another process for %g s (stopped?); going on "
                 "without it",
                 out_path, view_lock_wait);
    if (join_list_journals(out_path, &paths, &n, err) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    if (n == 0) {
        snprintf(err, ABL_ERR_MAX, "%s: no journal in its join directory", out_path);
        join_free_list(paths, n);
        if (fd >= 0) close(fd);
        return -1;
    }
    for (int k = 0; own && k < n; k++)
        if (!strcmp(paths[k], own)) limited = k;
    journal_dir_for(out_path, base, sizeof base);
    /* At the end only the last process to end builds (last: the others' journals are
     * unlocked); two ending together may both find none running, and the second then finds
     * a view of the complete sweep over every journal byte, the same file (every process
     * building in turn gave 16 processes ending together a 16.7 s tail). `ablate view` (own
     * NULL) always builds. */
    unsigned long long bytes = 0;
    for (int k = 0; own && k < n; k++) {
        struct stat sb;
        unsigned long long size = stat(paths[k], &sb) == 0 ? (unsigned long long)sb.st_size : 0;
        bytes += k == limited && limit < size ? limit : size;
    }
    int rc = 0, running = last && own ? others_running(paths, n, limited) : 0;
    if (running || (own && view_complete_over(out_path, bytes, n))) {
        if (st) memset(st, 0, sizeof *st);
        if (running)
            log_info("%s: its last view is left to the %d joined process%s still running "
                     "(`ablate view %s` builds it now)",
                     out_path, running, running == 1 ? "" : "es", out_path);
        else
            log_info("%s already shows the complete sweep (every process's journal): "
                     "not rebuilt",
                     out_path);
    } else {
        rc = h5view_build_many((const char *const *)paths, n, limited, limit, base, out_path, st,
                               err);
    }
    if (fd >= 0) close(fd);
    join_free_list(paths, n);
    return rc;
}
