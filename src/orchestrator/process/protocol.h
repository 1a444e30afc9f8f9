/* Messages between rank 0 and the workers (MPI point-to-point, MPI_BYTE payloads).
 *   worker -> 0  TAG_READY   hostname (once, at start)
 *   0 -> worker  TAG_ASSIGN  RunAssignment (raw struct: every rank runs the same binary),
 *                            with the sweep's data digest: the worker refuses other data
 *   worker -> 0  TAG_EVENTS  u32 run, u32 attempt, packed events (the start event carries
 *                            the identity of the data the worker loaded: data_guard.h)
 *   worker -> 0  TAG_CKPT    WorkerCheckpoint: a checkpoint file is durable, after every
 *                            event before it (MPI keeps one sender's messages in order)
 *   worker -> 0  TAG_END     WorkerEnd header, then one packed EV_END event
 *   0 -> worker  TAG_STOP    i32 mode: STOP_EXIT (leave the loop), STOP_CHECKPOINT
 *                            (checkpoint the run in progress, report, then wait) or
 *                            STOP_ABANDON (stop it without a checkpoint, report, wait)
 *   0 -> worker  TAG_CALIB   RunAssignment of a calibration trial (train.calibrate): run is
 *                            the configuration's first run, attempt the trial number; the
 *                            worker times it (calib_trial) and sends nothing else
 *   worker -> 0  TAG_CALIB_DONE  WorkerCalib: the trial as measured, or why it failed */
#ifndef ABLATE_ORCHESTRATOR_PROTOCOL_H
#define ABLATE_ORCHESTRATOR_PROTOCOL_H

#include <stdint.h>

#include "worker/calibrate.h"
#include "worker/run_config.h"
#include "run_exec.h"

/* Open MPI's shared-memory eager limit (btl_vader_eager_limit, 4 KiB by default, the
 * header included): a larger message waits for its receiver to post the receive, so rank
 * 0 would wait for a busy worker to finish its run before it could serve anyone else. An
 * assignment stays under it, with room for the transport's header (a few dozen bytes):
 * paths derived from out_path and the run's id are not sent (run_exec.h). */
#define PROTOCOL_EAGER_LIMIT 4096
#define PROTOCOL_HEADER_ROOM 128
_Static_assert(sizeof(RunAssignment) + PROTOCOL_HEADER_ROOM <= PROTOCOL_EAGER_LIMIT,
               "RunAssignment no longer fits Open MPI's shared-memory eager limit");

enum {
    TAG_READY = 11,
    TAG_ASSIGN,
    TAG_EVENTS,
    TAG_END,
    TAG_STOP,
    TAG_CKPT,
    TAG_CALIB,
    TAG_CALIB_DONE
};
/* STOP_ABANDON: stop the run in progress without a checkpoint (a joined sweep gave it to
 * another process, join.h) */
enum { STOP_EXIT = 0, STOP_CHECKPOINT = 1, STOP_ABANDON = 2 };

typedef struct {
    uint32_t run, attempt;
    int32_t status; /* RunStatus */
    int32_t rank;
    int64_t ckpt_step; /* RunResult.ckpt_step */
    int32_t io_errno;  /* RunResult.io_errno */
    char host[HOST_MAX];
} WorkerEnd;

typedef struct {
    uint32_t run, attempt;
    int64_t step;
    char path[ABL_PATH_MAX];
} WorkerCheckpoint;

typedef struct {
    uint32_t run, trial;
    int32_t ok; /* 0: failed, message says why */
    int32_t reserved;
    CalibTrial t;
    char message[256];
} WorkerCalib;

#endif
