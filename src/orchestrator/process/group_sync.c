#include "group_sync.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/run_config.h"
#include "util/test_hooks.h"

struct GroupSync {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;
    char path[ABL_PATH_MAX];
    uint64_t requested, durable;
    int syncing, stopping, failed, waiters;
    long groups; /* syncs started */
    char err[ABL_ERR_MAX];
};

/* Test-only hook (util/test_hooks.h): ABLATE_TEST_KILL_BEFORE_SYNC=K kills
 * the process (SIGKILL) just before its K-th group sync, the group's RUN_END records
 * written but not synced, after saying which bytes on stderr; a test then checks that
 * none of the runs whose RUN_END lies there was reported done. It first waits until rank 0
 * has written another RUN_END (or waits, or stops): rank 0 has then gone on, and would have
 * announced the group's runs by then if it announced before their sync. */
static void test_kill_before_sync(GroupSync *g, uint64_t from, uint64_t to) {
    long k = test_hooks()->kill_before_sync;
    if (k <= 0 || k != g->groups) return;
    pthread_mutex_lock(&g->mu);
    while (g->requested <= to && !g->stopping && !g->waiters)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    fprintf(stderr, "ablate: test hook: killed before syncing journal bytes %llu-%llu\n",
            (unsigned long long)from, (unsigned long long)to);
    fflush(stderr);
    raise(SIGKILL);
}

static void *run(void *arg) {
    GroupSync *g = arg;
    pthread_mutex_lock(&g->mu);
    for (;;) {
        while (!g->stopping && (g->failed || g->requested <= g->durable))
            pthread_cond_wait(&g->cv, &g->mu);
        if (g->failed || g->requested <= g->durable) break; /* stopping, nothing left */
        uint64_t from = g->durable, to = g->requested;
        g->syncing = 1;
        g->groups++;
        pthread_mutex_unlock(&g->mu);
        test_kill_before_sync(g, from, to);
        int rc = fdatasync(g->fd), e = errno;
        pthread_mutex_lock(&g->mu);
        g->syncing = 0;
        if (rc == 0) {
            g->durable = to;
        } else {
            g->failed = 1;
            snprintf(g->err, sizeof g->err, "cannot sync journal %s: %s", g->path, strerror(e));
        }
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

GroupSync *group_sync_start(int fd, const char *path, char err[ABL_ERR_MAX]) {
    GroupSync *g = calloc(1, sizeof *g);
    if (!g) return snprintf(err, ABL_ERR_MAX, "out of memory"), NULL;
    g->fd = fd;
    snprintf(g->path, sizeof g->path, "%s", path);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    if (pthread_create(&g->thread, NULL, run, g) != 0) {
        snprintf(err, ABL_ERR_MAX, "cannot start the journal's sync thread");
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->cv);
        free(g);
        return NULL;
    }
    return g;
}

void group_sync_request(GroupSync *g, uint64_t upto) {
    pthread_mutex_lock(&g->mu);
    if (upto > g->requested) g->requested = upto;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

int64_t group_sync_durable(GroupSync *g, char err[ABL_ERR_MAX]) {
    pthread_mutex_lock(&g->mu);
    int64_t d = g->failed ? -1 : (int64_t)g->durable;
    if (g->failed) snprintf(err, ABL_ERR_MAX, "%s", g->err);
    pthread_mutex_unlock(&g->mu);
    return d;
}

int group_sync_wait(GroupSync *g, uint64_t upto, char err[ABL_ERR_MAX]) {
    pthread_mutex_lock(&g->mu);
    if (upto > g->requested) g->requested = upto;
    g->waiters++;
    pthread_cond_broadcast(&g->cv);
    while (!g->failed && g->durable < upto)
        pthread_cond_wait(&g->cv, &g->mu);
    g->waiters--;
    int rc = g->failed ? -1 : 0;
    if (g->failed) snprintf(err, ABL_ERR_MAX, "%s", g->err);
    pthread_mutex_unlock(&g->mu);
    return rc;
}

void group_sync_stop(GroupSync *g) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stopping = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}
