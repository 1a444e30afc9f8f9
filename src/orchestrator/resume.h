/* What a journal says about a sweep so far: the runs it planned (in journal order) and,
 * per run, whether it finished, its last attempt and its last checkpoint. `--resume`
 * reconciles this with the new plan. */
#ifndef ABLATE_ORCHESTRATOR_RESUME_H
#define ABLATE_ORCHESTRATOR_RESUME_H

#include <stdint.h>

#include "journal.h"

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
} ResumeState;

int resume_read(const char *journal_path, ResumeState *st, char err[ABL_ERR_MAX]);
void resume_free(ResumeState *st);

#endif
