/* The worker side of `ablate run`: announce, then train whatever rank 0 assigns. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/backoff.h"
#include "util/clock.h"
#include "util/grow.h"
#include "worker/blas_env.h"
#include "orchestrator/record/event_codec.h"
#include "protocol.h"
#include "run_exec.h"
#include "sweep.h"
#include "sweep_signals.h"

typedef struct {
    uint8_t *buf;
    size_t cap;
} WorkerCtx; /* the send buffer for event batches */

static int worker_send_events(void *ctx, const RunAssignment *a, const uint8_t *packed,
                              size_t len) {
    WorkerCtx *w = ctx;
    if (GROW(w->buf, w->cap, len + 8) != 0) return -1;
    memcpy(w->buf, &a->run, 4);
    memcpy(w->buf + 4, &a->attempt, 4);
    memcpy(w->buf + 8, packed, len);
    return MPI_Send(w->buf, (int)(len + 8), MPI_BYTE, 0, TAG_EVENTS, MPI_COMM_WORLD) == MPI_SUCCESS
               ? 0
               : -1;
}

static int worker_checkpointed(void *ctx, const RunAssignment *a, int64_t step, const char *path) {
    (void)ctx;
    WorkerCheckpoint c;
    memset(&c, 0, sizeof c);
    c.run = a->run;
    c.attempt = a->attempt;
    c.step = step;
    snprintf(c.path, sizeof c.path, "%s", path);
    return MPI_Send(&c, (int)sizeof c, MPI_BYTE, 0, TAG_CKPT, MPI_COMM_WORLD) == MPI_SUCCESS ? 0
                                                                                             : -1;
}

/* Between steps: our own SIGUSR1 (taken, so it stops only the run in hand: rank 0 requeues
 * it from its checkpoint), or rank 0 asking us to checkpoint (it sends STOP only with
 * STOP_CHECKPOINT while a run is in progress). Workers keep SIGTERM's default. */
static TrainPoll worker_poll(void *ctx) {
    (void)ctx;
    if (sweep_signal_take_usr1()) return TRAIN_CHECKPOINT;
    int flag = 0;
    MPI_Iprobe(0, TAG_STOP, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    if (flag) {
        int32_t mode;
        MPI_Recv(&mode, 1, MPI_INT32_T, 0, TAG_STOP, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return mode == STOP_ABANDON ? TRAIN_ABORT : TRAIN_CHECKPOINT;
    }
    return TRAIN_CONTINUE;
}

/* Waits for rank 0's next message without spinning (util/backoff.h): 50 us doubling to
 * 20 ms between probes, at most 1% of the last run's length (last_run seconds; 0 before
 * the first) while the wait is as short as a gap between runs: the latency this adds to a
 * run's start stays 1% of a run, and a worker left idle longer (the sweep's end, a
 * calibration trial on another rank) sleeps as long as before. */
static void wait_for_rank0(MPI_Status *st, double last_run) {
    Backoff b = BACKOFF_INIT(50000, 20000000);
    long cap = backoff_cap_share(&b, last_run, 100);
    double since = clock_seconds();
    for (;;) {
        int flag = 0;
        MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, st);
        if (flag) return;
        if (cap && clock_seconds() - since > 10 * last_run) cap = 0;
        backoff_sleep(&b, cap);
    }
}

/* One calibration trial (TAG_CALIB): time it, report it. */
static void calibrate(int rank, VocabCache *vc) {
    RunAssignment a;
    MPI_Recv(&a, (int)sizeof a, MPI_BYTE, 0, TAG_CALIB, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    WorkerCalib wc;
    memset(&wc, 0, sizeof wc);
    wc.run = a.run;
    wc.trial = a.attempt;
    char err[ABL_ERR_MAX] = "";
    wc.ok = run_calibrate(&a, vc, &wc.t, err) == 0;
    if (!wc.ok) snprintf(wc.message, sizeof wc.message, "rank %d: %s", rank, err);
    MPI_Send(&wc, (int)sizeof wc, MPI_BYTE, 0, TAG_CALIB_DONE, MPI_COMM_WORLD);
}

int sweep_worker(int rank) {
    int nranks;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    sweep_gather_hostnames(rank, nranks);
    char host[HOST_MAX] = "";
    gethostname(host, sizeof host - 1);
    blas_set_threads();
    MPI_Send(host, (int)strlen(host) + 1, MPI_CHAR, 0, TAG_READY, MPI_COMM_WORLD);
    VocabCache *vc = vocab_cache_new();
    WorkerCtx w = {NULL, 0};
    RunOutput out = {worker_send_events, worker_checkpointed, worker_poll, &w};
    double last_run = 0;
    for (;;) {
        MPI_Status st;
        wait_for_rank0(&st, last_run);
        if (st.MPI_TAG == TAG_CALIB) {
            calibrate(rank, vc);
            continue;
        }
        if (st.MPI_TAG == TAG_STOP) {
            int32_t mode;
            MPI_Recv(&mode, 1, MPI_INT32_T, 0, TAG_STOP, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (mode == STOP_EXIT) break;
            continue; /* a checkpoint request that arrived between runs: nothing to save */
        }
        RunAssignment a;
        MPI_Recv(&a, (int)sizeof a, MPI_BYTE, 0, TAG_ASSIGN, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        /* a SIGUSR1 that came while this worker held no run concerned no run */
        sweep_signal_take_usr1();
        RunResult res;
        double t0 = clock_seconds();
        RunStatus rs = run_execute(&a, vc, &out, &res);
        last_run = clock_seconds() - t0;
        WorkerEnd we = {a.run, a.attempt, (int32_t)rs, rank, res.ckpt_step, res.io_errno, {0}};
        memcpy(we.host, host, sizeof we.host);
        uint8_t msg[sizeof we + EVENT_PACK_MAX];
        Event ev = {.kind = EV_END};
        ev.u.end = res.end;
        size_t n = event_pack(&ev, msg + sizeof we, EVENT_PACK_MAX);
        memcpy(msg, &we, sizeof we);
        MPI_Send(msg, (int)(sizeof we + n), MPI_BYTE, 0, TAG_END, MPI_COMM_WORLD);
    }
    free(w.buf);
    vocab_cache_free(vc);
    return 0;
}
