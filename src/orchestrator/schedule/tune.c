/* The tune scheduler (scheduler.h) of a tune: sweep (docs/spec.md, "tune"), one process.
 *
 * The plan holds, per configuration, its tuning runs (every candidate at every tuning seed)
 * and then its comparison runs (plan.h). Tuning runs are handed out first, in plan order;
 * once every tuning run of a configuration has a result (its RUN_END durable: ended() is
 * called after the sync), its value is chosen: the candidate with the lowest mean
 * validation loss over the tuning seeds (a diverged run counts +inf; ties go to the lower
 * candidate, spec_tune_best), and the host is told (SchedHost.tuned) before any of its
 * comparison runs is handed out: it sets their configs to that value and journals the
 * choice. A failed tuning run gives no result: its configuration waits (the sweep ends
 * stopped, and --resume trains it again), as a replicate: sweep's looks wait.
 *
 * The choice is a function of the tuning runs' journaled results alone, so start() makes it
 * again for every configuration whose tuning runs ended before (the host journals only the
 * choices its journal lacks): the same choices after kill -9 + --resume and on any rank
 * count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/plan/id_index.h"
#include "orchestrator/plan/spec_tune.h"
#include "scheduler.h"
#include "util/log.h"

/* per journal index: T_NONE not a run of this plan, T_TODO to train, T_OUT training here,
 * T_DONE a result (done or diverged), T_FAILED no result (failed) */
enum { T_NONE, T_TODO, T_OUT, T_DONE, T_FAILED };

typedef struct {
    Scheduler base;
    const Plan *plan;
    const SpecTune *t;
    int per;      /* runs per configuration (plan_runs_per_config) */
    int n_tuning; /* tuning runs per configuration: candidates x tuning seeds */
    int n_configs;
    int *run_of;       /* plan index -> journal index, -1 if none */
    int *pos;          /* journal index -> plan index, -1 if none */
    unsigned char *st; /* per journal index: T_* */
    int *chosen;       /* per configuration: the chosen candidate, -1 not yet */
    int *queue;        /* the tuning runs to train (plan order), then comparison runs as
                          their configurations are decided; queue[next..n_queue) to take */
    int n_queue, next;
    int *requeued, n_requeued;
    JournalTune *rec; /* scratch */
} Tune;

static int config_of(const Tune *u, int plan_index) {
    return plan_index / u->per;
}

static int is_tuning(const Tune *u, int plan_index) {
    return plan_index % u->per < u->n_tuning;
}

/* A tuning run's validation loss for the choice: +inf unless it trained to its end. */
static double loss_of(const SchedRun *r) {
    return r->status == RUN_DONE && isfinite(r->final_val_loss) ? r->final_val_loss : INFINITY;
}

/* Chooses configuration k's value once every tuning run of it has a result; the host sets
 * its comparison runs' configs and journals the choice, and they are queued. */
static void try_choose(Tune *u, int k) {
    if (k < 0 || k >= u->n_configs || u->chosen[k] >= 0) return;
    const SpecTune *t = u->t;
    int base = k * u->per;
    for (int i = 0; i < u->n_tuning; i++) {
        int j = u->run_of[base + i];
        if (j < 0 || u->st[j] != T_DONE) return;
    }
    JournalTune *rec = u->rec;
    memset(rec, 0, sizeof *rec);
    rec->config = k;
    const char *cmp_name = u->plan->runs[base + u->n_tuning].name;
    const char *slash = strrchr(cmp_name, '/');
    snprintf(rec->name, sizeof rec->name, "%.*s", slash ? (int)(slash - cmp_name) : 0, cmp_name);
    rec->n_knobs = t->n_knobs;
    for (int q = 0; q < t->n_knobs; q++)
        snprintf(rec->knob[q], sizeof rec->knob[q], "%s", t->knobs[q]->name);
    rec->n_rungs = 1; /* every candidate to the full budget */
    rec->frac[0] = 1;
    rec->n_cand = t->n_candidates;
    for (int c = 0; c < t->n_candidates; c++) {
        for (int q = 0; q < t->n_knobs; q++)
            snprintf(rec->value[c][q], sizeof rec->value[c][q], "%s",
                     t->values[q][spec_tune_value(t, c, q)].text);
        double sum = 0;
        for (int si = 0; si < t->n_seeds; si++)
            sum += loss_of(&u->base.runs[u->run_of[base + c * t->n_seeds + si]]);
        rec->seeds[c] = t->n_seeds;
        rec->rung[c] = 0;
        rec->metric[c] = sum / t->n_seeds;
    }
    rec->chosen = spec_tune_best(rec->metric, rec->n_cand);
    SchedHost *h = &u->base.host;
    if (h->tuned && h->tuned(h->ctx, rec) != 0) return; /* the sweep stops (the host says) */
    u->chosen[k] = rec->chosen;
    for (int i = u->n_tuning; i < u->per; i++) {
        int j = u->run_of[base + i];
        if (j >= 0 && u->st[j] == T_TODO) u->queue[u->n_queue++] = j;
    }
}

/* A run's result (ours, or an earlier session's): it counts from now on. */
static void record_result(Tune *u, int run, RunStatus status, double loss) {
    SchedRun *r = &u->base.runs[run];
    r->finished = 1;
    r->status = status;
    r->final_val_loss = loss;
    u->st[run] = status == RUN_DONE || status == RUN_DIVERGED ? T_DONE : T_FAILED;
    int p = u->pos[run];
    if (p >= 0 && is_tuning(u, p)) try_choose(u, config_of(u, p));
}

static int u_start(Scheduler *s, const SchedRun *runs, int n) {
    Tune *u = (Tune *)s;
    int total = u->plan->n_runs;
    if (sched_keep_runs(s, runs, n) != 0 || !(u->st = calloc((size_t)n + 1, 1)) ||
        !(u->pos = malloc(sizeof(int) * (size_t)(n + 1))) ||
        !(u->queue = malloc(sizeof(int) * (size_t)(n + 1))) ||
        !(u->requeued = malloc(sizeof(int) * (size_t)(n + 1))))
        return -1;
    IdIndex ix = {0}; /* built if the spec changed: a search per run is quadratic */
    for (int i = 0; i < n; i++) {
        u->pos[i] = -1;
        if (!runs[i].id[0]) continue; /* a lost journal index */
        /* journal index i is plan index i unless the spec changed between sessions */
        if ((i >= total || strcmp(u->plan->runs[i].id, runs[i].id)) && !ix.slot &&
            id_index_build(&ix, u->plan->runs[0].id, sizeof *u->plan->runs, u->plan->n_runs))
            return -1;
        int pi = i < total && !strcmp(u->plan->runs[i].id, runs[i].id)
                     ? i
                     : id_index_find(&ix, runs[i].id);
        if (pi < 0) continue;
        u->run_of[pi] = i;
        u->pos[i] = pi;
        u->st[i] = T_TODO;
    }
    id_index_free(&ix);
    /* the tuning runs first, in plan order */
    for (int pi = 0; pi < total; pi++) {
        int j = u->run_of[pi];
        if (j >= 0 && is_tuning(u, pi) && !runs[j].finished) u->queue[u->n_queue++] = j;
    }
    /* replay: the results so far, and the choices they give (the host journals new ones) */
    for (int pi = 0; pi < total; pi++) {
        int j = u->run_of[pi];
        if (j >= 0 && runs[j].finished) record_result(u, j, runs[j].status, runs[j].final_val_loss);
    }
    return 0;
}

static int u_take(Scheduler *s, double now) {
    Tune *u = (Tune *)s;
    (void)now;
    if (u->n_requeued) {
        int run = u->requeued[--u->n_requeued];
        u->st[run] = T_OUT;
        return run;
    }
    while (u->next < u->n_queue) {
        int run = u->queue[u->next++];
        if (u->st[run] != T_TODO) continue;
        u->st[run] = T_OUT;
        return run;
    }
    return -1;
}

static int u_more(Scheduler *s) {
    Tune *u = (Tune *)s;
    if (u->n_requeued) return 1;
    for (int i = u->next; i < u->n_queue; i++)
        if (u->st[u->queue[i]] == T_TODO) return 1;
    return 0;
}

/* Back to the front: interrupted on its own, or given up while the sweep stops. */
static void u_requeue(Scheduler *s, int run) {
    Tune *u = (Tune *)s;
    if (run < 0 || run >= s->n || u->st[run] != T_OUT) return;
    u->st[run] = T_TODO;
    u->requeued[u->n_requeued++] = run;
}

static void u_ended(Scheduler *s, int run, const EndEvent *end) {
    Tune *u = (Tune *)s;
    if (run < 0 || run >= s->n || u->st[run] == T_NONE) return;
    record_result(u, run, end->status, end->final_val_loss);
}

static void u_tick(Scheduler *s, double now) {
    (void)s, (void)now;
}

static int u_abandoned(Scheduler *s, int run) {
    (void)s, (void)run;
    return 0; /* nobody else trains our runs */
}

static int u_complete_on_start(Scheduler *s, int n_live, const char *out_path) {
    (void)s, (void)n_live, (void)out_path;
    return 0;
}

static void u_announce(Scheduler *s, int n_live, int n_done, int n_resumed, const char *where,
                       const char *out_path) {
    Tune *u = (Tune *)s;
    int chosen = 0, todo = 0;
    for (int k = 0; k < u->n_configs; k++)
        chosen += u->chosen[k] >= 0;
    for (int i = 0; i < s->n; i++)
        todo += u->st[i] == T_TODO;
    char resumed[64] = "";
    if (n_resumed)
        snprintf(resumed, sizeof resumed, " (%d resumed from their checkpoints)", n_resumed);
    log_info("%d runs planned (%d already finished), %d to run%s; tune: %d configurations x %d "
             "candidates x %d tuning seeds, %d chosen; on %s -> %s",
             n_live, n_done, todo, resumed, u->n_configs, u->t->n_candidates, u->t->n_seeds, chosen,
             where, out_path);
}

static void u_close(Scheduler *s) {
    Tune *u = (Tune *)s;
    free(u->run_of);
    free(u->pos);
    free(u->st);
    free(u->chosen);
    free(u->queue);
    free(u->requeued);
    free(u->rec);
    sched_free_runs(s);
    free(u);
}

static const SchedOps tune_ops = {
    .start = u_start,
    .take = u_take,
    .more = u_more,
    .requeue = u_requeue,
    .cancel = u_requeue, /* given up: whoever trains it next is this process, later */
    .ended = u_ended,
    .tick = u_tick,
    .abandoned = u_abandoned,
    .announce = u_announce,
    .complete_on_start = u_complete_on_start,
    .close = u_close,
    .continue_flag = "--resume",
    .shared = 0,
};

Scheduler *sched_tune_open(const SchedConfig *cfg, const SchedHost *host, char err[ABL_ERR_MAX]) {
    Tune *u = calloc(1, sizeof *u);
    if (!u) return snprintf(err, ABL_ERR_MAX, "out of memory"), NULL;
    u->base.ops = &tune_ops;
    if (host) u->base.host = *host;
    u->plan = cfg->plan;
    u->t = &cfg->plan->spec->tune;
    u->per = plan_runs_per_config(cfg->plan->spec);
    u->n_tuning = u->t->n_candidates * u->t->n_seeds;
    u->n_configs = cfg->plan->n_runs / u->per;
    u->run_of = malloc(sizeof(int) * (size_t)(cfg->plan->n_runs + 1));
    u->chosen = malloc(sizeof(int) * (size_t)(u->n_configs + 1));
    u->rec = malloc(sizeof *u->rec);
    if (!u->run_of || !u->chosen || !u->rec) {
        u_close(&u->base);
        return snprintf(err, ABL_ERR_MAX, "out of memory"), NULL;
    }
    for (int i = 0; i < cfg->plan->n_runs; i++)
        u->run_of[i] = -1;
    for (int k = 0; k < u->n_configs; k++)
        u->chosen[k] = -1;
    return &u->base;
}
