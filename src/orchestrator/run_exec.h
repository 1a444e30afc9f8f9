/* Executing one planned run wherever it lands (a worker rank, or rank 0 when it runs
 * alone): load its data, train, stream packed events in batches, checkpoint on request,
 * and continue from a checkpoint. A checkpoint holds the trainer state (trainer_save) and
 * every event the run emitted so far, which a resumed attempt replays first: the view keeps
 * only each run's last attempt, so the replay makes it whole. */
#ifndef ABLATE_ORCHESTRATOR_RUN_EXEC_H
#define ABLATE_ORCHESTRATOR_RUN_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "../worker/train.h"
#include "vocab.h"

typedef struct {
    uint32_t run;     /* journal index */
    uint32_t attempt; /* 1-based */
    uint64_t seed;
    char id[17];
    RunConfig cfg;
    char ckpt_path[ABL_PATH_MAX];    /* where this run's checkpoint lives */
    int64_t resume_step;             /* > 0: continue from the checkpoint at ckpt_path */
    char weights_path[ABL_PATH_MAX]; /* final weights go here when cfg.save_weights */
} RunAssignment;

typedef struct {
    /* A batch of packed events (event_codec.h) of the current attempt. */
    int (*send_events)(void *ctx, const RunAssignment *a, const uint8_t *packed, size_t len);
    TrainPoll (*poll)(void *ctx);
    void *ctx;
} RunOutput;

/* Runs the assignment to its end (or a checkpoint/abort request). Fills *end (status
 * failed with a message when the run cannot start) and, after a checkpoint, *ckpt_step. */
RunStatus run_execute(const RunAssignment *a, VocabCache *vc, const RunOutput *out, EndEvent *end,
                      int64_t *ckpt_step);

/* OUT.h5.d/ckpt/<id>.ckpt */
int run_ckpt_path(const char *out_path, const char *id, char *buf, size_t n);
/* OUT.h5.d/weights/<id>.f32: the final parameters, written durably before the run is
 * reported finished; the view copies them into OUT.h5. A WeightsHeader, then n_params
 * float32 in tensor-table order (gpt.h). */
int run_weights_path(const char *out_path, const char *id, char *buf, size_t n);

#define RUN_WEIGHTS_MAGIC 0x31574c42u /* "BLW1" */
typedef struct {
    uint32_t magic;
    int32_t vocab_size; /* resolved: the tensor table needs it */
    int32_t reserved;
    uint64_t n_params;
} WeightsHeader;

#endif
