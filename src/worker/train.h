/* One run: the training loop over a dataset, evaluation, statistics, samples, and the
 * state a checkpoint needs. Everything it measures leaves through an EventSink. */
#ifndef ABLATE_WORKER_TRAIN_H
#define ABLATE_WORKER_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "model/gpt.h"
#include "data.h"
#include "events.h"
#include "run_config.h"
#include "run_health.h"
#include "val_stats.h"

typedef struct {
    RunConfig cfg;      /* resolved: model.vocab_size filled in from the data */
    uint64_t seed;      /* the run's (samples; the default of the two below) */
    uint64_t data_seed; /* the training batches' order (train.data_seed, else seed) */
    const Dataset *data;
    GPT gpt;
    float *m, *v;     /* AdamW moments, laid out like the parameters */
    int32_t *x, *y;   /* (B,T) batch */
    long total_steps; /* -1 for a time budget */
    /* > 0: a successive-halving rung (a tune: sweep): train to this step of the full
     * budget's schedule, evaluate there, then checkpoint and stop (interrupted) */
    long stop_step;
    /* progress: everything a checkpoint must restore */
    long step, tokens;
    double train_seconds;
    double val_loss, val_acc;   /* last evaluation (NaN before the first) */
    double test_loss, test_acc; /* the test split's, at the end of a done run (NaN: none) */
    double val_aux;             /* its auxiliary (MoE) losses, mean over the batches */
    ValStats *val_stats;        /* [n_layer] its activation statistics (stats.val; else NULL) */
    double *layer_grad_norm;    /* [n_layer] on a statistics step, before clipping */
    long eval_step;
    /* what the last validation evaluation scored: the number of target tokens and an FNV-1a
     * digest of their (stream position, id) pairs in order; equal across model.context for
     * the same data and train.eval_tokens (dataset_eval_layout) */
    long eval_targets;
    uint64_t eval_digest;
    RunHealth health;                   /* the instability rule's verdict so far (run_health.h) */
    char attempt_start_utc[EV_UTC_MAX]; /* when trainer_run last began (provenance.h) */
} Trainer;

/* CHECKPOINT: save, then stop (interrupted). SAVE: save and go on (periodic checkpoints;
 * a failed save is the callback's to report, training continues). ABORT: stop now. */
typedef enum { TRAIN_CONTINUE, TRAIN_CHECKPOINT, TRAIN_SAVE, TRAIN_ABORT } TrainPoll;

typedef struct {
    /* Asked between steps: go on, save and go on, checkpoint (save, then stop) or stop. */
    TrainPoll (*poll)(void *poll_ctx);
    void *poll_ctx;
    int (*save)(void *save_ctx, const Trainer *t);
    void *save_ctx;
} TrainControl;

int trainer_init(Trainer *t, const RunConfig *cfg, uint64_t seed, const Dataset *d,
                 char err[ABL_ERR_MAX]);
void trainer_free(Trainer *t);
/* The memory a run of this config (model.vocab_size resolved) takes while it trains and
 * samples, in bytes: model, gradients, activations, optimizer state, batch, KV cache and a
 * token stream of data_tokens. The planner refuses runs above its limit with it. */
double trainer_memory_bytes(const RunConfig *cfg, long data_tokens);

/* Trains to the budget (or until ctl->poll says stop, or to t->stop_step: evaluated there,
 * then checkpointed and interrupted), then evaluates and samples. Emits start
 * (unless resuming), step, eval, act, sample and end events. Returns the status; the end
 * event is filled in *end (also for RUN_INTERRUPTED, which emits no end event). */
RunStatus trainer_run(Trainer *t, EventSink *sink, const TrainControl *ctl, EndEvent *end);

/* A timing trial (calibrate.h): warmup untimed steps, then steps timed ones, each the real
 * optimizer step of trainer_run (no evaluation, statistics, samples or events); returns
 * the seconds of the timed steps, measured as trainer_run measures training time. */
double trainer_time_steps(Trainer *t, int warmup, int steps);

/* Validation loss and next-token accuracy over the fixed validation windows; with stats.val,
 * also the activation statistics over them, in t->val_stats. */
void trainer_evaluate(Trainer *t, double *val_loss, double *val_acc);

/* Checkpoint: progress, parameters, AdamW moments and the instability verdict. The RNG
 * needs no state: batches and samples are pure functions of (seed, step). */
int trainer_save(const Trainer *t, FILE *f);
int trainer_load(Trainer *t, FILE *f, char err[ABL_ERR_MAX]);

/* Fills a start event (params, FLOPs, KV bytes, BLAS core) for a resolved config. */
void trainer_start_event(const RunConfig *cfg, StartEvent *ev);

#endif
