/* What a journal says about a sweep so far: the runs it planned (in journal order) and,
 * per run, whether it finished, its last attempt and its last checkpoint. `--resume`
 * reconciles this with the new plan. */
#ifndef ABLATE_ORCHESTRATOR_RESUME_H
#define ABLATE_ORCHESTRATOR_RESUME_H

#include <stdint.h>

#include "journal.h"
#include "plan.h"

typedef struct {
    char id[17];
    char name[JOURNAL_NAME_MAX];
    uint64_t seed;
    int finished; /* a RUN_END of its last attempt exists */
    RunStatus status;
    uint32_t attempt;  /* last attempt begun (0 = never) */
    int64_t ckpt_step; /* last checkpoint of the last attempt (0 = none) */
    char ckpt_path[ABL_PATH_MAX];
} ResumeRun;

typedef struct {
    int n_runs;
    ResumeRun *runs; /* indexed by journal run index */
    uint64_t torn_bytes;
    int cap; /* allocated entries of runs */
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
void resume_match_free(ResumeMatch *m);

#endif
