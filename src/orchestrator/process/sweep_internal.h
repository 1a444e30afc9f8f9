/* Rank 0 of a sweep, inside: the state sweep.c's dispatch loop and its records share with
 * the files that set a sweep up and serve its features. Not a public interface (sweep.h is):
 * only src/orchestrator/process/sweep*.c include it.
 *   sweep.c            the dispatch loop (one rank, many ranks), the records of runs, the view
 *   sweep_open.c       opening the journal: new, --force, --resume (reconcile, damage), the
 *                      scheduler's callbacks, the header, the joined process's last view
 *   sweep_calib.c      calibrated fixed time: the trials, timed before any run
 *   sweep_replicate.c  a replicate: sweep: its rule unchanged on resume, decisions, not_needed */
#ifndef ABLATE_ORCH_SWEEP_INTERNAL_H
#define ABLATE_ORCH_SWEEP_INTERNAL_H

#include <mpi.h>

#include "orchestrator/plan/contrast.h"
#include "orchestrator/plan/plan.h"
#include "orchestrator/plan/plan_cost.h"
#include "orchestrator/record/data_guard.h"
#include "orchestrator/record/journal.h"
#include "orchestrator/record/journal_calibration.h"
#include "orchestrator/record/journal_replicate.h"
#include "orchestrator/record/resume.h"
#include "orchestrator/record/view_updater.h"
#include "orchestrator/schedule/scheduler.h"
#include "group_sync.h"
#include "run_exec.h"
#include "sweep.h"
#include "sweep_progress.h"

/* One run of the sweep, indexed by its journal index. */
typedef struct {
    const PlannedRun *pr; /* its config: run_config() resolves model.vocab_size */
    double cost;          /* FLOPs, or a time budget's seconds at 50 GFLOP/s */
    int finished;
    RunStatus status;
    uint32_t attempt;
    int64_t ckpt_step;      /* the last journaled checkpoint (0: none) */
    uint32_t ckpt_attempt;  /* the attempt that wrote it */
    int dead;               /* a journal index whose PLAN record was lost (see resume) */
    EventRecordRefs events; /* EVENTS records, while the run may still need its history */
    JournalReader *hist;    /* the journal events points into: another process's (a run
                               taken over from it) or NULL for ours */
    int rank;               /* where it is being trained (-1: nowhere; -2: asked to stop) */
    /* the BLAS its history was computed with (its START event; "" unknown): an attempt
     * that continues it with another is warned about */
    char blas_core[sizeof(((StartEvent *)0)->blas_core)];
    int blas_threads;
    /* of its RUN_END from an earlier session (a replicate: sweep decides from these) */
    double final_val_loss, final_test_loss, train_seconds;
    int unstable;
    int calib;         /* its configuration's CalibGroup (train.calibrate > 0), else -1 */
    int plan_later;    /* joined: its PLAN record is journaled when it is first trained here */
    int64_t stop_step; /* tune: the rung step its attempt stops at (0: none) */
    /* tune: the RUN_END of the attempt that stopped at its rung (where it ran, its figures),
     * which the run's end there repeats (host_tune_stopped); NULL: none */
    struct RungEnd *rung_end;
} SweepRun;
/* Rank 0 keeps one per planned run for the whole sweep: at 10^5 runs every 100 bytes here
 * are 10 MB (a copy of the run's config once made it 1.7 KB) */
_Static_assert(sizeof(SweepRun) <= 256, "SweepRun: keep rank 0's per-run record small");

/* A finished run's RUN_END written, waiting for the group sync that covers it before the
 * run is announced (group_sync.h). */
typedef struct {
    uint32_t run, attempt;
    uint64_t before, after; /* journal offsets around its RUN_END */
    RunResult res;
} PendingEnd;

/* Calibrated fixed time (worker/calibrate.h): one per configuration whose unfinished runs
 * have train.calibrate > 0. Its trials are timed before any run trains, one at a time. */
typedef struct {
    char group[RUN_ID_CHARS];        /* run_id_hash without the seed (/runs' group) */
    char config[JOURNAL_CONFIG_MAX]; /* its first run's name without the seed segment */
    int rep;                         /* that run: the config and seed the trials time */
    int k;                           /* trials wanted (train.calibrate) */
    double *tps;                     /* k entries: tokens/s of trial i+1 */
    uint8_t *have;                   /* k entries: trial i+1 is journaled */
    int failed;                      /* a trial could not run: its runs fail */
    long steps;                      /* the budget, once all k trials are in (else 0) */
} CalibGroup;

/* Why the sweep stops before every run ended. */
typedef enum { STOP_NONE, STOP_SIGNAL, STOP_IO } StopReason;

typedef struct {
    const SweepOptions *o;
    Spec spec;
    Plan plan;
    PlanCost *cost;
    int n;
    SweepRun *runs;
    Scheduler *sched; /* which run trains next (schedule/scheduler.h) */
    Journal *j;
    char journal_path[ABL_PATH_MAX];
    Progress progress;
    double last_view, view_seconds;
    StopReason stop;
    int view_failed;
    JournalReader *history; /* reads earlier attempts' events back for resumed runs */
    ViewUpdater *vu;        /* builds OUT.h5 on its own thread */
    int local_run;          /* one process: the run it is training (-1: none) */
    DataGuard data;         /* the identity of the plan's data (data_guard.h) */
    /* replicate: (schedule/adaptive.c): the contrasts, the decisions the journal held when
     * this session began (not journaled again), each contrast's latest, the runs not needed */
    Contrasts contrasts;
    int rule_version; /* the sequential rule's (sequential.h): the journal's when resumed */
    const JournalDecision *journaled;
    int n_journaled;
    JournalDecision *latest; /* per contrast; look -2: nothing yet */
    /* tune: (schedule/tune.c): the choices the journal held when this session began */
    const JournalTune *tunes_journaled;
    int n_tunes_journaled;
    int n_not_needed;
    double idle_worker_seconds;      /* worker ranks idle while the sweep went on */
    double *idle_since, *busy_since; /* many ranks: when each worker became idle, when it
                                        was given its run (0: not) */
    double run_seconds;              /* a run's typical length, ASSIGN to END (0: none ended) */
    GroupSync *gs;                   /* many ranks: syncs the journal on its own thread */
    /* each worker rank's last assignment, sent without waiting (MPI_Isend): a blocking send
     * completes only once the worker polls, and an idle worker polls after a back-off of up
     * to 20 ms (worker_rank.c), so rank 0 sat in MPI_Send, spinning, for most of each run
     * it handed out when runs are short (8.8 ms of its CPU per run at 8 workers) */
    RunAssignment *assign_out;
    MPI_Request *assign_req;
    PendingEnd *pend; /* RUN_ENDs written, not yet announced: [pend_head, npend) */
    int npend, pend_head;
    size_t cap_pend;
    CalibGroup *calib; /* calibrated fixed time: the configurations to time */
    int n_calib;
    int calib_busy; /* a trial is being timed (no view is built meanwhile) */
    int plan_all;   /* every run's PLAN record went into our journal at start */
} Sweep;

/* sweep.c: stopping, checkpoints, the config a run trains with, a joined run's PLAN record */
void run_config(const Sweep *s, const SweepRun *r, RunConfig *out);
void stop_io(Sweep *s, const char *what);
void stop_journal(Sweep *s);
int stopping(const Sweep *s);
void drop_checkpoint(Sweep *s, SweepRun *r);
int plan_now(Sweep *s, uint32_t run);

/* sweep_calib.c: calibrated fixed time */
int calib_setup(Sweep *s, const ResumeState *rs);
void calib_free(Sweep *s);
int calib_next(const Sweep *s, int *g, int *trial);
void calib_assignment(const Sweep *s, int g, int trial, RunAssignment *a);
void calib_record(Sweep *s, int g, int trial, int ok, const CalibTrial *t, const char *message);
void calib_local(Sweep *s);
int calib_refuse_join(const Plan *p, char err[ABL_ERR_MAX]);

/* sweep_replicate.c: a replicate: sweep */
void contrast_line(Sweep *s);
int host_decided(void *ctx, const JournalDecision *d);
int host_not_needed(void *ctx, int run, const char *why);
int replicate_begin(Sweep *s, const ResumeState *rs, char err[ABL_ERR_MAX]);
void write_replicate(Sweep *s);
void replicate_summary(const Sweep *s, int n);

/* sweep_tune.c: a tune: sweep */
int host_tuned(void *ctx, const JournalTune *t);
const JournalTune *host_tune_journaled(void *ctx, int config, const char *name, int rung);
int host_tune_stopped(void *ctx, int run, int rung, double loss);
void tune_assignment(Sweep *s, int run, RunAssignment *a);
int tune_paused(Sweep *s, int run, const RunResult *res);
/* A tuning run's attempt ended (rank, host: where): kept when it stopped at its rung. */
void tune_note_end(Sweep *s, int run, int rank, const char *host, const EndEvent *end);
void tune_free_end(SweepRun *r);

/* sweep_open.c: the journal opened (new, --force, --resume) and reconciled with the plan */
int reconcile(Sweep *s, ResumeState *rs, char err[ABL_ERR_MAX]);
int open_journal(Sweep *s, ResumeState *rs, char err[ABL_ERR_MAX]);
void write_header(Sweep *s, int nranks, const char *hostnames);
void last_joined_view(Sweep *s);
/* Everything before the first run: the spec planned and validated, the output and the data
 * checked, the journal opened (new, forced, or resumed and reconciled), calibration and the
 * scheduler set up, the session's records journaled and synced, the first view asked for,
 * the sweep announced. -1: dispatch; else the exit status (sweep.h) to end with, no worker
 * given anything (errors said). */
int sweep_open(Sweep *s, ResumeState *rs, int nranks, const char *hostnames);
/* sweep.c, for sweep_open: the first view, asked for */
void start_view(Sweep *s);

#endif
