/* Which run trains next: the one interface between the sweep (process/sweep.c, which
 * dispatches runs to workers and records what they send) and a scheduling policy.
 *
 * Runs are named by their journal index. The sweep asks take() for a run whenever a worker
 * is idle, and tells the scheduler what became of it: requeue() (interrupted on its own: it
 * trains again), cancel() (the sweep stops or could not record it: this process gives it
 * up), ended() (a final result, durable in the journal). more() says whether anything is
 * left to train, here or anywhere; tick() is called often while the sweep runs.
 *
 * Implementations:
 *   queue.c    one process: every unfinished run once, most expensive first
 *   joined.c   `ablate run --join`: the same order, each run claimed in join/ first, so that
 *              many processes share one sweep (join.h)
 *   tune.c     a tune: sweep: the tuning runs first, rung by rung (successive halving),
 *              each configuration's comparison runs once its value is chosen from them
 *              (with replicate:, handed out by an adaptive.c scheduler it drives);
 *              under --join a policy over joined.c (rung results in join/rungs)
 *   adaptive.c a replicate: sweep: seeds only where a contrast is still open;
 *              under --join a policy over joined.c (it claims the runs it wants there, and
 *              hears the results of other processes' runs from their claims)
 * ended() hands over each run's final result, finished_elsewhere another process's, and
 * take() may return runs added since start(). tests/test_scheduler.c runs every
 * implementation through the same contract, a stub adaptive one included. */
#ifndef ABLATE_ORCHESTRATOR_SCHEDULER_H
#define ABLATE_ORCHESTRATOR_SCHEDULER_H

#include "orchestrator/plan/plan.h"
#include "orchestrator/record/journal_replicate.h"
#include "orchestrator/record/journal_tune.h"
#include "orchestrator/record/resume.h"
#include "join.h"
#include "worker/events.h"

/* What the scheduler knows of a run when the sweep starts. */
typedef struct {
    const char *id, *name;
    double cost;  /* the higher, the earlier it is taken (ties: the lower index first) */
    int finished; /* nothing to train: ended before, or not a run (a lost journal index) */
    /* of a finished run's RUN_END, for adaptive replication (adaptive.c) */
    RunStatus status;
    double final_val_loss;
    int unstable;           /* diverged, or flagged by the instability rule */
    double train_seconds;   /* what it spent, for the budget */
    double final_test_loss; /* NaN: no test split (a replicate: rule reads it when there is) */
} SchedRun;

/* What a scheduler tells the sweep that runs it (any of these may be NULL in tests). */
typedef struct {
    void *ctx;
    /* Another process finished run: it counts as finished here too, with this result (its
     * status, and what a replicate: sweep decides from; durable in that process's journal). */
    void (*finished_elsewhere)(void *ctx, int run, const JoinResult *res);
    /* Run was taken over from another process: its next attempt continues from the
     * checkpoint rr records (rr's events are offsets into from), or from its start when rr
     * is NULL or has no checkpoint. 0, or -1 out of memory. */
    int (*continue_from)(void *ctx, int run, const ResumeRun *rr, JournalReader *from);
    /* An I/O error: the sweep stops (it says so once, as for its own errors). */
    void (*fail)(void *ctx, const char *what);
    /* A shared scheduler asks, before it writes anything, whether this process may join
     * (its data the same as the first process's): 0, or -1 with a one-line message. */
    int (*admit)(void *ctx, const char *out_path, char err[ABL_ERR_MAX]);
    /* Adaptive replication (adaptive.c): a decision to journal durably (the host skips one
     * its journal already holds), and a run that will not train (journaled as not_needed
     * with why; it counts as finished from then on). 0, or -1 (the sweep is stopping). */
    int (*decided)(void *ctx, const JournalDecision *d);
    int (*not_needed)(void *ctx, int run, const char *why);
    /* A tune: sweep (tune.c): a configuration's value is chosen; before this returns, the
     * host sets its comparison runs' configs to it and journals the choice durably (unless
     * its journal holds it). 0, or -1 (the sweep is stopping). */
    int (*tuned)(void *ctx, const JournalTune *t);
    /* A tune: sweep's rung decision its journal held when the sweep began (configuration
     * config named name, the record deciding rung), or NULL: start() continues from it. */
    const JournalTune *(*tune_journaled)(void *ctx, int config, const char *name, int rung);
    /* A tuning run not promoted past rung (its result there: loss): journaled as ended done
     * at that rung (END tune_rung), from the checkpoint it stopped at; it counts as
     * finished from then on. 0, or -1 (the sweep is stopping). */
    int (*tune_stopped)(void *ctx, int run, int rung, double loss);
} SchedHost;

/* How to open a scheduler: scheduler_open picks the implementation from these. */
typedef struct {
    const char *out_path;
    const Plan *plan;
    int join;     /* one of many processes on this sweep (joined.c) */
    double lease; /* join: seconds before an unresponsive process's runs are taken */
    int force;    /* --force: the output is being replaced, whoever owned it */
    /* join: the replicate: rule and contrasts as text, which every process of the sweep must
     * share (adaptive.c sets it; NULL: no replicate: section) */
    const char *replicate;
} SchedConfig;

typedef struct Scheduler Scheduler;

typedef struct {
    /* Learns the runs (n of them, indexed by journal index; the scheduler keeps a copy of
     * the array, the strings must outlive it). 0, or -1 out of memory. */
    int (*start)(Scheduler *s, const SchedRun *runs, int n);
    /* The next run to train here, or -1: none for now (the rest are finished, or held by
     * others). now: clock_seconds(), for schedulers that wait on others. */
    int (*take)(Scheduler *s, double now);
    /* Is anything left to train, here or anywhere? 0 ends the sweep. */
    int (*more)(Scheduler *s);
    /* A run of ours was interrupted on its own (its worker's SIGUSR1, an unusable
     * checkpoint) and its end is durable: it is taken again, before anything else. */
    void (*requeue)(Scheduler *s, int run);
    /* This process gives run up without a final result (the sweep stops, or its end could
     * not be recorded): it stays unfinished, for whoever takes it next. A run not taken is
     * left as it is. */
    void (*cancel)(Scheduler *s, int run);
    /* Run ended with a final result (done, diverged or failed), durable in the journal. */
    void (*ended)(Scheduler *s, int run, const EndEvent *end);
    /* Called often (between events, when idle): heartbeats and the like. */
    void (*tick)(Scheduler *s, double now);
    /* 1 when a run we train was given to another process meanwhile: stop it where it
     * trains, and keep nothing of it (its checkpoint files are its new holder's). */
    int (*abandoned)(Scheduler *s, int run);
    /* The sweep's first line: what it will do (n_live runs planned, n_done finished before,
     * n_resumed of the rest continuing from a checkpoint, on `where`, into out_path). */
    void (*announce)(Scheduler *s, int n_live, int n_done, int n_resumed, const char *where,
                     const char *out_path);
    /* Every run was finished before this process started (n_live of them), and the sweep has
     * closed its journal, which holds nothing of this process's: a shared scheduler removes
     * that journal, so that joining a complete sweep leaves nothing behind, says so and
     * returns 1 (the process ends). A plain sweep returns 0: it goes on and rebuilds its
     * view. Called only when the sweep's journal is its own (shared). */
    int (*complete_on_start)(Scheduler *s, int n_live, const char *out_path);
    void (*close)(Scheduler *s);
    /* Optional (tune.c; NULL elsewhere). rung: the successive-halving rung run's next
     * attempt trains to (-1: not a tuning run; n_rungs - 1: to its full budget), set before
     * take() returns it and unchanged while it trains; *frac is that rung's fraction of the
     * run's budget (1 at the last; a resumed sweep's journaled one). paused: run stopped at
     * that rung's step with its checkpoint there and its end (interrupted, the rung's
     * validation loss in final_val_loss) durable: it waits for its rung's decision, not the
     * queue. */
    int (*rung)(Scheduler *s, int run, int *n_rungs, double *frac);
    void (*paused)(Scheduler *s, int run, const EndEvent *end);
    /* How the user continues a stopped sweep: "--resume" or "--join". */
    const char *continue_flag;
    /* Other processes share this sweep: each writes a journal of its own (always a new
     * one), OUT.h5 is built from all of them and may have been rebuilt by another process a
     * moment ago, and another process may continue our runs from our journal alone (so an
     * attempt journals the checkpoint it continues from). */
    int shared;
} SchedOps;

/* Every implementation begins with this. */
struct Scheduler {
    const SchedOps *ops;
    SchedHost host;
    int n;          /* runs */
    SchedRun *runs; /* n of them, the start() copy */
};

/* Opens the scheduler cfg asks for and checks that the output is its kind's: a plain sweep
 * refuses an output a joined one owns (unless --force), a joined one an output a single
 * sweep wrote. journal: the journal path of the output, replaced by this process's own
 * journal when the scheduler is shared. NULL with a one-line message. */
Scheduler *scheduler_open(const SchedConfig *cfg, const SchedHost *host, char journal[ABL_PATH_MAX],
                          char err[ABL_ERR_MAX]);
/* --force: removes what a scheduler left beside the output (a joined sweep's join/), unless
 * one of its processes is still alive. 0, or -1 with a message. */
int scheduler_remove_output(const char *out_path, char err[ABL_ERR_MAX]);

/* The implementations (scheduler_open picks one; tests open each). */
Scheduler *sched_queue_open(const SchedHost *host, char err[ABL_ERR_MAX]);
Scheduler *sched_joined_open(const SchedConfig *cfg, const SchedHost *host,
                             char journal[ABL_PATH_MAX], char err[ABL_ERR_MAX]);
/* cfg->plan's spec has replicate.on; with cfg->join it runs over a joined scheduler (journal
 * as for sched_joined_open). NULL with a message. */
/* A replicate: sweep's scheduler (sched_adaptive_open) takes its looks by version `version` of
 * the sequential rule (sequential.h): a resumed sweep's own, so that one rule takes every
 * look. Before start(). 0, or -1 when s is not that scheduler or the version is unknown. */
int sched_adaptive_rule_version(Scheduler *s, int version);
Scheduler *sched_adaptive_open(const SchedConfig *cfg, const SchedHost *host,
                               char journal[ABL_PATH_MAX], char err[ABL_ERR_MAX]);
/* A tune: sweep's comparison runs under replicate: (tune.c): an adaptive scheduler whose
 * configurations hand out no run until sched_adaptive_release(s, config) (its value
 * chosen). Its runs are the comparison runs alone (contrasts_run). Under cfg->join it has
 * its rule's text (sched_adaptive_rule, for join/replicate) and runs over the tune
 * scheduler's joined one once given it (sched_adaptive_share: started, ticked and closed by
 * the tune scheduler), hearing other processes' results of its runs through
 * sched_adaptive_heard (before start() too: kept for it). NULL with a message. */
Scheduler *sched_adaptive_open_gated(const SchedConfig *cfg, const SchedHost *host,
                                     char err[ABL_ERR_MAX]);
const char *sched_adaptive_rule(Scheduler *s);
void sched_adaptive_share(Scheduler *s, Scheduler *inner);
void sched_adaptive_release(Scheduler *s, int config);
void sched_adaptive_heard(Scheduler *s, int run, const JoinResult *res);
/* cfg->plan's spec has tune.on; with cfg->join it runs over a joined scheduler (journal as
 * for sched_joined_open). NULL with a message. */
Scheduler *sched_tune_open(const SchedConfig *cfg, const SchedHost *host,
                           char journal[ABL_PATH_MAX], char err[ABL_ERR_MAX]);
/* For a policy over the joined scheduler (adaptive.c, tune.c; policy: its Scheduler, host
 * set): opens that scheduler with the policy as its host: another process's result goes to
 * elsewhere(policy, ...), the rest to the policy's own host. rule: the text every process
 * of the sweep must share (join/replicate), checked first at its spec key
 * (join_ledger_check). journal as for sched_joined_open. NULL with a message. */
Scheduler *sched_joined_under(Scheduler *policy, const SchedConfig *cfg, const char *rule,
                              void (*elsewhere)(void *ctx, int run, const JoinResult *res),
                              char journal[ABL_PATH_MAX], char err[ABL_ERR_MAX]);
/* For a policy over the joined scheduler s: claims run for this process. 1: ours (claimed
 * now, held already, or taken over: the host was told where it continues from); 0: held by
 * another live process; 2: finished (the host heard its result through finished_elsewhere);
 * -1: an I/O error (reported through the host's fail). */
int sched_joined_claim(Scheduler *s, int run);
/* A tune: sweep over the joined scheduler s (tune.c): run (ours) stopped at successive-halving
 * rung `rung` with validation loss `loss`, its RUN_END durable: told to every process
 * (join_rung). 0, or -1 (reported through the host's fail). sched_joined_rungs: fn for each
 * such result another process (or this one) told since the last call. */
int sched_joined_rung(Scheduler *s, int run, int rung, double loss);
typedef void (*SchedRungFn)(void *ctx, int run, int rung, double loss);
int sched_joined_rungs(Scheduler *s, SchedRungFn fn, void *ctx);
/* This process's journal in the joined sweep s. */
void sched_joined_journal(Scheduler *s, char journal[ABL_PATH_MAX]);

/* The one instability rule a replicate: sweep decides by: diverged, or flagged by the
 * instability rule (run_health.h). */
static inline int sched_unstable(const EndEvent *e) {
    return e->status == RUN_DIVERGED || e->instability != INSTAB_NONE;
}

/* For implementations: copies runs into s (start()'s common part), and fills order with
 * the unfinished ones, most expensive first; returns how many. order holds n entries. */
int sched_keep_runs(Scheduler *s, const SchedRun *runs, int n);
int sched_order(const SchedRun *runs, int n, int *order);
void sched_free_runs(Scheduler *s);

static inline int sched_start(Scheduler *s, const SchedRun *r, int n) {
    return s->ops->start(s, r, n);
}
static inline int sched_take(Scheduler *s, double now) {
    return s->ops->take(s, now);
}
static inline int sched_more(Scheduler *s) {
    return s->ops->more(s);
}
static inline void sched_requeue(Scheduler *s, int run) {
    s->ops->requeue(s, run);
}
static inline void sched_cancel(Scheduler *s, int run) {
    s->ops->cancel(s, run);
}
static inline void sched_ended(Scheduler *s, int run, const EndEvent *end) {
    s->ops->ended(s, run, end);
}
static inline void sched_tick(Scheduler *s, double now) {
    s->ops->tick(s, now);
}
static inline int sched_abandoned(Scheduler *s, int run) {
    return s->ops->abandoned(s, run);
}
/* NULL is fine. */
static inline void sched_close(Scheduler *s) {
    if (s) s->ops->close(s);
}

#endif
