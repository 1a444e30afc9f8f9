/* Many independent processes on one sweep (`ablate run --join`): array tasks, separate jobs,
 * each its own mpirun/srun of any size, on any nodes that share the file system. They meet
 * in OUT.h5.d/join/:
 *
 *   plan                the plan, one "ID NAME" line per run in plan order; the first process
 *                       writes it, and a process that plans anything else is refused
 *   plan_journal        the path of a journal that holds every run's PLAN record, synced:
 *                       written once by the first process to have synced them; a process
 *                       that finds it journals a run's PLAN record only when it trains the
 *                       run, so its journal does not grow with the sweep's runs
 *   lock                flock'd around every change to a claim another process wrote
 *   procs/NAME/journal  each process's own journal, locked by it while it lives; every
 *                       journal plans the runs it records with the plan's index (the one
 *                       plan_journal names plans them all)
 *   procs/NAME/alive    its heartbeat: touched every lease/4 seconds
 *   claims/ID           who has run ID: "held NAME", "released NAME" or "done NAME"; a done
 *                       claim's second line is the run's result ("result STATUS LOSS UNSTABLE
 *                       SECONDS", floats in %a: exact), which a replicate: sweep decides from
 *   done                one line per run whose claim says done, with its result: appended
 *                       under the lock as the claim is written, so that a process learns
 *                       what the others finished by reading one file (join_done_read)
 *   rungs               a tune: sweep's rung results: one line per tuning run stopped at a
 *                       successive-halving rung ("ID RUNG LOSS"), appended under the lock once
 *                       its RUN_END is synced (join_rung)
 *   compacted           written once the sweep is complete and every claim is folded into
 *                       done and removed (join_compact)
 *   replicate           a replicate: sweep's rule and contrasts, a tune: sweep's rungs (or
 *                       "none"), written by the
 *                       first process like plan; a process with others is refused
 *
 * NAME is the process's UTC start time, host and pid ("20261201T173139Z-node7-4242").
 * A run is claimed by linking a fully written file to claims/ID (atomic, and fails if any
 * process got there first), so first claims need no lock. A run whose holder released it
 * (SIGUSR1, a full disk) or is gone is taken over under the lock, by rename. A holder is
 * gone when its journal's flock is free (it exited or was killed: seen at once, also across
 * NFS clients) or when its heartbeat is older than the lease (a hung process, a node off the
 * network). Heartbeat ages are read against our own heartbeat's mtime: both come from the
 * file system's clock, so the nodes' clocks need not agree. A holder that finds its claim
 * taken over abandons the run; should both finish it, the runs are identical (training is
 * deterministic) and the view shows one.
 *
 * The journals are the truth; claims only coordinate. A run whose claim says done is
 * finished in that holder's journal (done is written after the RUN_END is synced), with the
 * result its claim repeats. A taker reads the previous holder's journal for the run's last
 * checkpoint and history. */
#ifndef ABLATE_ORCHESTRATOR_JOIN_H
#define ABLATE_ORCHESTRATOR_JOIN_H

#include <stddef.h>

#include "util/sizes.h"
#include "orchestrator/record/h5view.h"
#include "orchestrator/record/joined_view.h"
#include "orchestrator/plan/plan.h"
#include "worker/events.h"

#define JOIN_NAME_MAX      160
#define JOIN_DEFAULT_LEASE 60.0

typedef struct Join Join;

typedef enum {
    CLAIM_MINE,  /* claimed now; nobody had it */
    CLAIM_TAKEN, /* taken over from prev (released, or its holder is gone) */
    CLAIM_BUSY,  /* held by a live process */
    CLAIM_DONE,  /* finished by prev */
    CLAIM_ERROR, /* err says why */
} ClaimResult;

/* A finished run's result, as its RUN_END in the journal of the process that wrote its done
 * claim says (the claim repeats it, so that others decide from it without that journal). */
typedef struct {
    RunStatus status;
    double final_val_loss;
    int unstable; /* diverged, or flagged by the instability rule */
    double train_seconds;
    double final_test_loss; /* NaN: no test split (claims written before it: NaN) */
} JoinResult;

/* Joins the sweep of out_path with this plan: creates the directories, checks (or writes) the
 * plan and the replicate: rule (replicate: its text, the same for every process; NULL: the
 * sweep has none), and makes this process's directory and heartbeat. NULL with a one-line
 * message; a refused process leaves no file. */
Join *join_open(const char *out_path, const Plan *p, const char *replicate, double lease,
                char err[ABL_ERR_MAX]);
/* A process that joined a complete sweep recorded nothing: removes its procs/NAME (its
 * journal, closed by the caller, and heartbeat) under join/view.lock, so that late joins
 * leave no journal each. 0, or -1 with a message. */
int join_forget(Join *j, const char *out_path, char err[ABL_ERR_MAX]);
/* Stops heartbeating; the process's journal and directory stay (others may need them). */
void join_close(Join *j);

const char *join_name(const Join *j);
/* procs/NAME/journal of this process (name NULL) or another. */
void join_journal_of(const Join *j, const char *name, char *buf, size_t n);

/* Tries to claim run id. prev gets the previous holder for TAKEN and DONE. */
ClaimResult join_claim(Join *j, const char *id, char prev[JOIN_NAME_MAX], char err[ABL_ERR_MAX]);
/* What the claim says, without taking anything: DONE, BUSY (held by a live process, or by
 * us: then *mine = 1), or MINE when it is free to take. */
ClaimResult join_peek(Join *j, const char *id, int *mine, char prev[JOIN_NAME_MAX]);
/* This process gives run id up: "released" (another process continues it from its
 * checkpoint; only while the claim is ours) or "done" (its RUN_END is durable in our
 * journal; written whoever holds it now, so that a process that took it over stops). 0, 1
 * when the claim was not ours (release) or already done, -1 on an I/O error. */
/* Takes back run id from a failure (a re-joining process trains failed runs again, as
 * --resume does): under the lock, a done claim whose result is failed (or no claim: folded
 * away) becomes ours. TAKEN (prev: who failed it) or MINE; DONE when it ended otherwise;
 * BUSY when another process holds it (retrying it); ERROR with a message. */
ClaimResult join_retake(Join *j, const char *id, char prev[JOIN_NAME_MAX], char err[ABL_ERR_MAX]);
int join_release(Join *j, const char *id, char err[ABL_ERR_MAX]);
int join_done(Join *j, const char *id, const JoinResult *res, char err[ABL_ERR_MAX]);
/* The result a done claim carries: 1, or 0 when the claim is not done or carries none (one
 * written by an older ablate: *res then says done, with no loss). */
int join_result(Join *j, const char *id, JoinResult *res);
/* join/done, the runs whose claims say done, one line each ("ID STATUS LOSS UNSTABLE
 * SECONDS", the claim's result), appended under join/lock as each claim is written: calls fn
 * for each complete line not read before. A process learns what the others finished from it
 * without reading a claim per run (with P processes, every run's claim was read by
 * each of them). A run may be done without its line (its process was killed between the
 * two): its claim still says so. The count of lines read, or -1 when the sweep has no such
 * file (begun by an older ablate: read the claims). */
typedef void (*JoinDoneFn)(void *ctx, const char *id, const JoinResult *res);
int join_done_read(Join *j, JoinDoneFn fn, void *ctx);
/* join/rungs (a tune: sweep's, schedule/tune.c): one line per tuning run that stopped at a
 * successive-halving rung's step ("ID RUNG LOSS", the validation loss there in %a: exact),
 * appended under join/lock once that stop's RUN_END is durable in its process's journal.
 * Every process decides each rung from these and the done claims, so all decide alike.
 * join_rung: 0, or -1 with a message. join_rungs_read: calls fn for each line not read
 * before; the count (0 when the sweep has none yet). */
int join_rung(Join *j, const char *id, int rung, double loss, char err[ABL_ERR_MAX]);
typedef void (*JoinRungFn)(void *ctx, const char *id, int rung, double loss);
int join_rungs_read(Join *j, JoinRungFn fn, void *ctx);
/* Every run of the sweep is finished (ids: the plan's, "" for none): the claims are
 * folded into join/done, which keeps the sweep's record of what is done, so that a sweep of
 * 10^5 runs does not leave 10^5 files behind (inodes are scarce on a parallel file system).
 * Under the lock: a run whose line is missing gets it from its claim, join/done is synced,
 * then every claim is removed and join/compacted written; a process joining later learns
 * everything from join/done. Nothing is removed if a claim does not say done, if the sweep
 * has no join/done, or once join/compacted exists. The claims removed (0: none), or -1 with
 * a message. */
int join_compact(Join *j, const char (*ids)[RUN_ID_CHARS], int n, char err[ABL_ERR_MAX]);
/* Claim files read by this process so far (tests: what learning the finished runs costs). */
long join_claim_reads(void);
/* 1 while claims/ID names us as its holder. */
int join_holds(Join *j, const char *id);
/* Touches the heartbeat when a quarter of the lease has passed since the last touch;
 * returns 1 when it did (callers then check their claims), 0 otherwise, -1 on error. */
int join_heartbeat(Join *j, double now);
double join_lease(const Join *j);

/* Does join/plan_journal exist (some journal holds every run's PLAN record)? */
int join_plan_journaled(const char *out_path);
/* Our journal, synced, holds every run's PLAN record: writes join/plan_journal naming it
 * unless it exists. 0, or -1 with a message. */
int join_mark_plan_journaled(const char *out_path, const char *journal_path, char err[ABL_ERR_MAX]);

/* --force on a joined sweep: removes OUT.h5.d/join unless one of its processes is alive
 * (its journal locked: refused, with the message naming it). 0 also when not joined. */
int join_remove(const char *out_path, char err[ABL_ERR_MAX]);
#endif
