/* What every scheduler shares (the run order), and the choice between them. */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "join.h"
#include "join_ledger.h"

Scheduler *scheduler_open(const SchedConfig *cfg, const SchedHost *host, char journal[ABL_PATH_MAX],
                          char err[ABL_ERR_MAX]) {
    int replicate = cfg->plan && cfg->plan->spec && cfg->plan->spec->replicate.on;
    int tune = cfg->plan && cfg->plan->spec && cfg->plan->spec->tune.on;
    /* a joined tune: sweep: every process decides every rung from join/rungs and the claims */
    if (cfg->join && tune) return sched_tune_open(cfg, host, journal, err);
    /* a joined replicate: sweep: every process decides from the results in the claims */
    if (cfg->join && replicate) return sched_adaptive_open(cfg, host, journal, err);
    if (cfg->join) { /* a sweep a rule decided is not joined without one (its ledger said) */
        if (cfg->plan && cfg->plan->spec &&
            join_ledger_check(cfg->out_path, cfg->plan->spec, NULL, err) != 0)
            return NULL;
        return sched_joined_open(cfg, host, journal, err);
    }
    char dir[ABL_PATH_MAX];
    if (join_exists(cfg->out_path) && !cfg->force) {
        journal_dir_for(cfg->out_path, dir, sizeof dir);
        snprintf(err, ABL_ERR_MAX,
                 "%s is a joined sweep (%s/join): continue it with `ablate run --join`, or "
                 "--force to start over",
                 cfg->out_path, dir);
        return NULL;
    }
    if (tune) return sched_tune_open(cfg, host, journal, err); /* with replicate: inside */
    if (replicate) return sched_adaptive_open(cfg, host, journal, err);
    return sched_queue_open(host, err);
}

int scheduler_remove_output(const char *out_path, char err[ABL_ERR_MAX]) {
    return join_remove(out_path, err);
}

/* Most expensive first (ties in index order): the long runs start early, so the sweep does
 * not end waiting on one big run. qsort has no context argument, hence the global. */
static const SchedRun *g_runs;
static int cmp_cost(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    double cx = g_runs[x].cost, cy = g_runs[y].cost;
    if (cx != cy) return cx > cy ? -1 : 1;
    return (x > y) - (x < y);
}

int sched_order(const SchedRun *runs, int n, int *order) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!runs[i].finished) order[k++] = i;
    g_runs = runs;
    qsort(order, (size_t)k, sizeof *order, cmp_cost);
    return k;
}

int sched_keep_runs(Scheduler *s, const SchedRun *runs, int n) {
    s->runs = malloc(sizeof *runs * (size_t)(n + 1));
    if (!s->runs) return -1;
    if (n) memcpy(s->runs, runs, sizeof *runs * (size_t)n);
    s->n = n;
    return 0;
}

void sched_free_runs(Scheduler *s) {
    free(s->runs);
    s->runs = NULL;
    s->n = 0;
}
