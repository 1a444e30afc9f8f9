#include "util/log.h"
#include "util/test_hooks.h"
#include "view_updater.h"

#include "worker/run_config.h"
#include "joined_view.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct ViewUpdater {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char journal[ABL_PATH_MAX], out[ABL_PATH_MAX];
    uint64_t want, built; /* journal bytes asked for / covered by the last build */
    int requested, building, stopping, failed;
    int joined;    /* a joined sweep: the view covers every process's journal */
    int want_full; /* the next build is a full one (self-contained file) */
    int want_last; /* and, joined, our journal's last (it is closed) */
    H5Live *live;  /* the incremental view of periodic builds (not for joined sweeps) */
    char err[ABL_ERR_MAX];
    H5ViewStats last;
    int builds; /* begun so far (the test hook counts them) */
};

/* Periodic views are live (incremental) ones; the first and the last are full builds,
 * after which the live view's segments go (OUT.h5 then needs none of them). */
static int build(ViewUpdater *u, int full, int last, uint64_t upto, H5ViewStats *st, char *err) {
    if (u->joined) return join_build_view(u->out, u->journal, upto, last, st, err);
    if (full) {
        if (h5view_build_upto(u->journal, u->out, upto, st, err) != 0) return -1;
        h5live_close(u->live);
        u->live = NULL;
        h5live_remove_segments(u->out);
        return 0;
    }
    if (!u->live && !(u->live = h5live_open(u->journal, u->out, err))) return -1;
    return h5live_update(u->live, upto, st, err);
}

/* Test-only hook (util/test_hooks.h). With ABLATE_TEST_HOLD_VIEW=DIR set,
 * every build after the first ABLATE_TEST_HOLD_VIEW_AFTER (default 0) first creates
 * DIR/view.held and waits until DIR/view.go exists: a test sees what the sweep does while a
 * view build is slow (rank 0 does not wait for the first one), or orders the builds of
 * joined processes, whatever the machine's speed. */
static void test_hold(ViewUpdater *u) {
    const char *dir = test_hooks()->hold_view;
    if (!dir[0] || ++u->builds <= test_hooks()->hold_view_after) return;
    char held[ABL_PATH_MAX], go[ABL_PATH_MAX];
    snprintf(held, sizeof held, "%s/view.held", dir);
    snprintf(go, sizeof go, "%s/view.go", dir);
    FILE *f = fopen(held, "w");
    if (f) fclose(f);
    while (access(go, F_OK) != 0) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

static void *run(void *arg) {
    ViewUpdater *u = arg;
    pthread_mutex_lock(&u->mu);
    for (;;) {
        while (!u->requested && !u->stopping)
            pthread_cond_wait(&u->cv, &u->mu);
        if (!u->requested && u->stopping) break;
        uint64_t upto = u->want;
        int full = u->want_full || u->joined, last = u->want_last;
        u->requested = u->want_full = u->want_last = 0;
        u->building = 1;
        pthread_mutex_unlock(&u->mu);
        H5ViewStats st;
        char err[ABL_ERR_MAX] = "";
        test_hold(u);
        int rc = build(u, full, last, upto, &st, err);
        pthread_mutex_lock(&u->mu);
        u->building = 0;
        u->last = st;
        /* one line when views start failing (a full disk), not one per try */
        if (rc != 0 && !u->failed) log_warn("could not rebuild %s: %s", u->out, err);
        u->failed = rc != 0; /* the latest build decides: it covers all the earlier ones */
        if (rc != 0)
            snprintf(u->err, sizeof u->err, "%s", err);
        else
            u->built = upto;
        pthread_cond_broadcast(&u->cv);
    }
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

ViewUpdater *view_updater_start(const char *journal_path, const char *out_path, int joined,
                                char err[ABL_ERR_MAX]) {
    ViewUpdater *u = calloc(1, sizeof *u);
    if (!u) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        return NULL;
    }
    snprintf(u->journal, sizeof u->journal, "%s", journal_path);
    snprintf(u->out, sizeof u->out, "%s", out_path);
    u->joined = joined;
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->cv, NULL);
    if (pthread_create(&u->thread, NULL, run, u) != 0) {
        snprintf(err, ABL_ERR_MAX, "cannot start the view thread");
        pthread_mutex_destroy(&u->mu);
        pthread_cond_destroy(&u->cv);
        free(u);
        return NULL;
    }
    return u;
}

void view_updater_request(ViewUpdater *u, uint64_t flushed, int kind) {
    pthread_mutex_lock(&u->mu);
    if (flushed > u->want || !u->requested) u->want = flushed;
    u->requested = 1;
    u->want_full |= kind != VIEW_LIVE;
    u->want_last |= kind == VIEW_LAST;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
}

int view_updater_busy(ViewUpdater *u) {
    pthread_mutex_lock(&u->mu);
    int b = u->building || u->requested;
    pthread_mutex_unlock(&u->mu);
    return b;
}

int view_updater_wait(ViewUpdater *u, char err[ABL_ERR_MAX]) {
    pthread_mutex_lock(&u->mu);
    while (u->building || u->requested)
        pthread_cond_wait(&u->cv, &u->mu);
    int rc = u->failed ? -1 : 0;
    if (u->failed) snprintf(err, ABL_ERR_MAX, "%s", u->err);
    u->failed = 0;
    pthread_mutex_unlock(&u->mu);
    return rc;
}

double view_updater_last_seconds(ViewUpdater *u) {
    pthread_mutex_lock(&u->mu);
    double s = u->last.seconds;
    pthread_mutex_unlock(&u->mu);
    return s;
}

void view_updater_stop(ViewUpdater *u) {
    if (!u) return;
    pthread_mutex_lock(&u->mu);
    u->stopping = 1;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
    pthread_join(u->thread, NULL);
    h5live_close(u->live);
    pthread_mutex_destroy(&u->mu);
    pthread_cond_destroy(&u->cv);
    free(u);
}
