/* What a journal says about a sweep so far: the runs it planned (in journal order) and,
 * per run, whether it finished, its last attempt and its last checkpoint. `--resume`
 * reconciles this with the new plan. */
#ifndef ABLATE_ORCHESTRATOR_RESUME_H
#define ABLATE_ORCHESTRATOR_RESUME_H

#include <stdint.h>

#include "journal.h"
#include "journal_calibration.h"
#include "journal_tune.h"
#include "journal_replicate.h"
#include "orchestrator/plan/plan.h"
#include "worker/data_identity.h"

/* An EVENTS record of a run: which attempt wrote it, and where it is in the journal. A run
 * resumed from a checkpoint gets the events of the checkpoint's attempt up to its step
 * copied from these (sweep.c), so nothing of its history has to fit in memory. */
typedef struct {
    uint32_t attempt;
    uint64_t offset;
} EventRecordRef;

typedef struct {
    EventRecordRef *refs;
    size_t n, cap;
} EventRecordRefs;

/* 0, or -1 out of memory. */
int refs_push(EventRecordRefs *v, uint32_t attempt, uint64_t offset);
void refs_free(EventRecordRefs *v);

typedef struct {
    char id[RUN_ID_CHARS];
    char name[JOURNAL_NAME_MAX];
    uint64_t seed;
    int finished; /* a RUN_END of its last attempt exists */
    RunStatus status;
    uint32_t attempt;      /* last attempt begun (0 = never) */
    int64_t ckpt_step;     /* last checkpoint of the last attempt (0 = none) */
    uint32_t ckpt_attempt; /* the attempt that wrote it */
    EventRecordRefs events;
    int orphan; /* records of an attempt whose RUN_BEGIN is missing (lost to damage) */
    /* of its RUN_END (finished): what a replicate: sweep decides from (adaptive.h) */
    double final_val_loss;
    double final_test_loss; /* NaN: no test split */
    int unstable;           /* diverged, or flagged by the instability rule (run_health.h) */
    double train_seconds;   /* what it spent (the budget) */
} ResumeRun;

/* Damaged bytes between valid records that no earlier resume has handled (no DAMAGE
 * record names them yet), and the runs whose records they may have held: the run of the
 * one damaged record when its header survived, else every run in progress at that point
 * (and any whose RUN_BEGIN is missing). Those runs are marked unfinished, without a
 * checkpoint, and invalidated in the journal by the sweep. */
typedef struct {
    uint64_t offset, length;
    int record_type;   /* of the damaged record when known, else 0 */
    int *runs, n_runs; /* journal indices */
} ResumeDamage;

typedef struct {
    int n_runs;
    ResumeRun *runs; /* indexed by journal run index */
    uint64_t torn_bytes;
    size_t cap; /* allocated entries of runs (util/grow.h) */
    ResumeDamage *damage;
    int n_damage;
    size_t cap_damage;
    DataIdentity *data; /* the DATA records, in journal order (data_guard.h) */
    int n_data;
    size_t cap_data;
    uint64_t replicate_off;     /* the last REPLICATE record's offset (0: none) */
    JournalDecision *decisions; /* a replicate: sweep's DECISION records, journal order */
    int n_decisions;
    size_t cap_decisions;
    JournalCalibration *calib; /* CALIBRATION records (trials timed), journal order */
    int n_calib;
    size_t cap_calib;
    JournalTune *tunes; /* a tune: sweep's TUNE records (its choices), journal order */
    int n_tunes;
    size_t cap_tunes;
} ResumeState;

int resume_read(const char *journal_path, ResumeState *st, char err[ABL_ERR_MAX]);
void resume_free(ResumeState *st);

/* How the journal's runs map onto a new plan, matched by id through a hash table: linear in
 * the runs (a 100,000-run resume took 56 s when every run was looked up by a scan). */
typedef struct {
    int *plan_of; /* st->n_runs entries: the plan index of journal run k; -1 for an
                     index the journal never planned, or a run the plan lacks */
    int *fresh;   /* plan indices the journal does not know, in plan order */
    int n_fresh;
    int missing;      /* the first journal run the plan no longer has, or -1 */
    long id_compares; /* id comparisons made: tests check they grow linearly */
} ResumeMatch;

/* -1 when out of memory. A plan that only adds runs has missing == -1. */
int resume_match(const ResumeState *st, const Plan *p, ResumeMatch *m);
/* Gives planned runs the scheme-1 ids under which a journal knows them (plan/run_id.h);
 * returns how many runs were adopted, -1 if out of memory. */
int run_id_adopt(Plan *p, const ResumeState *rs);
void resume_match_free(ResumeMatch *m);

#endif
