/* Rank 0 of `ablate run`: plan, reconcile with the journal, dispatch, journal, rebuild. */
#include "sweep.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "worker/blas_env.h"
#include "util/clock.h"
#include "env_info.h"
#include "orchestrator/record/event_codec.h"
#include "orchestrator/record/h5view.h"
#include "orchestrator/schedule/join.h"
#include "orchestrator/record/journal.h"
#include "orchestrator/plan/plan.h"
#include "orchestrator/plan/plan_cost.h"
#include "protocol.h"
#include "orchestrator/record/resume.h"
#include "run_exec.h"
#include "orchestrator/plan/run_id.h"
#include "sweep_progress.h"
#include "sweep_signals.h"
#include "orchestrator/record/view_updater.h"

/* One run of the sweep, indexed by its journal index. */
typedef struct {
    const PlannedRun *pr;
    RunConfig cfg; /* vocab resolved */
    double cost;   /* FLOPs, or a time budget's seconds at 50 GFLOP/s */
    int finished;
    RunStatus status;
    uint32_t attempt;
    int64_t ckpt_step;      /* the last journaled checkpoint (0: none) */
    uint32_t ckpt_attempt;  /* the attempt that wrote it */
    int dead;               /* a journal index whose PLAN record was lost (see resume) */
    EventRecordRefs events; /* EVENTS records, while the run may still need its history */
    JournalReader *hist;    /* the journal events points into: another process's (join) or
                               NULL for ours */
    /* --join (join.h) */
    uint8_t held;   /* our claim */
    uint8_t lost;   /* taken over while we trained it: abandoned here */
    int rank;       /* where it is being trained (-1: nowhere) */
    double recheck; /* held elsewhere: look at its claim again after this time */
} SweepRun;

/* Another process's journal, read when we take a run over from it. */
typedef struct {
    char name[JOIN_NAME_MAX];
    ResumeState rs;
    JournalReader *r;
    long long size; /* of the journal when read: read again if it grew */
} JoinSource;

/* Why the sweep stops before every run ended. */
typedef enum { STOP_NONE, STOP_SIGNAL, STOP_IO } StopReason;

typedef struct {
    const SweepOptions *o;
    Spec spec;
    Plan plan;
    PlanCost *cost;
    int n;
    SweepRun *runs;
    int *queue; /* journal indices, most expensive first */
    int n_queue, next;
    Journal *j;
    char journal_path[ABL_PATH_MAX];
    Progress progress;
    double last_view, view_seconds;
    StopReason stop;
    int view_failed;
    JournalReader *history; /* reads earlier attempts' events back for resumed runs */
    ViewUpdater *vu;        /* builds OUT.h5 on its own thread */
    Join *join;             /* --join: the claims shared with the other processes */
    JoinSource *src;        /* their journals, read for takeovers */
    int n_src;
    int *ready, n_ready; /* join: runs we hold that wait for a worker again */
    int unfinished;      /* join: queue position before which every run is finished */
    double next_scan;    /* join: when to look for a run again after finding none */
    int local_run;       /* one process: the run it is training (-1: none) */
} Sweep;

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* --force: remove OUT.h5 and OUT.h5.d (journal, checkpoints, weights). The caller holds
 * the journal's lock, so no sweep is writing there. */
static int remove_outputs(const char *out, char err[ABL_ERR_MAX]) {
    char dir[ABL_PATH_MAX], path[ABL_PATH_MAX * 2];
    journal_dir_for(out, dir, sizeof dir);
    static const char *const subdirs[] = {"ckpt", "weights"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, subdirs[i]);
        DIR *d = opendir(path);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') {
                char f[ABL_PATH_MAX * 3];
                snprintf(f, sizeof f, "%s/%s", path, e->d_name);
                unlink(f);
            }
        closedir(d);
        rmdir(path);
    }
    DIR *d = opendir(dir); /* the journal and anything saved beside it */
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.' || (e->d_name[1] && strcmp(e->d_name, "..") != 0)) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    if (d) closedir(d);
    if (exists(dir) && rmdir(dir) != 0) {
        snprintf(err, ABL_ERR_MAX, "--force: cannot remove %s: %s", dir, strerror(errno));
        return -1;
    }
    if (exists(out) && unlink(out) != 0) {
        snprintf(err, ABL_ERR_MAX, "--force: cannot remove %s: %s", out, strerror(errno));
        return -1;
    }
    return 0;
}

/* Most expensive first (ties in plan order): the long runs start early, so the sweep
 * does not end waiting on one big run. qsort has no context argument, hence the global. */
static const Sweep *g_sort;
static int cmp_queue(const void *a, const void *b) {
    const Sweep *s = g_sort;
    int x = *(const int *)a, y = *(const int *)b;
    double cx = s->runs[x].cost, cy = s->runs[y].cost;
    if (cx != cy) return cx > cy ? -1 : 1;
    return (x > y) - (x < y);
}

/* ------------------------------------------------------------------ stopping */

/* How this sweep is continued: a joined one by joining it again. */
static const char *continue_with(const Sweep *s) {
    return s->o->join ? "--join" : "--resume";
}

/* The first I/O failure stops the sweep: nothing more is dispatched, runs in progress are
 * asked to checkpoint, and the exit status says "stopped, resumable". One line, once. */
static void stop_io(Sweep *s, const char *what) {
    if (s->stop == STOP_IO) return;
    s->stop = STOP_IO;
    fprintf(stderr,
            "\nablate: %s; stopping the sweep (finished runs are safe; after freeing space, "
            "continue with %s)\n",
            what && what[0] ? what : "I/O error", continue_with(s));
}

static void stop_journal(Sweep *s) {
    stop_io(s, journal_error(s->j));
}

static int stopping(const Sweep *s) {
    return s->stop != STOP_NONE;
}

/* ------------------------------------------------------------------ checkpoints */

static void ckpt_file(const Sweep *s, const SweepRun *r, int64_t step, char *path, size_t n) {
    run_ckpt_path(s->o->out_path, r->pr->id, step, path, n);
}

/* Removes every checkpoint file of a run except keep_step's (keep_step 0: all of them):
 * superseded ones once a newer one is journaled, all once the run has ended. A book-sized
 * checkpoint is ~160 MB. */
static void remove_checkpoints(const Sweep *s, const SweepRun *r, int64_t keep_step) {
    char dir[ABL_PATH_MAX], prefix[32], keep[64] = "";
    journal_dir_for(s->o->out_path, dir, sizeof dir);
    strncat(dir, "/ckpt", sizeof dir - strlen(dir) - 1);
    snprintf(prefix, sizeof prefix, "%s-", r->pr->id);
    if (keep_step > 0) snprintf(keep, sizeof keep, "%s-%lld.ckpt", r->pr->id, (long long)keep_step);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && strcmp(e->d_name, keep) != 0) {
            char f[ABL_PATH_MAX + 300];
            snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
            unlink(f);
        }
    closedir(d);
}

static void drop_checkpoint(Sweep *s, SweepRun *r) {
    r->ckpt_step = 0;
    r->ckpt_attempt = 0;
    remove_checkpoints(s, r, 0);
}

/* A checkpoint is durable on disk: journal it (synced, so a resume finds it), then let the
 * previous one go. */
static void record_checkpoint(Sweep *s, uint32_t run, uint32_t attempt, int64_t step,
                              const char *path) {
    if (run >= (uint32_t)s->n || s->stop == STOP_IO) return;
    SweepRun *r = &s->runs[run];
    if (attempt != r->attempt || r->lost) return; /* lost: its files are its new holder's */
    if (journal_append_checkpoint(s->j, run, attempt, step, path) != 0 || journal_sync(s->j) != 0) {
        stop_journal(s);
        return;
    }
    r->ckpt_step = step;
    r->ckpt_attempt = attempt;
    remove_checkpoints(s, r, step);
}

/* The step an event belongs to, for copying a run's history up to a checkpoint: the start
 * event comes before step 1; samples and the end come after training. */
static long event_step(const Event *ev) {
    switch (ev->kind) {
    case EV_START:
        return 0;
    case EV_STEP:
        return ev->u.step.step;
    case EV_EVAL:
        return ev->u.eval.step;
    case EV_ACT:
        return ev->u.act.step;
    default:
        return LONG_MAX;
    }
}

/* A run continues from its checkpoint at step S in a new attempt: the events the
 * checkpoint's attempt emitted up to S are copied from the journal into the new attempt
 * (the view keeps each run's last attempt), streamed in batches of at most 64 KiB, so a
 * history of any length needs no more memory than one record. */
static int copy_history(Sweep *s, SweepRun *r, uint32_t run, uint32_t attempt, int64_t upto) {
    enum { BATCH = 64 << 10 };
    char err[ABL_ERR_MAX];
    if (journal_flush(s->j) != 0) return stop_journal(s), -1;
    if (!r->hist && !s->history && !(s->history = journal_reader_open(s->journal_path, err))) {
        stop_io(s, err);
        return -1;
    }
    JournalReader *from = r->hist ? r->hist : s->history;
    uint8_t *batch = malloc(BATCH + EVENT_PACK_MAX);
    EventRecordRefs mine = {0};
    size_t len = 0;
    int rc = batch ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < r->events.n; i++) {
        if (r->events.refs[i].attempt != r->ckpt_attempt) continue;
        JournalRecord rec;
        uint32_t att;
        const uint8_t *p;
        size_t n;
        if (journal_reader_read_at(from, r->events.refs[i].offset, &rec) != 0 ||
            journal_decode_events(&rec, &att, &p, &n) != 0) {
            rc = -1;
            break;
        }
        for (size_t off = 0; off < n && rc == 0;) {
            Event ev;
            size_t used;
            if (event_unpack(p + off, n - off, &ev, &used) != 0) break; /* view skips it too */
            if (event_step(&ev) <= upto) {
                memcpy(batch + len, p + off, used);
                len += used;
            }
            off += used;
            if (len >= BATCH || (off >= n && i + 1 == r->events.n)) {
                if (len && (refs_push(&mine, attempt, journal_size(s->j)) != 0 ||
                            journal_append_events(s->j, run, attempt, batch, len) != 0))
                    rc = -2;
                len = 0;
            }
        }
    }
    if (rc == 0 && len &&
        (refs_push(&mine, attempt, journal_size(s->j)) != 0 ||
         journal_append_events(s->j, run, attempt, batch, len) != 0))
        rc = -2;
    free(batch);
    if (rc == -1) {
        fprintf(stderr, "ablate: cannot read run %s's history back: %s\n", r->pr->name,
                journal_reader_error(from));
        refs_free(&mine);
        return -1;
    }
    if (rc == -2) {
        refs_free(&mine);
        stop_journal(s);
        return -1;
    }
    refs_free(&r->events);
    r->events = mine;
    r->hist = NULL;
    return 0;
}

/* ------------------------------------------------------------------ reconcile */

/* Maps the new plan onto the journal: old runs keep their indices, new ones are appended.
 * A plan that drops or changes a journaled run is refused. */
static int reconcile(Sweep *s, ResumeState *rs, char err[ABL_ERR_MAX]) {
    ResumeMatch m;
    if (resume_match(rs, &s->plan, &m) != 0) return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    if (m.missing >= 0) {
        snprintf(err, ABL_ERR_MAX,
                 "%s: cannot resume: the spec no longer plans run '%s' (id %s); resuming with "
                 "a changed spec may only add runs (more seeds, new variants). Use a new "
                 "output file, or --force to start over",
                 s->o->spec_path, rs->runs[m.missing].name, rs->runs[m.missing].id);
        resume_match_free(&m);
        return -1;
    }
    s->n = rs->n_runs;
    int n_new = m.n_fresh;
    s->runs = calloc((size_t)(s->n + n_new) + 1, sizeof *s->runs);
    if (!s->runs) return resume_match_free(&m), snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    for (int k = 0; k < rs->n_runs; k++) {
        int p = m.plan_of[k];
        SweepRun *r = &s->runs[k];
        if (p < 0) { /* its PLAN record was lost: the run is planned again as a new index */
            r->dead = 1;
            r->finished = 1;
            continue;
        }
        r->pr = &s->plan.runs[p];
        r->cfg = s->cost[p].cfg;
        r->cost = s->cost[p].c.seconds > 0 ? s->cost[p].c.seconds * 50e9 : s->cost[p].c.flops;
        r->finished = rs->runs[k].finished && rs->runs[k].status != RUN_FAILED;
        r->status = rs->runs[k].status;
        r->attempt = rs->runs[k].attempt;
        r->ckpt_step = rs->runs[k].ckpt_step;
        r->ckpt_attempt = rs->runs[k].ckpt_attempt;
        if (!r->finished) { /* its history may be copied into the next attempt */
            r->events = rs->runs[k].events;
            memset(&rs->runs[k].events, 0, sizeof rs->runs[k].events);
        }
    }
    for (int i = 0; i < n_new; i++) {
        int p = m.fresh[i];
        SweepRun *r = &s->runs[s->n + i];
        r->pr = &s->plan.runs[p];
        r->cfg = s->cost[p].cfg;
        r->cost = s->cost[p].c.seconds > 0 ? s->cost[p].c.seconds * 50e9 : s->cost[p].c.flops;
        /* the resolved config (model.vocab_size from the data) is what the file shows; the
         * id stays the hash of the config as planned */
        if (journal_append_plan2(s->j, (uint32_t)(s->n + i), r->pr->id, r->pr->name, r->pr->seed,
                                 &r->cfg, r->pr->overrides) != 0)
            stop_journal(s);
    }
    s->n += n_new;
    resume_match_free(&m);
    return 0;
}

/* ------------------------------------------------------------------ joined sweeps */

/* Another process's journal, read (again, if it grew) for a takeover. */
static JoinSource *join_source(Sweep *s, const char *name) {
    char path[ABL_PATH_MAX + JOIN_NAME_MAX + 32], err[ABL_ERR_MAX];
    join_journal_of(s->join, name, path, sizeof path);
    struct stat st;
    long long size = stat(path, &st) == 0 ? (long long)st.st_size : -1;
    JoinSource *js = NULL;
    for (int k = 0; k < s->n_src && !js; k++)
        if (!strcmp(s->src[k].name, name)) js = &s->src[k];
    if (js && js->size == size) return js;
    if (!js) {
        JoinSource *n = realloc(s->src, sizeof *n * (size_t)(s->n_src + 1));
        if (!n) return NULL;
        s->src = n;
        js = &s->src[s->n_src++];
        memset(js, 0, sizeof *js);
        snprintf(js->name, sizeof js->name, "%s", name);
    }
    resume_free(&js->rs);
    js->size = -1;
    if ((!js->r && !(js->r = journal_reader_open(path, err))) ||
        resume_read(path, &js->rs, err) != 0) {
        fprintf(stderr, "ablate: warning: %s\n", err);
        return NULL;
    }
    js->size = size;
    return js;
}

/* A run another process finished: it counts as done here too. */
static void finished_elsewhere(Sweep *s, SweepRun *r, RunStatus status) {
    r->finished = 1;
    r->status = status;
    r->held = 0;
    refs_free(&r->events);
    r->hist = NULL;
    progress_run_elsewhere(&s->progress, r->cost);
}

/* We took run i over from process prev: continue from the last checkpoint its journal
 * records, with the history of the attempt that wrote it (as a resume does), or note that
 * it had in fact finished (killed between its RUN_END and its claim's "done"). */
static void adopt(Sweep *s, int i, const char *prev) {
    SweepRun *r = &s->runs[i];
    char err[ABL_ERR_MAX];
    JoinSource *js = prev[0] ? join_source(s, prev) : NULL;
    const ResumeRun *rr = js && i < js->rs.n_runs ? &js->rs.runs[i] : NULL;
    if (rr && strcmp(rr->id, r->pr->id) != 0) rr = NULL;
    if (rr && rr->finished) {
        finished_elsewhere(s, r, rr->status);
        if (join_done(s->join, r->pr->id, err) < 0) stop_io(s, err);
        return;
    }
    refs_free(&r->events);
    r->hist = NULL;
    r->ckpt_step = r->ckpt_attempt = 0;
    if (rr && rr->ckpt_step > 0) {
        for (size_t k = 0; k < rr->events.n; k++)
            if (rr->events.refs[k].attempt == rr->ckpt_attempt &&
                refs_push(&r->events, rr->events.refs[k].attempt, rr->events.refs[k].offset) != 0) {
                stop_io(s, "out of memory");
                return;
            }
        r->ckpt_step = rr->ckpt_step;
        r->ckpt_attempt = rr->ckpt_attempt;
        r->hist = js->r;
    }
    fprintf(stderr, "ablate: run %s taken over from %s (%s), from %s\n", r->pr->name,
            prev[0] ? prev : "nobody", rr ? "it stopped or is gone" : "no record of it",
            r->ckpt_step > 0 ? "its checkpoint" : "its start");
}

/* The next run to train here: one we hold that waits again (its worker's own SIGUSR1), else
 * the most expensive one nobody has, else one released or left by a gone process. -1:
 * none for now (the rest are finished or held by live processes). */
static int join_take(Sweep *s) {
    double now = clock_seconds();
    while (s->n_ready) {
        SweepRun *r = &s->runs[s->ready[--s->n_ready]];
        if (!r->lost) return (int)(r - s->runs);
        r->lost = r->held = 0; /* taken over while it waited here */
        r->recheck = now + 1.0;
    }
    if (now < s->next_scan) return -1; /* rank 0 polls often: not the claims each time */
    s->next_scan = now + 0.2;
    for (int q = s->unfinished; q < s->n_queue && !stopping(s); q++) {
        int i = s->queue[q];
        SweepRun *r = &s->runs[i];
        if (r->finished || r->held || r->recheck > now) continue;
        char prev[JOIN_NAME_MAX], err[ABL_ERR_MAX];
        switch (join_claim(s->join, r->pr->id, prev, err)) {
        case CLAIM_ERROR:
            stop_io(s, err);
            return -1;
        case CLAIM_DONE:
            finished_elsewhere(s, r, RUN_DONE);
            continue;
        case CLAIM_BUSY: /* its holder may go: look again in a second */
            r->recheck = now + 1.0;
            continue;
        case CLAIM_TAKEN:
            r->held = 1;
            adopt(s, i, prev);
            if (r->finished) continue;
            s->next_scan = 0;
            return i;
        case CLAIM_MINE:
            r->held = 1;
            s->next_scan = 0; /* more idle workers may want one at once */
            return i;
        }
    }
    return -1;
}

/* Heartbeat, and every quarter lease a look at the claims of the runs we train: one taken
 * over (we were unresponsive for longer than the lease) is abandoned here. */
static void join_tick(Sweep *s) {
    int rc = join_heartbeat(s->join, clock_seconds());
    if (rc < 0) stop_io(s, "cannot touch the join heartbeat");
    if (rc <= 0) return;
    for (int i = 0; i < s->n; i++) {
        SweepRun *r = &s->runs[i];
        if (!r->held || r->lost || r->finished || join_holds(s->join, r->pr->id)) continue;
        r->lost = 1;
        fprintf(stderr,
                "ablate: run %s was taken over by another process (this one did not renew its "
                "lease of %.0f s); abandoning it here\n",
                r->pr->name, join_lease(s->join));
    }
}

static int take_next(Sweep *s) {
    if (s->join) return join_take(s);
    return s->next < s->n_queue ? s->queue[s->next++] : -1;
}

/* Is there anything left to train, here or (joined) anywhere? */
static int more_work(Sweep *s) {
    if (!s->join) return s->next < s->n_queue;
    if (s->n_ready) return 1;
    /* a joined run never becomes unfinished again: the cursor only moves forward */
    while (s->unfinished < s->n_queue && s->runs[s->queue[s->unfinished]].finished)
        s->unfinished++;
    return s->unfinished < s->n_queue;
}

/* An interrupted run of ours (not the sweep's stop) goes back to be trained again. */
static void requeue(Sweep *s, int run) {
    if (s->join)
        s->ready[s->n_ready++] = run;
    else
        s->queue[--s->next] = run;
}

/* A run we will not train on: released for another process to continue from its
 * checkpoint (journaled and synced before this). */
static void join_let_go(Sweep *s, SweepRun *r) {
    char err[ABL_ERR_MAX];
    if (r->held && !r->lost && join_release(s->join, r->pr->id, err) < 0)
        fprintf(stderr, "ablate: warning: %s\n", err);
    r->held = 0;
}

/* ------------------------------------------------------------------ the view */

/* Called often (after events, when idle): every view_seconds it hands the flushed journal
 * to the view thread, which shows running runs too; rank 0 never waits for a periodic view.
 * force: now, and wait for it (the first and the final view). A view that cannot be
 * written (a full disk) is a warning: the journal holds everything, and the next build or
 * `ablate view OUT.h5` writes it. */
static void rebuild_view(Sweep *s, int force) {
    double t = clock_seconds();
    if (!force && (t - s->last_view < s->view_seconds || view_updater_busy(s->vu))) return;
    char err[ABL_ERR_MAX] = "";
    s->last_view = t;
    struct stat st; /* joined: another process rebuilt it a moment ago */
    if (s->join && !force && stat(s->o->out_path, &st) == 0 &&
        difftime(time(NULL), st.st_mtime) < s->view_seconds)
        return;
    if (journal_flush(s->j) != 0) {
        stop_journal(s);
        return;
    }
    view_updater_request(s->vu, journal_size(s->j), force);
    /* keep views to at most ~10% of the time: their thread shares the machine with runs */
    double took = view_updater_last_seconds(s->vu);
    if (s->view_seconds < 10 * took) s->view_seconds = 10 * took;
    if (!force) return;
    s->view_failed = view_updater_wait(s->vu, err) != 0;
    if (s->view_failed)
        fprintf(stderr, "ablate: warning: could not rebuild %s: %s\n", s->o->out_path, err);
}

/* ------------------------------------------------------------------ runs */

/* The next attempt of a run: from its checkpoint when the file is intact (rank 0 checks
 * it before copying the history the checkpoint stands on), else from step 0. */
static void prepare_assignment(Sweep *s, int idx, RunAssignment *a) {
    SweepRun *r = &s->runs[idx];
    memset(a, 0, sizeof *a);
    a->run = (uint32_t)idx;
    a->attempt = ++r->attempt;
    a->seed = r->pr->seed;
    memcpy(a->id, r->pr->id, sizeof a->id);
    a->cfg = r->cfg;
    a->ckpt_every = s->o->checkpoint_every;
    snprintf(a->out_path, sizeof a->out_path, "%s", s->o->out_path);
    run_weights_path(s->o->out_path, r->pr->id, a->weights_path, sizeof a->weights_path);
    if (r->ckpt_step > 0) {
        char err[ABL_ERR_MAX];
        ckpt_file(s, r, r->ckpt_step, a->ckpt_path, sizeof a->ckpt_path);
        if (run_ckpt_verify(a->ckpt_path, err) == 0) {
            a->resume_step = r->ckpt_step;
        } else {
            fprintf(stderr, "ablate: %s; run %s restarts from its start\n", err, r->pr->name);
            drop_checkpoint(s, r);
            a->ckpt_path[0] = '\0';
        }
    }
}

/* Journals the attempt's start, and for a resumed one the history it continues. 0, or -1
 * when the journal failed (the sweep is stopping; nothing was handed out). */
static int record_begin(Sweep *s, const RunAssignment *a, int rank, const char *host) {
    SweepRun *r = &s->runs[a->run];
    if (journal_append_begin(s->j, a->run, a->attempt, rank, host, a->resume_step) != 0) {
        stop_journal(s);
        return -1;
    }
    if (a->resume_step > 0 ? copy_history(s, r, a->run, a->attempt, a->resume_step) != 0
                           : (refs_free(&r->events), 0))
        return -1;
    /* joined: the checkpoint this attempt continues from, in our own journal, so that a
     * process taking the run over from us needs no other journal than ours */
    if (s->join && a->resume_step > 0) {
        record_checkpoint(s, a->run, a->attempt, a->resume_step, a->ckpt_path);
        if (stopping(s)) return -1;
    }
    r->rank = rank;
    /* written (not synced): after a kill -9 the journal, and `ablate view`, show the run as
     * begun and interrupted rather than pending */
    if (journal_flush(s->j) != 0) return stop_journal(s), -1;
    progress_run_started(&s->progress);
    return 0;
}

static void record_events(Sweep *s, uint32_t run, uint32_t attempt, const uint8_t *p, size_t n) {
    if (s->stop == STOP_IO || run >= (uint32_t)s->n) return;
    SweepRun *r = &s->runs[run];
    uint64_t off = journal_size(s->j);
    if (journal_append_events(s->j, run, attempt, p, n) != 0) {
        stop_journal(s);
        return;
    }
    if (attempt == r->attempt && refs_push(&r->events, attempt, off) != 0)
        stop_io(s, "out of memory");
}

/* A run's end. A finished run is reported done only once its RUN_END is synced: after a
 * failed write nothing is announced and the run stays unfinished for --resume. */
static void record_end(Sweep *s, uint32_t run, uint32_t attempt, int rank, const char *host,
                       const RunResult *res) {
    SweepRun *r = &s->runs[run];
    const EndEvent *end = &res->end;
    int durable = s->stop != STOP_IO &&
                  journal_append_end(s->j, run, attempt, rank, host, end) == 0 &&
                  journal_sync(s->j) == 0;
    if (!durable && s->stop != STOP_IO) stop_journal(s);
    r->rank = -1;
    if (end->status == RUN_INTERRUPTED && r->lost) { /* abandoned: another process has it */
        r->lost = r->held = 0;
        r->recheck = clock_seconds() + 1.0;
        progress_run_stopped(&s->progress);
        return;
    }
    if (end->status == RUN_INTERRUPTED) {
        if (res->ckpt_step < 0) drop_checkpoint(s, r);
        if (res->io_errno > 0) stop_io(s, end->message);
        progress_run_stopped(&s->progress);
        /* a worker that got its own SIGUSR1, or could not use its checkpoint: the run goes
         * back to the queue (from its checkpoint) while the sweep goes on */
        if (!stopping(s) && durable)
            requeue(s, (int)run);
        else if (s->join)
            join_let_go(s, r);
        return;
    }
    if (!durable) {
        progress_run_stopped(&s->progress);
        if (s->join) join_let_go(s, r);
        return;
    }
    r->finished = 1;
    r->status = end->status;
    refs_free(&r->events);
    drop_checkpoint(s, r);
    progress_run_finished(&s->progress, r->pr->name, end, r->cost);
    if (s->join) { /* after the RUN_END is synced: others may now count it done */
        char err[ABL_ERR_MAX];
        r->held = r->lost = 0;
        if (join_done(s->join, r->pr->id, err) < 0) stop_io(s, err);
    }
    rebuild_view(s, 0);
}

/* ------------------------------------------------------------------ one rank */

static int local_send(void *ctx, const RunAssignment *a, const uint8_t *p, size_t n) {
    Sweep *s = ctx;
    record_events(s, a->run, a->attempt, p, n);
    rebuild_view(s, 0);
    return s->stop == STOP_IO ? -1 : 0;
}

static int local_checkpointed(void *ctx, const RunAssignment *a, int64_t step, const char *path) {
    Sweep *s = ctx;
    record_checkpoint(s, a->run, a->attempt, step, path);
    return s->stop == STOP_IO ? -1 : 0;
}

static TrainPoll local_poll(void *ctx) {
    Sweep *s = ctx;
    if (sweep_signal_term()) return TRAIN_ABORT;
    if (sweep_signal_usr1() && !stopping(s)) { /* as run_mpi says it */
        s->stop = STOP_SIGNAL;
        fprintf(stderr, "\nablate: SIGUSR1: checkpointing 1 run(s) in progress\n");
    }
    if (s->join) {
        join_tick(s);
        if (s->local_run >= 0 && s->runs[s->local_run].lost) return TRAIN_ABORT;
    }
    return stopping(s) ? TRAIN_CHECKPOINT : TRAIN_CONTINUE;
}

static void run_local(Sweep *s, const char *host) {
    VocabCache *vc = vocab_cache_new();
    RunOutput out = {local_send, local_checkpointed, local_poll, s};
    for (;;) {
        if (sweep_signal_usr1() && !stopping(s)) s->stop = STOP_SIGNAL;
        if (stopping(s) || sweep_signal_term() || !more_work(s)) break;
        int idx = take_next(s);
        if (idx < 0) { /* joined: the rest is held by live processes; watch them */
            join_tick(s);
            rebuild_view(s, 0);
            struct timespec ts = {0, 200000000};
            nanosleep(&ts, NULL);
            continue;
        }
        RunAssignment a;
        prepare_assignment(s, idx, &a);
        if (record_begin(s, &a, 0, host) != 0) break;
        RunResult res;
        s->local_run = idx;
        run_execute(&a, vc, &out, &res);
        s->local_run = -1;
        if (res.end.status == RUN_INTERRUPTED && sweep_signal_term()) break;
        record_end(s, a.run, a.attempt, 0, host, &res);
    }
    vocab_cache_free(vc);
}

/* ------------------------------------------------------------------ many ranks */

static void send_stop(int rank, int32_t mode) {
    MPI_Send(&mode, 1, MPI_INT32_T, rank, TAG_STOP, MPI_COMM_WORLD);
}

/* Hands the next queued run to an idle worker; returns 1 if it did. */
static int assign_next(Sweep *s, int rank, const char *host, int *busy) {
    int idx = take_next(s);
    if (idx < 0) return 0;
    RunAssignment a;
    prepare_assignment(s, idx, &a);
    if (record_begin(s, &a, rank, host) != 0) return 0;
    MPI_Send(&a, (int)sizeof a, MPI_BYTE, rank, TAG_ASSIGN, MPI_COMM_WORLD);
    busy[rank] = (int)a.run;
    return 1;
}

static void run_mpi(Sweep *s, int nranks) {
    int *busy = malloc(sizeof(int) * (size_t)nranks); /* run index, -1 idle, -2 not ready */
    char(*hosts)[64] = calloc((size_t)nranks, 64);
    uint8_t *buf = NULL;
    int cap = 0, n_busy = 0, asked = 0;
    long idle_ns = 0; /* back off while nothing arrives, so rank 0 leaves the CPU to workers */
    for (int r = 0; r < nranks; r++)
        busy[r] = -2;
    for (;;) {
        if (sweep_signal_term()) break;
        rebuild_view(s, 0);
        if (sweep_signal_usr1() && !stopping(s)) {
            s->stop = STOP_SIGNAL;
            fprintf(stderr, "\nablate: SIGUSR1: checkpointing %d run(s) in progress\n", n_busy);
        }
        if (stopping(s) && !asked) { /* ask once; a worker between runs has nothing to save */
            asked = 1;
            for (int r = 1; r < nranks; r++)
                if (busy[r] >= 0) send_stop(r, STOP_CHECKPOINT);
        }
        if (s->join) { /* heartbeat; runs taken over from us are stopped where they train */
            join_tick(s);
            for (int r = 1; r < nranks; r++)
                if (busy[r] >= 0 && s->runs[busy[r]].lost && s->runs[busy[r]].rank == r) {
                    send_stop(r, STOP_ABANDON);
                    s->runs[busy[r]].rank = -2; /* asked once */
                }
        }
        for (int r = 1; r < nranks && !stopping(s); r++)
            if (busy[r] == -1 && more_work(s)) n_busy += assign_next(s, r, hosts[r], busy);
        if (n_busy == 0 && (stopping(s) || !more_work(s))) {
            int ready = 1;
            for (int r = 1; r < nranks; r++)
                ready &= busy[r] != -2;
            if (ready || stopping(s)) break;
        }
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        if (!flag) {
            idle_ns = idle_ns ? (idle_ns < 5000000 ? idle_ns * 2 : 10000000) : 20000;
            struct timespec ts = {0, idle_ns}; /* 20 us doubling to 10 ms */
            nanosleep(&ts, NULL);
            continue;
        }
        idle_ns = 0;
        int n;
        MPI_Get_count(&st, MPI_BYTE, &n);
        if (n > cap) {
            cap = n;
            buf = realloc(buf, (size_t)cap);
        }
        MPI_Recv(buf, n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int src = st.MPI_SOURCE;
        if (st.MPI_TAG == TAG_READY) {
            snprintf(hosts[src], 64, "%.*s", n, (const char *)buf);
            busy[src] = -1;
        } else if (st.MPI_TAG == TAG_EVENTS && n >= 8) {
            uint32_t run, attempt;
            memcpy(&run, buf, 4);
            memcpy(&attempt, buf + 4, 4);
            record_events(s, run, attempt, buf + 8, (size_t)n - 8);
        } else if (st.MPI_TAG == TAG_CKPT && n == (int)sizeof(WorkerCheckpoint)) {
            WorkerCheckpoint c;
            memcpy(&c, buf, sizeof c);
            c.path[sizeof c.path - 1] = '\0';
            record_checkpoint(s, c.run, c.attempt, c.step, c.path);
        } else if (st.MPI_TAG == TAG_END && n >= (int)sizeof(WorkerEnd)) {
            WorkerEnd we;
            memcpy(&we, buf, sizeof we);
            RunResult res = {.ckpt_step = we.ckpt_step, .io_errno = we.io_errno};
            Event ev;
            size_t used;
            if (event_unpack(buf + sizeof we, (size_t)n - sizeof we, &ev, &used) != 0 ||
                ev.kind != EV_END) {
                memset(&ev, 0, sizeof ev);
                ev.u.end.status = RUN_FAILED;
                snprintf(ev.u.end.message, sizeof ev.u.end.message, "malformed end message");
            }
            res.end = ev.u.end;
            we.host[sizeof we.host - 1] = '\0';
            busy[src] = -1;
            n_busy--;
            /* keep the worker busy while the finished run is synced (and the view rebuilt) */
            if (!stopping(s) && !sweep_signal_usr1() && more_work(s))
                n_busy += assign_next(s, src, hosts[src], busy);
            if (we.run < (uint32_t)s->n) record_end(s, we.run, we.attempt, we.rank, we.host, &res);
            /* a run requeued by record_end goes to the first idle worker next time round */
        }
    }
    if (!sweep_signal_term())
        for (int r = 1; r < nranks; r++)
            send_stop(r, STOP_EXIT);
    free(buf);
    free(busy);
    free(hosts);
}

/* ------------------------------------------------------------------ setup */

/* What a resume found damaged in the journal, said once: where, what was lost, which runs
 * will re-run, where the bytes were saved. The affected runs get an interrupted attempt
 * (so that a later resume re-runs them too) and a DAMAGE record marks the region handled. */
static int handle_damage(Sweep *s, ResumeState *rs, char err[ABL_ERR_MAX]) {
    for (int i = 0; i < rs->n_damage; i++) {
        ResumeDamage *d = &rs->damage[i];
        char saved[ABL_PATH_MAX + 64], runs[1024] = "";
        snprintf(saved, sizeof saved, "%s.damaged-%llu", s->journal_path,
                 (unsigned long long)d->offset);
        if (journal_save_range(s->journal_path, d->offset, d->length, saved, err) != 0) return -1;
        for (int k = 0; k < d->n_runs; k++) {
            ResumeRun *rr = &rs->runs[d->runs[k]];
            size_t l = strlen(runs);
            if (l < sizeof runs - 80)
                snprintf(runs + l, sizeof runs - l, "%s%s", k ? ", " : "", rr->name);
            else if (l < sizeof runs - 4)
                strcat(runs, ", …");
            EndEvent end;
            memset(&end, 0, sizeof end);
            end.status = RUN_INTERRUPTED;
            end.final_val_loss = end.final_val_acc = NAN;
            snprintf(end.message, sizeof end.message,
                     "journal damage at bytes %llu-%llu: records lost, the run re-runs",
                     (unsigned long long)d->offset, (unsigned long long)(d->offset + d->length));
            rr->attempt++;
            if (journal_append_begin(s->j, (uint32_t)d->runs[k], rr->attempt, -1, "", 0) != 0 ||
                journal_append_end(s->j, (uint32_t)d->runs[k], rr->attempt, -1, "", &end) != 0)
                goto io;
        }
        if (journal_append_damage(s->j, d->offset, d->length, saved) != 0 || journal_sync(s->j))
            goto io;
        const char *what = d->record_type ? journal_type_name(d->record_type) : "unknown";
        fprintf(stderr,
                "ablate: journal %s: %llu damaged bytes at offset %llu (%s record%s) skipped; "
                "later records kept; saved to %s; %s%s\n",
                s->journal_path, (unsigned long long)d->length, (unsigned long long)d->offset, what,
                d->record_type ? "" : "s", saved,
                d->n_runs ? "runs that will re-run: " : "no run needs to re-run",
                d->n_runs ? runs : "");
    }
    return 0;
io:
    snprintf(err, ABL_ERR_MAX, "%s", journal_error(s->j));
    return -1;
}

static int open_journal(Sweep *s, ResumeState *rs, char err[ABL_ERR_MAX]) {
    const SweepOptions *o = s->o;
    char dir[ABL_PATH_MAX];
    if (journal_path_for(o->out_path, s->journal_path, sizeof s->journal_path) != 0 ||
        journal_dir_for(o->out_path, dir, sizeof dir) != 0) {
        snprintf(err, ABL_ERR_MAX, "%s: output path too long", o->out_path);
        return -1;
    }
    int have_journal = exists(s->journal_path);
    if (o->join) {
        if (have_journal) {
            snprintf(err, ABL_ERR_MAX,
                     "%s was written by a single sweep (%s): continue it with --resume; "
                     "--join needs an output of its own",
                     o->out_path, s->journal_path);
            return -1;
        }
        if (!(s->join = join_open(o->out_path, &s->plan, o->lease, err))) return -1;
        join_journal_of(s->join, NULL, s->journal_path, sizeof s->journal_path);
        memset(rs, 0, sizeof *rs);
        s->j = journal_create(s->journal_path, err);
        return s->j ? 0 : -1;
    }
    if (join_exists(o->out_path) && !o->force) {
        snprintf(err, ABL_ERR_MAX,
                 "%s is a joined sweep (%s/join): continue it with `ablate run --join`, or "
                 "--force to start over",
                 o->out_path, dir);
        return -1;
    }
    if (!o->resume && !o->force && (exists(o->out_path) || exists(dir))) {
        snprintf(err, ABL_ERR_MAX,
                 "%s already exists: use --resume to continue that sweep or --force to "
                 "overwrite it",
                 exists(o->out_path) ? o->out_path : dir);
        return -1;
    }
    if (o->resume && !have_journal && exists(o->out_path)) {
        snprintf(err, ABL_ERR_MAX, "%s has no journal (%s) to resume from", o->out_path,
                 s->journal_path);
        return -1;
    }
    memset(rs, 0, sizeof *rs);
    if (o->force && !o->resume) {
        /* take the lock before deleting anything: a sweep writing there keeps its files */
        int lock = journal_lock_existing(s->journal_path, err);
        if (lock == -1) {
            snprintf(err + strlen(err), ABL_ERR_MAX - strlen(err),
                     "; --force refused: stop that sweep first");
            return -1;
        }
        if (join_remove(o->out_path, err) != 0) {
            snprintf(err + strlen(err), ABL_ERR_MAX - strlen(err),
                     "; --force refused: stop that sweep first");
            if (lock >= 0) close(lock);
            return -1;
        }
        int rc = remove_outputs(o->out_path, err);
        if (rc == 0 && journal_ensure_dir(o->out_path, err) == 0)
            s->j = journal_create(s->journal_path, err);
        if (lock >= 0) close(lock); /* after the new journal holds its own lock */
        return s->j ? 0 : -1;
    }
    if (o->resume && have_journal) {
        JournalScan scan;
        s->j = journal_open_append(s->journal_path, &scan, err); /* locks it first */
        if (!s->j) return -1;
        if (scan.dropped_bytes)
            fprintf(stderr, "ablate: dropped a torn journal tail of %llu bytes\n",
                    (unsigned long long)scan.dropped_bytes);
        if (resume_read(s->journal_path, rs, err) != 0) return -1;
        return handle_damage(s, rs, err);
    }
    if (journal_ensure_dir(o->out_path, err) != 0) return -1;
    s->j = journal_create(s->journal_path, err);
    return s->j ? 0 : -1;
}

static void write_header(Sweep *s, int nranks, const char *hostnames) {
    EnvInfo e;
    env_info_collect(&e, nranks, hostnames);
    env_info_add(&e, "spec", s->spec.text, s->spec.text_len);
    env_info_add(&e, "journal_version", JOURNAL_FORMAT_VERSION, 1);
    env_info_add_sweep(&e, s->spec.text, s->o->sets, s->o->n_sets, &s->plan);
    /* the char vocabulary of the first run's data, so samples can be decoded */
    VocabCache *vc = vocab_cache_new();
    char err[ABL_ERR_MAX];
    const Dataset *d = s->n > 0 ? vocab_dataset(vc, &s->runs[0].cfg, err) : NULL;
    if (d && d->tokenizer == TOK_CHAR)
        env_info_add_hex(&e, "vocab_hex", d->chars, (size_t)d->vocab_size);
    vocab_cache_free(vc);
    const char *kv[2 * ENV_INFO_MAX];
    int n = env_info_pairs(&e, kv);
    if (journal_append_header(s->j, kv, n) != 0) stop_journal(s);
    env_info_free(&e);
}

char *sweep_gather_hostnames(int rank, int nranks) {
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    char *all = rank == 0 ? calloc((size_t)nranks, 64) : NULL;
    MPI_Gather(host, 64, MPI_CHAR, all, 64, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank != 0) return NULL;
    /* distinct hosts, comma-separated */
    char *out = calloc((size_t)nranks, 66);
    for (int r = 0; r < nranks; r++) {
        const char *h = all + 64 * r;
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = strcmp(all + 64 * q, h) == 0;
        if (seen) continue;
        if (out[0]) strcat(out, ",");
        strcat(out, h);
    }
    free(all);
    return out;
}

/* The exit status (sweep.h) and the last line of the log. */
static int finish(Sweep *s) {
    int failed = 0, finished = 0, n = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->join && s->runs[i].held && !s->runs[i].finished) join_let_go(s, &s->runs[i]);
        if (s->runs[i].dead) continue;
        n++;
        finished += s->runs[i].finished;
        failed += s->runs[i].finished && s->runs[i].status == RUN_FAILED;
    }
    if (s->stop != STOP_IO) {
        char t[64];
        env_info_now(t, sizeof t);
        const char *kv[] = {"end_time", t, "status",
                            finished < n ? "stopped"
                                         : (failed ? "complete_with_failures" : "complete")};
        if (journal_append_sweep_end(s->j, kv, 2) != 0 || journal_sync(s->j) != 0) stop_journal(s);
    }
    if (s->stop != STOP_IO) {
        rebuild_view(s, 1);
    } else { /* what the journal holds on disk, if there is room for it */
        char err[ABL_ERR_MAX];
        view_updater_request(s->vu, journal_written_size(s->j), 1);
        if (view_updater_wait(s->vu, err) != 0)
            fprintf(stderr, "ablate: warning: could not rebuild %s: %s\n", s->o->out_path, err);
    }
    if (journal_close(s->j) != 0 && s->stop != STOP_IO) stop_io(s, "cannot sync the journal");
    s->j = NULL;
    /* a SIGUSR1 that came once every run had ended stops nothing: the sweep is complete */
    if (finished < n || s->stop == STOP_IO) {
        fprintf(stderr, "ablate: stopped with %d of %d runs finished; continue with %s\n", finished,
                n, continue_with(s));
        return SWEEP_EXIT_STOPPED;
    }
    if (s->view_failed) {
        fprintf(stderr,
                "ablate: all %d runs finished (%d failed), but %s could not be written; "
                "`ablate view %s` writes it from the journal\n",
                n, failed, s->o->out_path, s->o->out_path);
        return SWEEP_EXIT_FAILED;
    }
    fprintf(stderr, "ablate: all %d runs finished (%d failed) -> %s\n", n, failed, s->o->out_path);
    return failed ? SWEEP_EXIT_FAILED : SWEEP_EXIT_OK;
}

int sweep_rank0(const SweepOptions *o, int nranks) {
    Sweep s;
    memset(&s, 0, sizeof s);
    s.o = o;
    s.local_run = -1;
    s.view_seconds = o->view_interval > 0 ? o->view_interval : 30.0;
    char err[ABL_ERR_MAX];
    ResumeState rs = {0};
    int rc = SWEEP_EXIT_USAGE;
    char *hostnames = sweep_gather_hostnames(0, nranks);
    blas_set_threads(); /* one BLAS thread, as on workers: identical results on any rank count */
    blas_warn_threads("ablate run");
    /* Validate everything before any file is touched. */
    if (spec_load(&s.spec, o->spec_path, o->sets, o->n_sets, err) != 0 ||
        plan_build(&s.spec, &s.plan, err) != 0 || !(s.cost = plan_cost_compute(&s.plan, err))) {
        fprintf(stderr, "%s\n", err);
        goto stop_workers;
    }
    if (open_journal(&s, &rs, err) != 0 ||
        (run_id_adopt(&s.plan, &rs) < 0 && snprintf(err, ABL_ERR_MAX, "out of memory")) ||
        reconcile(&s, &rs, err) != 0) {
        fprintf(stderr, "ablate run: %s\n", err);
        goto stop_workers;
    }
    if (!(s.vu = view_updater_start(s.journal_path, o->out_path, o->join, err))) {
        fprintf(stderr, "ablate run: %s\n", err);
        goto stop_workers;
    }
    write_header(&s, nranks, hostnames ? hostnames : "");
    s.queue = malloc(sizeof(int) * (size_t)(s.n + 1));
    int done_before = 0, n_live = 0;
    for (int i = 0; i < s.n; i++) {
        if (s.runs[i].dead) continue;
        n_live++;
        if (s.runs[i].finished)
            done_before++;
        else
            s.queue[s.n_queue++] = i;
    }
    g_sort = &s;
    qsort(s.queue, (size_t)s.n_queue, sizeof(int), cmp_queue);
    if (s.join) { /* what the other processes finished already */
        s.ready = malloc(sizeof(int) * (size_t)(s.n + 1));
        for (int q = 0; q < s.n_queue; q++) {
            int mine;
            char prev[JOIN_NAME_MAX];
            SweepRun *r = &s.runs[s.queue[q]];
            if (join_peek(s.join, r->pr->id, &mine, prev) == CLAIM_DONE) {
                r->finished = 1;
                r->status = RUN_DONE;
                done_before++;
            }
        }
    }
    if (journal_sync(s.j) != 0) stop_journal(&s);
    if (!stopping(&s)) rebuild_view(&s, 1);
    if (s.join)
        fprintf(stderr,
                "ablate: joined the sweep as %s: %d runs planned (%d finished), trained here "
                "on %d %s, others by the processes that join it (lease %.0f s) -> %s\n",
                join_name(s.join), n_live, done_before, nranks > 1 ? nranks - 1 : 1,
                nranks > 1 ? "worker rank(s)" : "process", join_lease(s.join), o->out_path);
    else {
        /* after a requeue or a resume, say that the runs in progress continue, not restart */
        int from_ckpt = 0;
        char resumed[64] = "";
        for (int q = 0; q < s.n_queue; q++)
            if (s.runs[s.queue[q]].ckpt_step > 0) from_ckpt++;
        if (from_ckpt)
            snprintf(resumed, sizeof resumed, " (%d resumed from their checkpoints)", from_ckpt);
        fprintf(stderr,
                "ablate: %d runs planned (%d already finished), %d to run%s on %d %s -> %s\n",
                n_live, done_before, s.n_queue, resumed, nranks > 1 ? nranks - 1 : 1,
                nranks > 1 ? "worker rank(s)" : "process", o->out_path);
    }
    double total_cost = 0;
    for (int i = 0; i < s.n_queue; i++)
        if (!s.runs[s.queue[i]].finished) total_cost += s.runs[s.queue[i]].cost;
    progress_init(&s.progress, n_live, done_before, total_cost);

    if (nranks > 1)
        run_mpi(&s, nranks);
    else
        run_local(&s, hostnames ? hostnames : "");
    progress_finish(&s.progress);

    if (sweep_signal_term()) {
        journal_sync(s.j); /* finished runs are already durable; flush what else there is */
        fprintf(stderr, "ablate: SIGTERM: stopped; continue with %s\n", continue_with(&s));
        journal_close(s.j);
        s.j = NULL;
        rc = SWEEP_EXIT_STOPPED;
        s.stop = STOP_SIGNAL;
        goto out;
    }
    rc = finish(&s);
    goto out;
stop_workers:
    for (int r = 1; r < nranks; r++) {
        char host[64];
        MPI_Recv(host, 64, MPI_CHAR, r, TAG_READY, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        send_stop(r, STOP_EXIT);
    }
    if (s.j) journal_close(s.j);
out:
    if (s.history) journal_reader_close(s.history);
    for (int i = 0; i < s.n; i++)
        refs_free(&s.runs[i].events);
    view_updater_stop(s.vu);
    for (int k = 0; k < s.n_src; k++) {
        resume_free(&s.src[k].rs);
        if (s.src[k].r) journal_reader_close(s.src[k].r);
    }
    free(s.src);
    free(s.ready);
    join_close(s.join);
    free(hostnames);
    free(s.queue);
    free(s.runs);
    free(s.cost);
    resume_free(&rs);
    plan_free(&s.plan);
    spec_free(&s.spec);
    return rc;
}
