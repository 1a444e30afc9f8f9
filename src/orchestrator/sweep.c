/* Rank 0 of `ablate run`: plan, reconcile with the journal, dispatch, journal, rebuild. */
#include "sweep.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../worker/blas_env.h"
#include "../worker/clock.h"
#include "env_info.h"
#include "event_codec.h"
#include "h5view.h"
#include "journal.h"
#include "plan.h"
#include "plan_cost.h"
#include "protocol.h"
#include "resume.h"
#include "run_exec.h"
#include "run_id.h"
#include "sweep_progress.h"
#include "sweep_signals.h"
#include "view_updater.h"

/* One run of the sweep, indexed by its journal index. */
typedef struct {
    const PlannedRun *pr;
    RunConfig cfg; /* vocab resolved */
    double cost;   /* FLOPs, or a time budget's seconds at 50 GFLOP/s */
    int finished;
    RunStatus status;
    uint32_t attempt;
    int64_t ckpt_step;
} SweepRun;

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
    ViewUpdater *vu; /* builds OUT.h5 on its own thread */
    int io_failed;
} Sweep;

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* --force: remove OUT.h5 and OUT.h5.d (journal, checkpoints, weights). */
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
    snprintf(path, sizeof path, "%s/journal", dir);
    unlink(path);
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

/* Maps the new plan onto the journal: old runs keep their indices, new ones are appended.
 * A plan that drops or changes a journaled run is refused. */
static int reconcile(Sweep *s, const ResumeState *rs, char err[ABL_ERR_MAX]) {
    int n_new = 0;
    int *fresh = calloc((size_t)s->plan.n_runs + 1, sizeof *fresh);
    if (!fresh) return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    for (int i = 0; i < rs->n_runs; i++) {
        if (!rs->runs[i].id[0]) continue;
        if (plan_find_id(&s->plan, rs->runs[i].id) < 0) {
            snprintf(err, ABL_ERR_MAX,
                     "%s: cannot resume: the spec no longer plans run '%s' (id %s); resuming with "
                     "a changed spec may only add runs (more seeds, new variants). Use a new "
                     "output file, or --force to start over",
                     s->o->spec_path, rs->runs[i].name, rs->runs[i].id);
            free(fresh);
            return -1;
        }
    }
    s->n = rs->n_runs;
    for (int i = 0; i < s->plan.n_runs; i++) {
        int known = 0;
        for (int k = 0; k < rs->n_runs && !known; k++)
            known = strcmp(rs->runs[k].id, s->plan.runs[i].id) == 0;
        if (!known) fresh[n_new++] = i;
    }
    s->runs = calloc((size_t)(s->n + n_new) + 1, sizeof *s->runs);
    if (!s->runs) return free(fresh), snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    for (int k = 0; k < rs->n_runs; k++) {
        int p = plan_find_id(&s->plan, rs->runs[k].id);
        if (p < 0) continue;
        SweepRun *r = &s->runs[k];
        r->pr = &s->plan.runs[p];
        r->cfg = s->cost[p].cfg;
        r->cost = s->cost[p].c.seconds > 0 ? s->cost[p].c.seconds * 50e9 : s->cost[p].c.flops;
        r->finished = rs->runs[k].finished && rs->runs[k].status != RUN_FAILED;
        r->status = rs->runs[k].status;
        r->attempt = rs->runs[k].attempt;
        r->ckpt_step = rs->runs[k].ckpt_step;
    }
    for (int i = 0; i < n_new; i++) {
        int p = fresh[i];
        SweepRun *r = &s->runs[s->n + i];
        r->pr = &s->plan.runs[p];
        r->cfg = s->cost[p].cfg;
        r->cost = s->cost[p].c.seconds > 0 ? s->cost[p].c.seconds * 50e9 : s->cost[p].c.flops;
        /* the resolved config (model.vocab_size from the data) is what the file shows; the
         * id stays the hash of the config as planned */
        if (journal_append_plan2(s->j, (uint32_t)(s->n + i), r->pr->id, r->pr->name, r->pr->seed,
                                 &r->cfg, r->pr->overrides) != 0)
            s->io_failed = 1;
    }
    s->n += n_new;
    free(fresh);
    return 0;
}

/* Called often (after events, when idle): every view_seconds it hands the flushed journal
 * to the view thread, which shows running runs too; rank 0 never waits for a periodic view.
 * force: now, and wait for it (the first and the final view). */
static void rebuild_view(Sweep *s, int force) {
    double t = clock_seconds();
    if (!force && (t - s->last_view < s->view_seconds || view_updater_busy(s->vu))) return;
    char err[ABL_ERR_MAX] = "";
    s->last_view = t;
    int rc = journal_flush(s->j);
    if (rc == 0) {
        view_updater_request(s->vu, journal_size(s->j));
        /* keep views to at most ~10% of the time: their thread shares the machine with runs */
        double took = view_updater_last_seconds(s->vu);
        if (s->view_seconds < 10 * took) s->view_seconds = 10 * took;
        if (!force) return;
        rc = view_updater_wait(s->vu, err);
    }
    if (rc != 0) {
        fprintf(stderr, "ablate: warning: could not rebuild %s: %s\n", s->o->out_path,
                journal_error(s->j)[0] ? journal_error(s->j) : err);
        if (force) s->io_failed = 1; /* the final view must exist; a periodic one may wait */
    }
}

static void prepare_assignment(Sweep *s, int idx, RunAssignment *a) {
    SweepRun *r = &s->runs[idx];
    memset(a, 0, sizeof *a);
    a->run = (uint32_t)idx;
    a->attempt = ++r->attempt;
    a->seed = r->pr->seed;
    memcpy(a->id, r->pr->id, sizeof a->id);
    a->cfg = r->cfg;
    run_ckpt_path(s->o->out_path, r->pr->id, a->ckpt_path, sizeof a->ckpt_path);
    run_weights_path(s->o->out_path, r->pr->id, a->weights_path, sizeof a->weights_path);
    a->resume_step = r->ckpt_step > 0 && exists(a->ckpt_path) ? r->ckpt_step : 0;
}

static void record_begin(Sweep *s, const RunAssignment *a, int rank, const char *host) {
    if (journal_append_begin(s->j, a->run, a->attempt, rank, host, a->resume_step) != 0)
        s->io_failed = 1;
    progress_run_started(&s->progress);
}

static void record_events(Sweep *s, uint32_t run, uint32_t attempt, const uint8_t *p, size_t n) {
    if (journal_append_events(s->j, run, attempt, p, n) != 0) s->io_failed = 1;
}

/* A run's end: finished runs are synced before they are reported done. */
static void record_end(Sweep *s, uint32_t run, uint32_t attempt, int rank, const char *host,
                       const EndEvent *end, int64_t ckpt_step) {
    SweepRun *r = &s->runs[run];
    if (end->status == RUN_INTERRUPTED) {
        if (ckpt_step > 0) {
            char path[ABL_PATH_MAX];
            run_ckpt_path(s->o->out_path, r->pr->id, path, sizeof path);
            if (journal_append_checkpoint(s->j, run, attempt, ckpt_step, path) != 0)
                s->io_failed = 1;
            r->ckpt_step = ckpt_step;
        }
        /* an interrupted end marks the attempt over (the view shows "interrupted") */
        if (journal_append_end(s->j, run, attempt, rank, host, end) != 0 || journal_sync(s->j) != 0)
            s->io_failed = 1;
        progress_run_stopped(&s->progress);
        return;
    }
    if (journal_append_end(s->j, run, attempt, rank, host, end) != 0 || journal_sync(s->j) != 0)
        s->io_failed = 1;
    r->finished = 1;
    r->status = end->status;
    progress_run_finished(&s->progress, r->pr->name, end, r->cost);
    rebuild_view(s, 0);
}

/* ------------------------------------------------------------------ one rank */

typedef struct {
    Sweep *s;
} LocalCtx;

static int local_send(void *ctx, const RunAssignment *a, const uint8_t *p, size_t n) {
    record_events(((LocalCtx *)ctx)->s, a->run, a->attempt, p, n);
    rebuild_view(((LocalCtx *)ctx)->s, 0);
    return 0;
}

static TrainPoll local_poll(void *ctx) {
    (void)ctx;
    if (sweep_signal_term()) return TRAIN_ABORT;
    if (sweep_signal_usr1()) return TRAIN_CHECKPOINT;
    return TRAIN_CONTINUE;
}

static void run_local(Sweep *s, const char *host) {
    VocabCache *vc = vocab_cache_new();
    LocalCtx lc = {s};
    RunOutput out = {local_send, local_poll, &lc};
    while (s->next < s->n_queue && !sweep_signal_usr1() && !sweep_signal_term()) {
        RunAssignment a;
        prepare_assignment(s, s->queue[s->next++], &a);
        record_begin(s, &a, 0, host);
        EndEvent end;
        int64_t ckpt = 0;
        run_execute(&a, vc, &out, &end, &ckpt);
        if (end.status == RUN_INTERRUPTED && sweep_signal_term()) break;
        record_end(s, a.run, a.attempt, 0, host, &end, ckpt);
    }
    vocab_cache_free(vc);
}

/* ------------------------------------------------------------------ many ranks */

static void send_stop(int rank, int32_t mode) {
    MPI_Send(&mode, 1, MPI_INT32_T, rank, TAG_STOP, MPI_COMM_WORLD);
}

/* Hands the next queued run to an idle worker; returns 1. */
static int assign_next(Sweep *s, int rank, const char *host, int *busy) {
    RunAssignment a;
    prepare_assignment(s, s->queue[s->next++], &a);
    record_begin(s, &a, rank, host);
    MPI_Send(&a, (int)sizeof a, MPI_BYTE, rank, TAG_ASSIGN, MPI_COMM_WORLD);
    busy[rank] = (int)a.run;
    return 1;
}

static void run_mpi(Sweep *s, int nranks) {
    int *busy = malloc(sizeof(int) * (size_t)nranks); /* run index, -1 idle, -2 not ready */
    char(*hosts)[64] = calloc((size_t)nranks, 64);
    uint8_t *buf = NULL;
    int cap = 0, n_busy = 0, stopping = 0;
    long idle_ns = 0; /* back off while nothing arrives, so rank 0 leaves the CPU to workers */
    for (int r = 0; r < nranks; r++)
        busy[r] = -2;
    for (;;) {
        if (sweep_signal_term()) break;
        rebuild_view(s, 0);
        if (sweep_signal_usr1() && !stopping) {
            stopping = 1;
            for (int r = 1; r < nranks; r++)
                if (busy[r] >= 0) send_stop(r, STOP_CHECKPOINT);
            fprintf(stderr, "\nablate: SIGUSR1: checkpointing %d run(s) in progress\n", n_busy);
        }
        for (int r = 1; r < nranks && !stopping; r++)
            if (busy[r] == -1 && s->next < s->n_queue) n_busy += assign_next(s, r, hosts[r], busy);
        if (n_busy == 0 && (stopping || s->next >= s->n_queue)) {
            int ready = 1;
            for (int r = 1; r < nranks; r++)
                ready &= busy[r] != -2;
            if (ready || stopping) break;
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
        } else if (st.MPI_TAG == TAG_END && n >= (int)sizeof(WorkerEnd)) {
            WorkerEnd we;
            memcpy(&we, buf, sizeof we);
            Event ev;
            size_t used;
            if (event_unpack(buf + sizeof we, (size_t)n - sizeof we, &ev, &used) != 0 ||
                ev.kind != EV_END) {
                memset(&ev, 0, sizeof ev);
                ev.u.end.status = RUN_FAILED;
                snprintf(ev.u.end.message, sizeof ev.u.end.message, "malformed end message");
            }
            we.host[sizeof we.host - 1] = '\0';
            busy[src] = -1;
            n_busy--;
            /* keep the worker busy while the finished run is synced (and the view rebuilt) */
            if (!stopping && !sweep_signal_usr1() && s->next < s->n_queue)
                n_busy += assign_next(s, src, hosts[src], busy);
            record_end(s, we.run, we.attempt, we.rank, we.host, &ev.u.end, we.ckpt_step);
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

static int open_journal(Sweep *s, ResumeState *rs, char err[ABL_ERR_MAX]) {
    const SweepOptions *o = s->o;
    char dir[ABL_PATH_MAX];
    if (journal_path_for(o->out_path, s->journal_path, sizeof s->journal_path) != 0 ||
        journal_dir_for(o->out_path, dir, sizeof dir) != 0) {
        snprintf(err, ABL_ERR_MAX, "%s: output path too long", o->out_path);
        return -1;
    }
    int have_journal = exists(s->journal_path);
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
    if (o->force && !o->resume && remove_outputs(o->out_path, err) != 0) return -1;
    memset(rs, 0, sizeof *rs);
    if (o->resume && have_journal) {
        JournalScan scan;
        if (resume_read(s->journal_path, rs, err) != 0) return -1;
        s->j = journal_open_append(s->journal_path, &scan, err);
        if (s->j && scan.dropped_bytes)
            fprintf(stderr, "ablate: dropped a torn journal tail of %llu bytes\n",
                    (unsigned long long)scan.dropped_bytes);
    } else {
        if (journal_ensure_dir(o->out_path, err) != 0) return -1;
        s->j = journal_create(s->journal_path, err);
    }
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
    if (journal_append_header(s->j, kv, n) != 0) s->io_failed = 1;
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

int sweep_rank0(const SweepOptions *o, int nranks) {
    Sweep s;
    memset(&s, 0, sizeof s);
    s.o = o;
    s.view_seconds = o->view_interval > 0 ? o->view_interval : 30.0;
    char err[ABL_ERR_MAX];
    ResumeState rs = {0};
    int rc = 2;
    char *hostnames = sweep_gather_hostnames(0, nranks);
    blas_set_threads(); /* one BLAS thread, as on workers: identical results on any rank count */
    /* Validate everything before any file is touched. */
    if (spec_load(&s.spec, o->spec_path, o->sets, o->n_sets, err) != 0 ||
        plan_build(&s.spec, &s.plan, err) != 0 || !(s.cost = plan_cost_compute(&s.plan, err))) {
        fprintf(stderr, "%s\n", err);
        goto stop_workers;
    }
    rc = 1;
    if (open_journal(&s, &rs, err) != 0 || run_id_adopt(&s.plan, &rs) < 0 ||
        reconcile(&s, &rs, err) != 0) {
        fprintf(stderr, "ablate run: %s\n", err);
        rc = 2;
        goto stop_workers;
    }
    if (!(s.vu = view_updater_start(s.journal_path, o->out_path, err))) {
        fprintf(stderr, "ablate run: %s\n", err);
        goto stop_workers;
    }
    write_header(&s, nranks, hostnames ? hostnames : "");
    s.queue = malloc(sizeof(int) * (size_t)(s.n + 1));
    int done_before = 0;
    for (int i = 0; i < s.n; i++) {
        if (s.runs[i].finished)
            done_before++;
        else
            s.queue[s.n_queue++] = i;
    }
    g_sort = &s;
    qsort(s.queue, (size_t)s.n_queue, sizeof(int), cmp_queue);
    if (journal_sync(s.j) != 0) s.io_failed = 1;
    rebuild_view(&s, 1);
    fprintf(stderr, "ablate: %d runs planned (%d already finished), %d to run on %d %s -> %s\n",
            s.n, done_before, s.n_queue, nranks > 1 ? nranks - 1 : 1,
            nranks > 1 ? "worker rank(s)" : "process", o->out_path);
    double total_cost = 0;
    for (int i = 0; i < s.n_queue; i++)
        total_cost += s.runs[s.queue[i]].cost;
    progress_init(&s.progress, s.n, done_before, total_cost);

    if (nranks > 1)
        run_mpi(&s, nranks);
    else
        run_local(&s, hostnames ? hostnames : "");
    progress_finish(&s.progress);

    if (sweep_signal_term()) {
        journal_sync(s.j); /* finished runs are already durable; flush what else there is */
        fprintf(stderr, "ablate: SIGTERM: stopped; continue with --resume\n");
        journal_close(s.j);
        rc = 143;
        goto out;
    }
    int failed = 0, finished = 0;
    for (int i = 0; i < s.n; i++) {
        finished += s.runs[i].finished;
        failed += s.runs[i].finished && s.runs[i].status == RUN_FAILED;
    }
    /* complete, or stopped (SIGUSR1) with runs left for --resume */
    char t[64];
    env_info_now(t, sizeof t);
    const char *kv[] = {"end_time", t, "status",
                        finished < s.n ? "stopped"
                                       : (failed ? "complete_with_failures" : "complete")};
    if (journal_append_sweep_end(s.j, kv, 2) != 0) s.io_failed = 1;
    if (journal_sync(s.j) != 0) s.io_failed = 1;
    rebuild_view(&s, 1);
    if (journal_close(s.j) != 0) s.io_failed = 1;
    s.j = NULL;
    if (finished < s.n)
        fprintf(stderr, "ablate: stopped with %d of %d runs finished; continue with --resume\n",
                finished, s.n);
    else
        fprintf(stderr, "ablate: all %d runs finished (%d failed) -> %s\n", s.n, failed,
                o->out_path);
    rc = s.io_failed || failed ? 1 : 0;
    goto out;
stop_workers:
    for (int r = 1; r < nranks; r++) {
        char host[64];
        MPI_Recv(host, 64, MPI_CHAR, r, TAG_READY, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        send_stop(r, STOP_EXIT);
    }
    if (s.j) journal_close(s.j);
out:
    view_updater_stop(s.vu);
    free(hostnames);
    free(s.queue);
    free(s.runs);
    free(s.cost);
    resume_free(&rs);
    plan_free(&s.plan);
    spec_free(&s.spec);
    return rc;
}
