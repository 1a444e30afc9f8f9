/* Rank 0 of `ablate run`, once the sweep is open (sweep_open.c): the dispatch loop (one
 * process, or worker ranks over MPI) and the records it makes of each run (begin, events,
 * checkpoints, end; a resumed run's history), the view kept current, the end of the sweep. */
#include "worker/event_schema.h"
#include "util/log.h"
#include "sweep.h"

#include <dirent.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/backoff.h"
#include "util/clock.h"
#include "util/grow.h"
#include "env_info.h"
#include "orchestrator/record/event_codec.h"
#include "protocol.h"
#include "sweep_signals.h"

#include "sweep_internal.h"

/* The config run r trains with: its plan's, with model.vocab_size from the data. */
void run_config(const Sweep *s, const SweepRun *r, RunConfig *out) {
    plan_cost_config(&s->plan, s->cost, r->pr->index, out);
}

/* ------------------------------------------------------------------ stopping */

/* How this sweep is continued (--resume, or --join for a joined one). */
static const char *continue_with(const Sweep *s) {
    return s->sched ? s->sched->ops->continue_flag : "--resume";
}

/* The first I/O failure stops the sweep: nothing more is dispatched, runs in progress are
 * asked to checkpoint, and the exit status says "stopped, resumable". One line, once. */
void stop_io(Sweep *s, const char *what) {
    if (s->stop == STOP_IO) return;
    s->stop = STOP_IO;
    log_info("%s; stopping the sweep (finished runs are safe; after freeing space, continue "
             "with %s)",
             what && what[0] ? what : "I/O error", continue_with(s));
}

void stop_journal(Sweep *s) {
    stop_io(s, journal_error(s->j));
}

int stopping(const Sweep *s) {
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

void drop_checkpoint(Sweep *s, SweepRun *r) {
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
    if (attempt != r->attempt || sched_abandoned(s->sched, (int)run))
        return; /* abandoned: its files are its new holder's */
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

/* The BLAS core and thread count a run's history was computed with, from its START. */
static void note_start(SweepRun *r, const Event *ev) {
    if (ev->kind != EV_START) return;
    snprintf(r->blas_core, sizeof r->blas_core, "%s", ev->u.start.blas_core);
    r->blas_threads = ev->u.start.blas_threads;
}

/* An attempt that continued a run's history with another BLAS core or thread count gives
 * numbers that neither would alone: /runs keeps the first attempt's (blas_core) and the
 * last's (attempt_blas_core), the journal every attempt's; the log says it at once. */
static void warn_blas_change(const SweepRun *r, const EndEvent *end) {
    if (!r->blas_core[0] || !end->attempt_blas_core[0]) return;
    if (!strcmp(r->blas_core, end->attempt_blas_core) &&
        r->blas_threads == end->attempt_blas_threads)
        return;
    log_warn("run %s continued on BLAS core %s with %d thread(s) after starting on %s with "
             "%d: its numbers match neither setting alone (docs/architecture.md, Determinism)",
             r->pr->name, end->attempt_blas_core, end->attempt_blas_threads, r->blas_core,
             r->blas_threads);
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
            note_start(r, &ev);
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
        log_info("cannot read run %s's history back: %s", r->pr->name, journal_reader_error(from));
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

/* ------------------------------------------------------------------ the view */

/* Called often (after events, when idle): every view_seconds it hands the flushed journal
 * to the view thread, which shows running runs too; rank 0 never waits for a periodic view.
 * force: now, and wait for it (the first and the final view). A view that cannot be
 * written (a full disk) is a warning: the journal holds everything, and the next build or
 * `ablate view OUT.h5` writes it. */
static void rebuild_view(Sweep *s, int force) {
    double t = clock_seconds();
    if (!force && s->calib_busy) return; /* a trial is timed on an otherwise idle machine */
    if (!force && (t - s->last_view < s->view_seconds || view_updater_busy(s->vu))) return;
    char err[ABL_ERR_MAX] = "";
    s->last_view = t;
    struct stat st; /* shared: another process rebuilt it a moment ago */
    if (s->sched->ops->shared && !force && stat(s->o->out_path, &st) == 0 &&
        difftime(time(NULL), st.st_mtime) < s->view_seconds)
        return;
    if (journal_flush(s->j) != 0) {
        stop_journal(s);
        return;
    }
    /* not past a RUN_END that is not synced yet: the view shows a run done only once it is
     * announced */
    view_updater_request(
        s->vu, s->pend_head < s->npend ? s->pend[s->pend_head].before : journal_size(s->j),
        force ? VIEW_FULL : VIEW_LIVE);
    /* keep views to at most ~10% of the time: their thread shares the machine with runs */
    double took = view_updater_last_seconds(s->vu);
    if (s->view_seconds < 10 * took) s->view_seconds = 10 * took;
    if (!force) return;
    s->view_failed = view_updater_wait(s->vu, err) != 0;
    if (s->view_failed) log_warn("could not rebuild %s: %s", s->o->out_path, err);
}

/* The first view, requested and not waited for: rank 0 hands out runs while the view
 * thread builds it (a resume at 10^5 runs spent most of its start-up waiting for it). A
 * joined process builds none unless OUT.h5 does not exist yet: the others' views show the
 * runs already, and a build each at start, one after another under view.lock, made
 * processes joining a large sweep wait in line. */
void start_view(Sweep *s) {
    s->last_view = clock_seconds();
    if (s->sched->ops->shared && access(s->o->out_path, F_OK) == 0) return;
    if (journal_flush(s->j) != 0) {
        stop_journal(s);
        return;
    }
    view_updater_request(s->vu, journal_size(s->j), VIEW_FULL);
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
    run_config(s, r, &a->cfg);
    if (r->calib >= 0) { /* its calibrated budget; -1: the calibration failed (run_exec.h) */
        const CalibGroup *g = &s->calib[r->calib];
        a->cfg.train.calibrated_steps = g->failed || g->steps <= 0 ? -1 : g->steps;
    }
    a->ckpt_every = s->o->checkpoint_every;
    snprintf(a->out_path, sizeof a->out_path, "%s", s->o->out_path);
    const DataIdentity *di = data_guard_of(&s->data, &r->pr->cfg.data);
    if (di) memcpy(a->data_sha256, di->sha256, sizeof a->data_sha256);
    tune_assignment(s, idx, a);
    if (r->ckpt_step > 0) {
        char err[ABL_ERR_MAX], path[ABL_PATH_MAX];
        ckpt_file(s, r, r->ckpt_step, path, sizeof path);
        if (run_ckpt_verify(path, err) == 0) {
            a->resume_step = r->ckpt_step;
        } else {
            log_info("%s; run %s restarts from its start", err, r->pr->name);
            drop_checkpoint(s, r);
        }
    }
}

/* A joined run's PLAN record, before the first other record of it in our journal (a
 * resume_read of the journal keeps only the records of runs planned before them). 0, or -1
 * when the journal failed. */
int plan_now(Sweep *s, uint32_t run) {
    SweepRun *r = &s->runs[run];
    if (!r->plan_later) return 0;
    RunConfig cfg;
    run_config(s, r, &cfg);
    if (journal_append_plan2(s->j, run, r->pr->id, r->pr->name, r->pr->seed, &cfg,
                             r->pr->overrides) != 0)
        return stop_journal(s), -1;
    r->plan_later = 0;
    return 0;
}

/* Journals the attempt's start, and for a resumed one the history it continues. 0, or -1
 * when the journal failed (the sweep is stopping; nothing was handed out). */
static int record_begin(Sweep *s, const RunAssignment *a, int rank, const char *host) {
    SweepRun *r = &s->runs[a->run];
    if (plan_now(s, a->run) != 0) return -1;
    if (journal_append_begin(s->j, a->run, a->attempt, rank, host, a->resume_step) != 0) {
        stop_journal(s);
        return -1;
    }
    if (a->resume_step > 0 ? copy_history(s, r, a->run, a->attempt, a->resume_step) != 0
                           : (refs_free(&r->events), 0))
        return -1;
    /* shared: the checkpoint this attempt continues from, in our own journal, so that a
     * process taking the run over from us needs no other journal than ours */
    if (s->sched->ops->shared && a->resume_step > 0) {
        char path[ABL_PATH_MAX];
        ckpt_file(s, r, a->resume_step, path, sizeof path);
        record_checkpoint(s, a->run, a->attempt, a->resume_step, path);
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
    Event ev; /* a fresh attempt's first batch begins with its START */
    size_t used;
    if (attempt == r->attempt && event_unpack(p, n, &ev, &used) == 0) note_start(r, &ev);
}

/* A run's end once its RUN_END is durable, or is known not to be (durable 0): after a
 * failed write or sync nothing is announced and the run stays unfinished for --resume. */
static void end_recorded(Sweep *s, uint32_t run, uint32_t attempt, const RunResult *res,
                         int durable) {
    SweepRun *r = &s->runs[run];
    const EndEvent *end = &res->end;
    if (attempt == r->attempt) warn_blas_change(r, end);
    r->rank = -1;
    if (end->status == RUN_INTERRUPTED && sched_abandoned(s->sched, (int)run)) {
        sched_cancel(s->sched, (int)run); /* another process has it */
        progress_run_stopped(&s->progress);
        return;
    }
    if (end->status == RUN_INTERRUPTED) {
        if (res->ckpt_step < 0) drop_checkpoint(s, r);
        if (res->io_errno > 0) stop_io(s, end->message);
        progress_run_stopped(&s->progress);
        /* a worker that got its own SIGUSR1, or could not use its checkpoint: the run goes
         * back to the queue (from its checkpoint) while the sweep goes on */
        if (!stopping(s) && durable) {
            if (!tune_paused(s, (int)run, res)) sched_requeue(s->sched, (int)run);
        } else {
            sched_cancel(s->sched, (int)run);
        }
        return;
    }
    if (!durable) {
        progress_run_stopped(&s->progress);
        sched_cancel(s->sched, (int)run);
        return;
    }
    r->finished = 1;
    r->status = end->status;
    refs_free(&r->events);
    drop_checkpoint(s, r);
    progress_run_finished(&s->progress, r->pr->name, end, r->cost);
    sched_ended(s->sched, (int)run, end); /* after the RUN_END is synced */
    rebuild_view(s, 0);
}

/* Announces the runs whose RUN_END the group syncs have made durable, in journal order
 * (wait: all of them, waiting for the syncs); after a failed sync, none: they stay
 * unfinished. */
static void pending_ends(Sweep *s, int wait) {
    while (s->pend_head < s->npend) {
        char err[ABL_ERR_MAX] = "";
        if (wait) group_sync_wait(s->gs, s->pend[s->npend - 1].after, err);
        int64_t durable = group_sync_durable(s->gs, err);
        PendingEnd p = s->pend[s->pend_head];
        if (durable >= 0 && (uint64_t)durable < p.after) return;
        if (++s->pend_head > s->npend / 2) { /* keep it to the runs in flight */
            s->npend -= s->pend_head;
            memmove(s->pend, s->pend + s->pend_head, sizeof *s->pend * (size_t)s->npend);
            s->pend_head = 0;
        }
        if (durable < 0) stop_io(s, err);
        end_recorded(s, p.run, p.attempt, &p.res, durable >= 0);
    }
}

/* A run's end. A finished run is reported done only once its RUN_END is synced: with many
 * ranks by the group sync, later (pending_ends); else here. */
static void record_end(Sweep *s, uint32_t run, uint32_t attempt, int rank, const char *host,
                       const RunResult *res) {
    uint64_t before = journal_size(s->j);
    int written =
        s->stop != STOP_IO && journal_append_end(s->j, run, attempt, rank, host, &res->end) == 0;
    if (written && attempt == s->runs[run].attempt)
        tune_note_end(s, (int)run, rank, host, &res->end);
    if (written && s->gs) {
        if (journal_flush(s->j) == 0 && GROW(s->pend, s->cap_pend, (size_t)s->npend + 1) == 0) {
            uint64_t after = journal_size(s->j);
            s->pend[s->npend++] = (PendingEnd){run, attempt, before, after, *res};
            group_sync_request(s->gs, after);
            return;
        }
        written = 0;
    }
    int durable = written && journal_sync(s->j) == 0;
    if (!durable && s->stop != STOP_IO) stop_journal(s);
    end_recorded(s, run, attempt, res, durable);
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
        log_info("%s: checkpointing 1 run(s) in progress", sweep_signal_name());
    }
    sched_tick(s->sched, clock_seconds());
    if (s->local_run >= 0 && sched_abandoned(s->sched, s->local_run)) return TRAIN_ABORT;
    return stopping(s) ? TRAIN_CHECKPOINT : TRAIN_CONTINUE;
}

static void run_local(Sweep *s, const char *host) {
    calib_local(s);
    VocabCache *vc = vocab_cache_new();
    RunOutput out = {local_send, local_checkpointed, local_poll, s};
    for (;;) {
        if (sweep_signal_usr1() && !stopping(s)) s->stop = STOP_SIGNAL;
        if (stopping(s) || sweep_signal_term() || !sched_more(s->sched)) break;
        int idx = sched_take(s->sched, clock_seconds());
        if (idx < 0) { /* the rest is held by other processes for now; watch them */
            sched_tick(s->sched, clock_seconds());
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

/* What a worker rank is doing, where it is not training a run (busy[rank] >= 0: that run's
 * journal index). */
enum { WORKER_IDLE = -1, WORKER_NOT_READY = -2, WORKER_CALIBRATING = -3 };

static void send_stop(int rank, int32_t mode) {
    MPI_Send(&mode, 1, MPI_INT32_T, rank, TAG_STOP, MPI_COMM_WORLD);
}

/* Every worker rank, once it says it is ready, is told to exit: the sweep ends before any
 * run was handed out (an invalid spec, a refused output, no memory for the dispatch). */
static void stop_workers_unstarted(int nranks) {
    for (int r = 1; r < nranks; r++) {
        char host[HOST_MAX];
        MPI_Recv(host, HOST_MAX, MPI_CHAR, r, TAG_READY, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        send_stop(r, STOP_EXIT);
    }
}

/* Worker idle time (reported for replicate: sweeps, where the rule may leave workers
 * waiting on a look): when each idle worker became idle (Sweep.idle_since); and when each
 * busy one was given its run (busy_since), for the runs' typical length (rank 0's poll
 * interval, run_mpi). */
static void worker_idle(Sweep *s, int rank) {
    double now = clock_seconds();
    if (s->idle_since) s->idle_since[rank] = now;
    if (s->busy_since && s->busy_since[rank] > 0) { /* a moving mean over the last ~8 runs */
        double run = now - s->busy_since[rank];
        s->run_seconds = s->run_seconds > 0 ? s->run_seconds + (run - s->run_seconds) / 8 : run;
        s->busy_since[rank] = 0;
    }
}

static void worker_busy(Sweep *s, int rank) {
    double now = clock_seconds();
    if (s->idle_since && s->idle_since[rank] > 0)
        s->idle_worker_seconds += now - s->idle_since[rank];
    if (s->idle_since) s->idle_since[rank] = 0;
    if (s->busy_since) s->busy_since[rank] = now;
}

/* Hands the next queued run to an idle worker; returns 1 if it did. */
static int assign_next(Sweep *s, int rank, const char *host, int *busy) {
    int idx = sched_take(s->sched, clock_seconds());
    if (idx < 0) return 0;
    worker_busy(s, rank);
    RunAssignment a;
    prepare_assignment(s, idx, &a);
    if (record_begin(s, &a, rank, host) != 0) return 0;
    /* the worker received its previous one long ago (it has ended that run since) */
    MPI_Wait(&s->assign_req[rank], MPI_STATUS_IGNORE);
    s->assign_out[rank] = a;
    MPI_Isend(&s->assign_out[rank], (int)sizeof a, MPI_BYTE, rank, TAG_ASSIGN, MPI_COMM_WORLD,
              &s->assign_req[rank]);
    busy[rank] = (int)a.run;
    return 1;
}

static void run_mpi(Sweep *s, int nranks) {
    /* each worker rank: the journal index of its run, or a WORKER_* state */
    int *busy = malloc(sizeof(int) * (size_t)nranks);
    char(*hosts)[HOST_MAX] = calloc((size_t)nranks, HOST_MAX);
    s->assign_out = calloc((size_t)nranks, sizeof *s->assign_out);
    s->assign_req = malloc(sizeof *s->assign_req * (size_t)nranks);
    for (int r = 0; s->assign_req && r < nranks; r++)
        s->assign_req[r] = MPI_REQUEST_NULL;
    uint8_t *buf = NULL;
    size_t cap = 0;
    int n_busy = 0, asked = 0;
    /* back off while nothing arrives, so rank 0 leaves the CPU to workers: 20 us doubling to
     * 10 ms, at most 1% of a typical run (an END waits 1% of a run at most) and 1 ms while a
     * group sync is due (its runs are announced when it returns) */
    Backoff idle = BACKOFF_INIT(20000, 10000000);
    /* the idle and run times are reports: without their tables they go unmeasured */
    s->idle_since = calloc((size_t)nranks, sizeof *s->idle_since);
    s->busy_since = calloc((size_t)nranks, sizeof *s->busy_since);
    if (!busy || !hosts || !s->assign_out || !s->assign_req) { /* nothing dispatched yet */
        stop_io(s, "out of memory for the table of worker ranks");
        stop_workers_unstarted(nranks);
        free(busy);
        free(hosts);
        free(s->assign_out);
        free(s->assign_req);
        return;
    }
    for (int r = 0; r < nranks; r++)
        busy[r] = WORKER_NOT_READY;
    char gerr[ABL_ERR_MAX]; /* without the thread, each RUN_END is synced in line */
    s->gs = group_sync_start(journal_fd(s->j), s->journal_path, gerr);
    for (;;) {
        if (sweep_signal_term()) break;
        pending_ends(s, 0);
        rebuild_view(s, 0);
        if (sweep_signal_usr1() && !stopping(s)) {
            s->stop = STOP_SIGNAL;
            log_info("%s: checkpointing %d run(s) in progress", sweep_signal_name(), n_busy);
        }
        if (stopping(s) && !asked) { /* ask once; a worker between runs has nothing to save */
            asked = 1;
            for (int r = 1; r < nranks; r++)
                if (busy[r] >= 0) send_stop(r, STOP_CHECKPOINT);
        }
        /* runs given to another process meanwhile are stopped where they train */
        sched_tick(s->sched, clock_seconds());
        for (int r = 1; r < nranks; r++)
            if (busy[r] >= 0 && s->runs[busy[r]].rank == r && sched_abandoned(s->sched, busy[r])) {
                send_stop(r, STOP_ABANDON);
                s->runs[busy[r]].rank = -2; /* asked once */
            }
        int cg, ctrial;
        if (!stopping(s) && calib_next(s, &cg, &ctrial) == 0) {
            /* calibration first, one trial at a time: every other rank sleeps meanwhile */
            for (int r = 1; r < nranks && !s->calib_busy; r++)
                if (busy[r] == WORKER_IDLE) {
                    RunAssignment a;
                    calib_assignment(s, cg, ctrial, &a);
                    worker_busy(s, r);
                    MPI_Send(&a, (int)sizeof a, MPI_BYTE, r, TAG_CALIB, MPI_COMM_WORLD);
                    busy[r] = WORKER_CALIBRATING;
                    s->calib_busy = 1;
                    n_busy++;
                }
        } else {
            for (int r = 1; r < nranks && !stopping(s); r++)
                if (busy[r] == WORKER_IDLE && sched_more(s->sched))
                    n_busy += assign_next(s, r, hosts[r], busy);
        }
        if (n_busy == 0 && s->pend_head < s->npend) {
            /* nothing in flight, and runs ended whose RUN_END is not durable yet: nothing can
             * happen here before their sync, so wait for it rather than poll (the group sync's
             * test hook, which waits for rank 0 to go on or wait, needs this when one group
             * holds the sweep's last RUN_ENDs) */
            pending_ends(s, 1);
            continue;
        }
        if (n_busy == 0 && s->pend_head == s->npend && (stopping(s) || !sched_more(s->sched))) {
            int ready = 1;
            for (int r = 1; r < nranks; r++)
                ready &= busy[r] != WORKER_NOT_READY;
            if (ready || stopping(s)) break;
        }
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        if (!flag) {
            long cap = backoff_cap_share(&idle, s->run_seconds, 100);
            if (s->pend_head < s->npend && (cap == 0 || cap > 1000000)) cap = 1000000;
            backoff_sleep(&idle, cap);
            continue;
        }
        backoff_reset(&idle);
        int n;
        MPI_Get_count(&st, MPI_BYTE, &n);
        if (GROW(buf, cap, n < 0 ? 0 : n) != 0) {
            /* the message cannot be received, so its sender cannot be stopped in order:
             * the journal is made durable and the job ends as a kill would end it */
            log_info("out of memory for a %d-byte message from rank %d; the sweep ends here "
                     "(finished runs are safe; continue with %s)",
                     n, st.MPI_SOURCE, continue_with(s));
            if (s->j) journal_sync(s->j);
            MPI_Abort(MPI_COMM_WORLD, SWEEP_EXIT_STOPPED);
        }
        MPI_Recv(buf, n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int src = st.MPI_SOURCE;
        if (st.MPI_TAG == TAG_READY) {
            snprintf(hosts[src], HOST_MAX, "%.*s", n, (const char *)buf);
            busy[src] = WORKER_IDLE;
            worker_idle(s, src);
        } else if (st.MPI_TAG == TAG_EVENTS && n >= 8) {
            uint32_t run, attempt;
            memcpy(&run, buf, 4);
            memcpy(&attempt, buf + 4, 4);
            record_events(s, run, attempt, buf + 8, (size_t)n - 8);
        } else if (st.MPI_TAG == TAG_CALIB_DONE && n == (int)sizeof(WorkerCalib)) {
            WorkerCalib wc;
            memcpy(&wc, buf, sizeof wc);
            wc.message[sizeof wc.message - 1] = '\0';
            wc.t.host[sizeof wc.t.host - 1] = wc.t.blas_core[sizeof wc.t.blas_core - 1] = '\0';
            wc.t.utc[sizeof wc.t.utc - 1] = '\0';
            busy[src] = WORKER_IDLE;
            n_busy--;
            s->calib_busy = 0;
            worker_idle(s, src);
            for (int g = 0; g < s->n_calib; g++)
                if (s->calib[g].rep == (int)wc.run && wc.trial >= 1 &&
                    (int)wc.trial <= s->calib[g].k)
                    calib_record(s, g, (int)wc.trial, wc.ok, &wc.t, wc.message);
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
                ev.kind = EV_END;
                event_end_unknown(&ev.u.end, RUN_FAILED, "malformed end message");
            }
            res.end = ev.u.end;
            we.host[sizeof we.host - 1] = '\0';
            busy[src] = WORKER_IDLE;
            n_busy--;
            worker_idle(s, src);
            /* keep the worker busy while the finished run is synced (and the view rebuilt) */
            if (!stopping(s) && !sweep_signal_usr1() && sched_more(s->sched))
                n_busy += assign_next(s, src, hosts[src], busy);
            if (we.run < (uint32_t)s->n) record_end(s, we.run, we.attempt, we.rank, we.host, &res);
            /* a run requeued by record_end goes to the first idle worker next time round */
        }
    }
    if (s->gs) {
        pending_ends(s, 1);
        group_sync_stop(s->gs);
        s->gs = NULL;
    }
    if (!sweep_signal_term()) {
        for (int r = 1; r < nranks; r++)
            send_stop(r, STOP_EXIT);
        /* every worker has received its last assignment before its STOP (in order) */
        MPI_Waitall(nranks, s->assign_req, MPI_STATUSES_IGNORE);
        free(s->assign_out);
    } /* else workers may be gone: the sends' buffer stays (MPI may still read it) */
    free(s->assign_req);
    s->assign_out = NULL;
    s->assign_req = NULL;
    for (int r = 1; r < nranks; r++)
        if (busy[r] == WORKER_IDLE) worker_busy(s, r);
    free(s->idle_since);
    free(s->busy_since);
    s->idle_since = s->busy_since = NULL;
    free(buf);
    free(busy);
    free(hosts);
}

/* ------------------------------------------------------------------ setup */

char *sweep_gather_hostnames(int rank, int nranks) {
    char host[HOST_MAX] = "";
    gethostname(host, sizeof host - 1);
    char *all = rank == 0 ? calloc((size_t)nranks, HOST_MAX) : NULL;
    if (rank == 0 && !all) { /* the gather needs it on every rank's behalf: nothing begun yet */
        log_cmd("out of memory for the host names of %d ranks", nranks);
        MPI_Abort(MPI_COMM_WORLD, SWEEP_EXIT_USAGE);
    }
    MPI_Gather(host, HOST_MAX, MPI_CHAR, all, HOST_MAX, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank != 0) return NULL;
    /* distinct hosts, comma-separated; NULL (none named) when out of memory */
    char *out = calloc((size_t)nranks, 66);
    for (int r = 0; out && r < nranks; r++) {
        const char *h = all + HOST_MAX * r;
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = strcmp(all + HOST_MAX * q, h) == 0;
        if (seen) continue;
        if (out[0]) strcat(out, ",");
        strcat(out, h);
    }
    free(all);
    return out;
}

/* The journal's SWEEP_END with this status and the time, synced; 0, or -1 (the journal
 * failed: the sweep is then stopping for I/O). Nothing when it already is. */
static int sweep_end(Sweep *s, const char *status) {
    if (s->stop == STOP_IO) return -1;
    char t[64];
    env_info_now(t, sizeof t);
    const char *kv[] = {"end_time", t, "status", status};
    if (journal_append_sweep_end(s->j, kv, 2) != 0 || journal_sync(s->j) != 0) {
        stop_journal(s);
        return -1;
    }
    return 0;
}

/* The exit status (sweep.h) and the last line of the log. */
static int finish(Sweep *s) {
    int failed = 0, finished = 0, n = 0;
    for (int i = 0; i < s->n; i++) {
        if (!s->runs[i].finished) sched_cancel(s->sched, i); /* whoever takes it next */
        if (s->runs[i].dead) continue;
        n++;
        finished += s->runs[i].finished;
        failed += s->runs[i].finished && s->runs[i].status == RUN_FAILED;
    }
    sweep_end(s, finished < n ? "stopped" : failed ? "complete_with_failures" : "complete");
    if (s->stop != STOP_IO && s->sched->ops->shared) {
        last_joined_view(s);
    } else if (s->stop != STOP_IO) {
        rebuild_view(s, 1);
    } else { /* what the journal holds on disk, if there is room for it */
        char err[ABL_ERR_MAX];
        view_updater_request(s->vu, journal_written_size(s->j), VIEW_FULL);
        if (view_updater_wait(s->vu, err) != 0)
            log_warn("could not rebuild %s: %s", s->o->out_path, err);
    }
    if (s->j && journal_close(s->j) != 0 && s->stop != STOP_IO)
        stop_io(s, "cannot sync the journal");
    s->j = NULL;
    /* a SIGUSR1 that came once every run had ended stops nothing: the sweep is complete */
    if (finished < n || s->stop == STOP_IO) {
        log_info("stopped with %d of %d runs finished; continue with %s", finished, n,
                 continue_with(s));
        return SWEEP_EXIT_STOPPED;
    }
    if (s->view_failed) {
        log_info("all %d runs finished (%d failed), but %s could not be written; "
                 "`ablate view %s` writes it from the journal",
                 n, failed, s->o->out_path, s->o->out_path);
        return SWEEP_EXIT_FAILED;
    }
    if (s->spec.replicate.on) replicate_summary(s, n);
    log_info("all %d runs finished (%d failed) -> %s", n, failed, s->o->out_path);
    return failed ? SWEEP_EXIT_FAILED : SWEEP_EXIT_OK;
}

int sweep_rank0(const SweepOptions *o, int nranks) {
    Sweep s;
    memset(&s, 0, sizeof s);
    s.o = o;
    s.local_run = -1;
    s.view_seconds = o->view_interval > 0 ? o->view_interval : 30.0;
    ResumeState rs = {0};
    char *hostnames = sweep_gather_hostnames(0, nranks);
    int rc = sweep_open(&s, &rs, nranks, hostnames ? hostnames : "");
    if (rc >= 0) { /* refused, or nothing to do: no worker was given anything */
        stop_workers_unstarted(nranks);
        if (s.j) journal_close(s.j);
        goto out;
    }
    if (nranks > 1)
        run_mpi(&s, nranks);
    else
        run_local(&s, hostnames ? hostnames : "");
    progress_finish(&s.progress);

    if (sweep_signal_term()) {
        /* finished runs are already durable; flush what else there is, and say in the
         * journal that the sweep stopped (a reader can tell it from a crash) */
        if (sweep_end(&s, "stopped") != 0 && s.j) journal_sync(s.j);
        log_info("%s: stopped; continue with %s", sweep_signal_name(), continue_with(&s));
        journal_close(s.j);
        s.j = NULL;
        rc = SWEEP_EXIT_STOPPED;
        s.stop = STOP_SIGNAL;
        goto out;
    }
    rc = finish(&s);
out:
    if (s.history) journal_reader_close(s.history);
    for (int i = 0; i < s.n; i++) {
        refs_free(&s.runs[i].events);
        tune_free_end(&s.runs[i]);
    }
    view_updater_stop(s.vu);
    sched_close(s.sched);
    free(hostnames);
    free(s.runs);
    free(s.cost);
    free(s.latest);
    contrasts_free(&s.contrasts);
    free(s.pend);
    calib_free(&s);
    resume_free(&rs);
    data_guard_free(&s.data);
    plan_free(&s.plan);
    spec_free(&s.spec);
    return rc;
}
