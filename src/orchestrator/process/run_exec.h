/* Executing one planned run wherever it lands (a worker rank, or rank 0 when it runs
 * alone): load its data, train, stream packed events in batches, checkpoint on request or
 * every ckpt_every seconds, and continue from a checkpoint.
 *
 * A checkpoint file holds the trainer state only (trainer_save) and a CRC-32C trailer. The
 * events the run emitted before it are in the journal already: rank 0 copies them into the
 * resumed attempt (sweep.c), so a checkpoint's size does not grow with the run's history. */
#ifndef ABLATE_ORCHESTRATOR_RUN_EXEC_H
#define ABLATE_ORCHESTRATOR_RUN_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "worker/calibrate.h"
#include "worker/train.h"
#include "orchestrator/plan/vocab.h"

typedef struct {
    uint32_t run;     /* journal index */
    uint32_t attempt; /* 1-based */
    uint64_t seed;
    char id[RUN_ID_CHARS];
    RunConfig cfg;
    /* OUT.h5. The files of the run are named from it and id, not sent (protocol.h: the
     * assignment fits the shared-memory eager limit): checkpoints OUT.h5.d/ckpt/
     * (run_ckpt_path; the one to continue from is at resume_step), the final weights
     * OUT.h5.d/weights/ (run_weights_path) */
    char out_path[ABL_PATH_MAX];
    int64_t resume_step;  /* > 0: continue from the checkpoint of this step */
    double ckpt_every;    /* seconds between periodic checkpoints; 0: none */
    char data_sha256[65]; /* the sweep's data (data_guard.h); "": not checked */
    int64_t stop_step;    /* > 0: a tune: sweep's rung: stop there (Trainer.stop_step) */
    int32_t rung1;        /* 1 + the rung this attempt trains to (END tune_rung); 0: not a
                           * tuning run (so a zeroed assignment is none) */
} RunAssignment;

typedef struct {
    /* A batch of packed events (event_codec.h) of the current attempt. */
    int (*send_events)(void *ctx, const RunAssignment *a, const uint8_t *packed, size_t len);
    /* A checkpoint at step was written durably to path, after every event before it was
     * sent. 0, or -1 if it could not be recorded (the run then stops). */
    int (*checkpointed)(void *ctx, const RunAssignment *a, int64_t step, const char *path);
    TrainPoll (*poll)(void *ctx);
    void *ctx;
} RunOutput;

typedef struct {
    EndEvent end;      /* interrupted: stopped at ckpt_step (0: without a checkpoint) */
    int64_t ckpt_step; /* the last checkpoint this attempt wrote; -1: the one it was to
                        * continue from could not be loaded (start the run afresh) */
    int io_errno;      /* > 0: a file write failed (checkpoint, weights); the run is
                        * interrupted, not failed, and the sweep should stop resumably */
} RunResult;

/* Runs the assignment to its end (or a checkpoint/abort request). res->end has status
 * failed with a message when the run cannot start. A checkpoint that cannot be read (bad
 * checksum, truncated, another run's) is reported on stderr with its path and the run
 * starts from step 0: a bad checkpoint never fails a run. */
RunStatus run_execute(const RunAssignment *a, VocabCache *vc, const RunOutput *out, RunResult *res);

/* One calibration trial of the assignment's configuration (worker/calibrate.h) on the
 * sweep's data: 0, or -1 with a message. A calibrated run (train.calibrate > 0) whose
 * assignment carries no calibrated_steps fails in run_execute rather than train by time. */
int run_calibrate(const RunAssignment *a, VocabCache *vc, CalibTrial *out, char err[ABL_ERR_MAX]);

/* OUT.h5.d/ckpt/<id>-<step>.ckpt */
int run_ckpt_path(const char *out_path, const char *id, int64_t step, char *buf, size_t n);
/* Checks a checkpoint file's trailer and CRC-32C; 0, or -1 with a message naming it. */
int run_ckpt_verify(const char *path, char err[ABL_ERR_MAX]);
/* OUT.h5.d/weights/<id>.f32: the final parameters, written durably before the run is
 * reported finished; the view copies them into OUT.h5 (worker/weights_file.h). */
int run_weights_path(const char *out_path, const char *id, char *buf, size_t n);

#endif
