/* Everything one run needs: the model plus training, data, statistics and sampling knobs.
 * One struct with defaults, validated in one place (run_config_validate). The names users
 * write (model.n_head, train.lr, ...) are mapped to fields by knobs.h. */
#ifndef ABLATE_WORKER_RUN_CONFIG_H
#define ABLATE_WORKER_RUN_CONFIG_H

#include "model/config.h"

#define ABL_TEXT_MAX 256

typedef enum { SCHED_CONSTANT, SCHED_LINEAR, SCHED_COSINE, SCHED_COUNT } Schedule;
typedef enum { TOK_CHAR, TOK_BYTE, TOK_TOKENS, TOK_GPT2, TOK_COUNT } Tokenizer;

extern const char *const schedule_names[SCHED_COUNT];
extern const char *const tokenizer_names[TOK_COUNT];

typedef struct {
    double lr;
    double beta1, beta2, eps;
    double weight_decay; /* applied to 2-D tensors (matrices, embeddings) only */
    Schedule schedule;
    int warmup_steps;
    double min_lr;
    double grad_clip; /* global gradient-norm clip; 0 = off */
    int batch_size;
    /* Exactly one budget is non-zero. */
    long steps;
    long tokens;
    double seconds; /* training time only; evaluation and statistics excluded */
    /* training FLOPs (model_flops_per_token x tokens: active FLOPs for a mixture), rounded
     * up to whole steps: configurations of other sizes compared at equal compute */
    double flops;
    /* training tokens per non-embedding parameter (model_nonembedding_param_count),
     * rounded up to whole steps: a budget that scales with the model, for a ladder of
     * sizes (docs/spec.md, "ladder") */
    double tokens_per_param;
    /* Calibrated fixed time (docs/spec.md): with seconds > 0 and calibrate = K > 0, a sweep
     * first times K short trials of the configuration (calibrate_steps steps each after
     * CALIB_WARMUP_STEPS), then trains it for calibrated_steps = round(median tokens/s x
     * seconds / tokens per step) exactly like a steps budget. calibrated_steps is no knob:
     * the sweep sets it from the journaled trials (0: not calibrated, train by time;
     * -1: its calibration failed, the run fails). */
    int calibrate;
    int calibrate_steps;
/* The largest train.seconds a calibrated budget takes: tokens/s x seconds must fit in int64
 * at up to 9.2e9 tokens/s (run_config_validate). */
#define CALIB_MAX_SECONDS 1e9
    long calibrated_steps;
    int eval_every; /* steps; 0 = only at the end */
    long eval_tokens;
    int log_every;  /* step events every N steps (the last step is always logged) */
    long data_seed; /* the order of the training batches; -1: the run's seed (model.init_seed) */
} TrainConfig;

typedef struct {
    char path[ABL_PATH_MAX];
    Tokenizer tokenizer;
    double val_fraction;
    /* the held-out test split: the stream's last test_fraction, after the validation split,
     * scored once at the end (final_test_loss); 0: none. Nothing selects on it. */
    double test_fraction;
    int vocab_size; /* tokens tokenizer only; 0 = 50257 (gpt2: 0 or 50257) */
} DataConfig;

typedef struct {
    int every; /* activation statistics every N steps; 0 = off (always at the end) */
    int val;   /* and over every validation batch at each evaluation (act rows, split val) */
} StatsConfig;

typedef struct {
    char prompt[ABL_TEXT_MAX];
    int tokens;
    double temperature;
} SampleConfig;

typedef struct {
    ModelConfig model;
    TrainConfig train;
    DataConfig data;
    StatsConfig stats;
    SampleConfig sample;
    int save_weights;
} RunConfig;

void run_config_default(RunConfig *c);
/* Checks everything that does not need the data file (vocab_size may still be 0). */
int run_config_validate(const RunConfig *c, char err[ABL_ERR_MAX]);
/* The learning rate at a step under the configured schedule and total steps. */
double run_config_lr(const TrainConfig *t, long step, long total_steps);
/* Total optimizer steps for step/token budgets and a calibrated time budget; -1 for a time
 * budget not (yet) calibrated. */
long run_config_total_steps(const RunConfig *c);

#endif
