/* The joined scheduler (scheduler.h) of `ablate run --join`: the plain queue's order, but a
 * run is trained here only once this process holds its claim in join/ (join.h). A run
 * another process released or left behind is taken over from that process's journal; a run
 * of ours taken over meanwhile (we did not renew our lease) is abandoned here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/log.h"
#include "join.h"
#include "join_ledger.h"
#include "orchestrator/plan/id_index.h"
#include "scheduler.h"
#include "util/clock.h"
#include "util/grow.h"

typedef struct {
    uint8_t finished; /* here or anywhere */
    uint8_t held;     /* our claim */
    uint8_t lost;     /* taken over while we trained it: abandoned here */
    uint8_t retry;    /* it had failed when we joined: trained again here, once (as --resume
                         trains a failed run again), unless another process does it first */
    double recheck;   /* held elsewhere: look at its claim again after this time */
} JoinedRun;

/* Another process's journal, read when we take a run over from it. */
typedef struct {
    char name[JOIN_NAME_MAX];
    ResumeState rs;
    JournalReader *r;
    long long size; /* of the journal when read: read again if it grew */
} JoinSource;

typedef struct {
    Scheduler base;
    Join *join;
    JoinedRun *st;
    int *queue, n_queue; /* journal indices, most expensive first */
    int *ready, n_ready; /* runs we hold that wait for a worker again */
    int unfinished;      /* queue position before which every run is finished */
    double next_scan;    /* when to look for a run again after finding none */
    int failed;          /* an I/O error was reported: the sweep stops */
    char (
        *ids)[RUN_ID_CHARS]; /* the runs' ids ("" if finished before), indexed (ix) for join/done */
    IdIndex ix;
    double next_learn; /* when to read join/done again (sched_joined_claim) */
    int starting;      /* in j_start: a failed run is one to train again */
    JoinSource *src;   /* their journals, read for takeovers */
    int n_src;
    size_t cap_src;
} Joined;

static void fail(Joined *J, const char *what) {
    J->failed = 1;
    if (J->base.host.fail) J->base.host.fail(J->base.host.ctx, what);
}

/* A run another process finished: it counts as done here too, with its result. */
static void finished_elsewhere(Joined *J, int i, const JoinResult *res) {
    J->st[i].finished = 1;
    J->st[i].held = 0;
    if (J->base.host.finished_elsewhere) J->base.host.finished_elsewhere(J->base.host.ctx, i, res);
}

/* A run another process ended with res: finished here too, unless it failed before this
 * process joined (then it is trained again, like a failed run on --resume). A result that
 * arrives while we retry it, or after, is final. */
static void ended_elsewhere(Joined *J, int i, const JoinResult *res) {
    if (J->starting && res->status == RUN_FAILED) {
        J->st[i].retry = 1;
        return;
    }
    J->st[i].retry = 0;
    finished_elsewhere(J, i, res);
}

/* A run whose claim says done: its result is the claim's. */
static void done_elsewhere(Joined *J, int i) {
    JoinResult res;
    join_result(J->join, J->base.runs[i].id, &res);
    ended_elsewhere(J, i, &res);
}

/* A line of join/done: the run is finished, unless it is one of ours in flight (a run done
 * by another process while we train it is abandoned by j_tick, from its claim). */
static void logged_done(void *ctx, const char *id, const JoinResult *res) {
    Joined *J = ctx;
    int i = id_index_find(&J->ix, id);
    if (i < 0 || J->st[i].finished || J->st[i].held) return;
    ended_elsewhere(J, i, res);
}

/* What the other processes finished since we last looked, from join/done: -1 when the
 * sweep has none (its claims tell, one by one). */
static int learn_done(Joined *J) {
    return join_done_read(J->join, logged_done, J);
}

static int j_start(Scheduler *s, const SchedRun *runs, int n) {
    Joined *J = (Joined *)s;
    if (sched_keep_runs(s, runs, n) != 0 || !(J->st = calloc((size_t)n + 1, sizeof *J->st)) ||
        !(J->queue = malloc(sizeof(int) * (size_t)(n + 1))) ||
        !(J->ready = malloc(sizeof(int) * (size_t)(n + 1))) ||
        !(J->ids = calloc((size_t)n + 1, sizeof *J->ids)))
        return -1;
    for (int i = 0; i < n; i++) {
        J->st[i].finished = (uint8_t)(runs[i].finished != 0);
        /* "" for a run finished before (not one of the sweep's claims) */
        snprintf(J->ids[i], sizeof J->ids[i], "%s",
                 runs[i].id && !runs[i].finished ? runs[i].id : "");
    }
    if (id_index_build(&J->ix, J->ids[0], sizeof J->ids[0], n) != 0) return -1;
    J->n_queue = sched_order(runs, n, J->queue);
    J->starting = 1;
    if (learn_done(J) < 0) { /* what the others finished already; no join/done: every claim */
        for (int q = 0; q < J->n_queue; q++) {
            int mine, i = J->queue[q];
            char prev[JOIN_NAME_MAX];
            if (join_peek(J->join, runs[i].id, &mine, prev) == CLAIM_DONE) done_elsewhere(J, i);
        }
    }
    J->starting = 0;
    return 0;
}

/* Run i had failed when we joined: take its claim back from the failure and train it again
 * from its start. 1: ours now; 0: not (another process retries it, or it is done). */
static int retake(Joined *J, int i) {
    char prev[JOIN_NAME_MAX], err[ABL_ERR_MAX];
    JoinedRun *r = &J->st[i];
    r->retry = 0; /* once: if it fails again, that is final for this process */
    switch (join_retake(J->join, J->base.runs[i].id, prev, err)) {
    case CLAIM_ERROR:
        fail(J, err);
        return 0;
    case CLAIM_DONE:
        done_elsewhere(J, i);
        return 0;
    case CLAIM_BUSY: /* another process retries it: its result is final */
        r->recheck = clock_seconds() + 1.0;
        return 0;
    case CLAIM_MINE:
    case CLAIM_TAKEN:
        break;
    }
    r->held = 1;
    if (J->base.host.continue_from &&
        J->base.host.continue_from(J->base.host.ctx, i, NULL, NULL) != 0) {
        fail(J, "out of memory");
        return 0;
    }
    log_info("run %s had failed (%s): trained again from its start", J->base.runs[i].name,
             prev[0] ? prev : "its claim folded");
    return 1;
}

/* Another process's journal, read (again, if it grew) for a takeover. */
static JoinSource *join_source(Joined *J, const char *name) {
    char path[ABL_PATH_MAX + JOIN_NAME_MAX + 32], err[ABL_ERR_MAX];
    join_journal_of(J->join, name, path, sizeof path);
    struct stat st;
    long long size = stat(path, &st) == 0 ? (long long)st.st_size : -1;
    JoinSource *js = NULL;
    for (int k = 0; k < J->n_src && !js; k++)
        if (!strcmp(J->src[k].name, name)) js = &J->src[k];
    if (js && js->size == size) return js;
    if (!js) {
        if (GROW(J->src, J->cap_src, (size_t)J->n_src + 1) != 0) return NULL;
        js = &J->src[J->n_src++];
        memset(js, 0, sizeof *js);
        snprintf(js->name, sizeof js->name, "%s", name);
    }
    resume_free(&js->rs);
    js->size = -1;
    if ((!js->r && !(js->r = journal_reader_open(path, err))) ||
        resume_read(path, &js->rs, err) != 0) {
        log_warn("%s", err);
        return NULL;
    }
    js->size = size;
    return js;
}

/* We took run i over from process prev: continue from the last checkpoint its journal
 * records, with the history of the attempt that wrote it (as a resume does), or note that
 * it had in fact finished (killed between its RUN_END and its claim's "done"). */
static void adopt(Joined *J, int i, const char *prev) {
    const SchedRun *r = &J->base.runs[i];
    char err[ABL_ERR_MAX];
    JoinSource *js = prev[0] ? join_source(J, prev) : NULL;
    const ResumeRun *rr = js && i < js->rs.n_runs ? &js->rs.runs[i] : NULL;
    if (rr && strcmp(rr->id, r->id) != 0) rr = NULL;
    if (rr && rr->finished) {
        JoinResult res = {rr->status, rr->final_val_loss, rr->unstable, rr->train_seconds,
                          rr->final_test_loss};
        finished_elsewhere(J, i, &res);
        if (join_done(J->join, r->id, &res, err) < 0) fail(J, err);
        return;
    }
    const ResumeRun *from = rr && rr->ckpt_step > 0 ? rr : NULL;
    if (J->base.host.continue_from &&
        J->base.host.continue_from(J->base.host.ctx, i, from, from ? js->r : NULL) != 0) {
        fail(J, "out of memory");
        return;
    }
    log_info("run %s taken over from %s (%s), from %s", r->name, prev[0] ? prev : "nobody",
             rr ? "it stopped or is gone" : "no record of it",
             from ? "its checkpoint" : "its start");
}

/* The next run to train here: one we hold that waits again (its worker's own SIGUSR1), else
 * the most expensive one nobody has, else one released or left by a gone process. -1:
 * none for now (the rest are finished or held by live processes). */
static int j_take(Scheduler *s, double now) {
    Joined *J = (Joined *)s;
    while (J->n_ready) {
        JoinedRun *r = &J->st[J->ready[--J->n_ready]];
        if (!r->lost) return J->ready[J->n_ready];
        r->lost = r->held = 0; /* taken over while it waited here */
        r->recheck = now + 1.0;
    }
    if (now < J->next_scan) return -1; /* rank 0 polls often: not the claims each time */
    J->next_scan = now + 0.2;
    learn_done(J); /* runs finished elsewhere need no look at their claims */
    for (int q = J->unfinished; q < J->n_queue && !J->failed; q++) {
        int i = J->queue[q];
        JoinedRun *r = &J->st[i];
        if (r->finished || r->held || r->recheck > now) continue;
        if (r->retry) {
            if (!retake(J, i)) continue;
            J->next_scan = 0;
            return i;
        }
        char prev[JOIN_NAME_MAX], err[ABL_ERR_MAX];
        switch (join_claim(J->join, s->runs[i].id, prev, err)) {
        case CLAIM_ERROR:
            fail(J, err);
            return -1;
        case CLAIM_DONE:
            done_elsewhere(J, i);
            continue;
        case CLAIM_BUSY: /* its holder may go: look again in a second */
            r->recheck = now + 1.0;
            continue;
        case CLAIM_TAKEN:
            r->held = 1;
            adopt(J, i, prev);
            if (r->finished) continue;
            J->next_scan = 0;
            return i;
        case CLAIM_MINE:
            r->held = 1;
            J->next_scan = 0; /* more idle workers may want one at once */
            return i;
        }
    }
    return -1;
}

static int j_more(Scheduler *s) {
    Joined *J = (Joined *)s;
    if (J->n_ready) return 1;
    /* a joined run never becomes unfinished again: the cursor only moves forward */
    while (J->unfinished < J->n_queue && J->st[J->queue[J->unfinished]].finished)
        J->unfinished++;
    return J->unfinished < J->n_queue;
}

/* We still hold it: it waits here for the next idle worker. */
static void j_requeue(Scheduler *s, int run) {
    Joined *J = (Joined *)s;
    J->ready[J->n_ready++] = run;
}

/* Released for another process (or us, later) to continue from its checkpoint, journaled
 * and synced before this; a run taken over from us is only forgotten. */
static void j_cancel(Scheduler *s, int run) {
    Joined *J = (Joined *)s;
    JoinedRun *r = &J->st[run];
    char err[ABL_ERR_MAX];
    if (r->lost) {
        r->lost = r->held = 0;
        r->recheck = clock_seconds() + 1.0;
        return;
    }
    if (r->held && join_release(J->join, s->runs[run].id, err) < 0) log_warn("%s", err);
    r->held = 0;
}

/* After the RUN_END is synced: others may now count it done, with its result (even if it
 * was taken over meanwhile: its new holder then stops). */
static void j_ended(Scheduler *s, int run, const EndEvent *end) {
    Joined *J = (Joined *)s;
    JoinedRun *r = &J->st[run];
    char err[ABL_ERR_MAX];
    JoinResult res = {end->status, end->final_val_loss, sched_unstable(end), end->train_seconds,
                      end->final_test_loss};
    r->finished = 1;
    r->held = r->lost = 0;
    if (join_done(J->join, s->runs[run].id, &res, err) < 0) fail(J, err);
}

int sched_joined_rung(Scheduler *s, int run, int rung, double loss) {
    Joined *J = (Joined *)s;
    char err[ABL_ERR_MAX];
    if (run < 0 || run >= s->n || join_rung(J->join, s->runs[run].id, rung, loss, err) == 0)
        return 0;
    fail(J, err);
    return -1;
}

typedef struct {
    Joined *J;
    SchedRungFn fn;
    void *ctx;
} RungsHeard;

static void heard_rung(void *ctx, const char *id, int rung, double loss) {
    RungsHeard *h = ctx;
    int i = id_index_find(&h->J->ix, id);
    if (i >= 0) h->fn(h->ctx, i, rung, loss);
}

int sched_joined_rungs(Scheduler *s, SchedRungFn fn, void *ctx) {
    RungsHeard h = {(Joined *)s, fn, ctx};
    return join_rungs_read(h.J->join, heard_rung, &h);
}

void sched_joined_journal(Scheduler *s, char journal[ABL_PATH_MAX]) {
    join_journal_of(((Joined *)s)->join, NULL, journal, ABL_PATH_MAX);
}

int sched_joined_claim(Scheduler *s, int run) {
    Joined *J = (Joined *)s;
    if (run < 0 || run >= s->n || J->failed) return -1;
    JoinedRun *r = &J->st[run];
    double now = clock_seconds();
    if (!r->finished && !r->held && now >= J->next_learn) { /* adaptive.c asks run by run */
        J->next_learn = now + 0.2;
        learn_done(J);
    }
    if (r->finished) return 2;
    if (r->held && !r->lost) return 1;
    r->held = r->lost = 0;
    if (r->retry) /* it had failed when we joined: trained again here, once (j_take's way) */
        return retake(J, run) ? 1 : r->finished ? 2 : J->failed ? -1 : 0;
    char prev[JOIN_NAME_MAX], err[ABL_ERR_MAX];
    switch (join_claim(J->join, s->runs[run].id, prev, err)) {
    case CLAIM_ERROR:
        fail(J, err);
        return -1;
    case CLAIM_DONE:
        done_elsewhere(J, run);
        return 2;
    case CLAIM_BUSY:
        return 0;
    case CLAIM_TAKEN:
        r->held = 1;
        adopt(J, run, prev);
        return r->finished ? 2 : J->failed ? -1 : 1;
    case CLAIM_MINE:
        r->held = 1;
        return 1;
    }
    return -1;
}

/* Heartbeat, and every quarter lease a look at the claims of the runs we train: one taken
 * over (we were unresponsive for longer than the lease) is abandoned here. */
static void j_tick(Scheduler *s, double now) {
    Joined *J = (Joined *)s;
    int rc = join_heartbeat(J->join, now);
    if (rc < 0) fail(J, "cannot touch the join heartbeat");
    if (rc <= 0) return;
    for (int i = 0; i < s->n; i++) {
        JoinedRun *r = &J->st[i];
        if (!r->held || r->lost || r->finished || join_holds(J->join, s->runs[i].id)) continue;
        r->lost = 1;
        log_info("run %s was taken over by another process (this one did not renew its "
                 "lease of %.0f s); abandoning it here",
                 s->runs[i].name, join_lease(J->join));
    }
}

static int j_abandoned(Scheduler *s, int run) {
    Joined *J = (Joined *)s;
    return run >= 0 && run < s->n && J->st[run].lost;
}

static void j_announce(Scheduler *s, int n_live, int n_done, int n_resumed, const char *where,
                       const char *out_path) {
    (void)n_resumed; /* which runs this process continues is known only as it claims them */
    Joined *J = (Joined *)s;
    log_info("joined the sweep as %s: %d runs planned (%d finished), trained here "
             "on %s, others by the processes that join it (lease %.0f s) -> %s",
             join_name(J->join), n_live, n_done, where, join_lease(J->join), out_path);
}

static int j_complete_on_start(Scheduler *s, int n_live, const char *out_path) {
    Joined *J = (Joined *)s;
    char err[ABL_ERR_MAX];
    if (join_forget(J->join, out_path, err) != 0) log_warn("%s", err);
    log_info("the joined sweep is already complete (%d runs) -> %s", n_live, out_path);
    return 1;
}

static void j_close(Scheduler *s) {
    Joined *J = (Joined *)s;
    int all = J->ids && !J->failed;
    for (int i = 0; all && i < s->n; i++)
        all = J->st[i].finished;
    if (all) { /* the sweep is complete: its claims are folded into join/done */
        char err[ABL_ERR_MAX];
        int removed = join_compact(J->join, (const char(*)[RUN_ID_CHARS])J->ids, s->n, err);
        if (removed < 0) log_warn("%s", err);
        if (removed > 0) log_info("%d claims folded into join/done", removed);
    }
    for (int k = 0; k < J->n_src; k++) {
        resume_free(&J->src[k].rs);
        if (J->src[k].r) journal_reader_close(J->src[k].r);
    }
    free(J->src);
    id_index_free(&J->ix);
    free(J->ids);
    free(J->ready);
    free(J->queue);
    free(J->st);
    join_close(J->join);
    sched_free_runs(s);
    free(J);
}

static const SchedOps joined_ops = {
    .start = j_start,
    .take = j_take,
    .more = j_more,
    .requeue = j_requeue,
    .cancel = j_cancel,
    .ended = j_ended,
    .tick = j_tick,
    .abandoned = j_abandoned,
    .announce = j_announce,
    .complete_on_start = j_complete_on_start,
    .close = j_close,
    .continue_flag = "--join", /* a joined sweep is continued by joining it again */
    .shared = 1,
};

Scheduler *sched_joined_open(const SchedConfig *cfg, const SchedHost *host,
                             char journal[ABL_PATH_MAX], char err[ABL_ERR_MAX]) {
    struct stat st;
    if (stat(journal, &st) == 0) {
        snprintf(err, ABL_ERR_MAX,
                 "%s was written by a single sweep (%s): continue it with --resume; "
                 "--join needs an output of its own",
                 cfg->out_path, journal);
        return NULL;
    }
    if (host && host->admit && host->admit(host->ctx, cfg->out_path, err) != 0) return NULL;
    Joined *J = calloc(1, sizeof *J);
    if (!J) return snprintf(err, ABL_ERR_MAX, "out of memory"), NULL;
    J->base.ops = &joined_ops;
    if (host) J->base.host = *host;
    if (!(J->join = join_open(cfg->out_path, cfg->plan, cfg->replicate, cfg->lease, err))) {
        free(J);
        return NULL;
    }
    join_journal_of(J->join, NULL, journal, ABL_PATH_MAX);
    return &J->base;
}

/* The rest of a policy's host, for the joined scheduler under it (ctx: the policy, whose
 * Scheduler comes first). */
static int under_continue_from(void *ctx, int run, const ResumeRun *rr, JournalReader *from) {
    SchedHost *h = &((Scheduler *)ctx)->host;
    return h->continue_from ? h->continue_from(h->ctx, run, rr, from) : 0;
}
static void under_fail(void *ctx, const char *what) {
    SchedHost *h = &((Scheduler *)ctx)->host;
    if (h->fail) h->fail(h->ctx, what);
}
static int under_admit(void *ctx, const char *out_path, char err[ABL_ERR_MAX]) {
    SchedHost *h = &((Scheduler *)ctx)->host;
    return h->admit ? h->admit(h->ctx, out_path, err) : 0;
}

Scheduler *sched_joined_under(Scheduler *policy, const SchedConfig *cfg, const char *rule,
                              void (*elsewhere)(void *ctx, int run, const JoinResult *res),
                              char journal[ABL_PATH_MAX], char err[ABL_ERR_MAX]) {
    SchedHost ih = {
        policy, elsewhere, under_continue_from, under_fail, under_admit, NULL, NULL, NULL,
        NULL,   NULL};
    SchedConfig jc = *cfg;
    jc.replicate = rule;
    /* another rule: refused at its key, before join.c's own check of the file */
    if (join_ledger_check(cfg->out_path, cfg->plan->spec, rule, err) != 0) return NULL;
    return sched_joined_open(&jc, &ih, journal, err);
}
