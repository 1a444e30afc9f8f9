/* What a run reports: a stream of typed events through a small sink interface. The JSON
 * Lines printer, the MPI batcher and the HDF5 writer are all sinks.
 *
 * Each kind's fields are declared once, below, as X-macro lists: name, type, size, enum
 * names, units and description. The lists generate the structs here and the field tables
 * (event_schema.h) from which the binary codec, the JSON printer, the HDF5 columns and the
 * schema tables of docs/hdf5-schema.md are all derived. To add a field: append one line at
 * the END of its kind's list (the journal keeps older events readable: the codec tags how
 * many fields an event carries, see event_codec.h; EVENT_*_V1 and EVENT_*_V2 are the counts
 * of the two older encodings and never change).
 *
 * X(S, name, type, n, names, units, description): type is a FieldType (field.h), each row
 * becomes one FieldDesc, the descriptor knobs use too. */
#ifndef ABLATE_WORKER_EVENTS_H
#define ABLATE_WORKER_EVENTS_H

#include <stddef.h>

#include "field.h"
#include "run_config.h"

#define ABL_MAX_HEADS  MODEL_MAX_HEADS
#define ABL_SAMPLE_MAX 4096
#define ABL_SAMPLE_IDS 4096 /* bytes of a sample's ids as text ("464 3290 ...") */

typedef enum { EV_START, EV_STEP, EV_EVAL, EV_ACT, EV_SAMPLE, EV_END, EV_KIND_COUNT } EventKind;
/* RUN_NOT_NEEDED: a planned run of a replicate: sweep that its contrasts settled without
 * (schedule/adaptive.h); never trained, journaled so that a resume and the view know. */
typedef enum {
    RUN_DONE,
    RUN_DIVERGED,
    RUN_FAILED,
    RUN_INTERRUPTED,
    RUN_NOT_NEEDED,
    RUN_STATUS_COUNT
} RunStatus;
typedef enum { SAMPLE_GREEDY, SAMPLE_TEMPERATURE, SAMPLE_KIND_COUNT } SampleKind;
/* Which clause of the instability rule fired first (run_health.h, docs/metrics.md). */
typedef enum {
    INSTAB_NONE,
    INSTAB_NONFINITE,
    INSTAB_ABOVE_UNIFORM,
    INSTAB_LOSS_SPIKE,
    INSTAB_COUNT
} Instability;
/* What repeats in a sample (sample_metrics.h): nothing, one token (the degenerate rule) or
 * a unit of tokens looping to the end. */
typedef enum { REP_NONE, REP_TOKEN_RUN, REP_NGRAM_LOOP, REP_COUNT } Repetition;
/* What an act row's statistics are taken over (docs/metrics.md). */
typedef enum { ACT_SPLIT_TRAIN, ACT_SPLIT_VAL, ACT_SPLIT_COUNT } ActSplit;

extern const char *const event_kind_names[EV_KIND_COUNT];
extern const char *const run_status_names[RUN_STATUS_COUNT];
extern const char *const sample_kind_names[SAMPLE_KIND_COUNT];
extern const char *const instability_names[INSTAB_COUNT];
extern const char *const repetition_names[REP_COUNT];
extern const char *const act_split_names[ACT_SPLIT_COUNT];

#define EV_UTC_MAX 32 /* "2024-05-01T12:00:00.123Z" */

/* clang-format off */
#define EVENT_START_FIELDS(X, S) \
    X(S, params, FT_LONG, 0, NULL, "parameters", "trainable parameters") \
    X(S, flops_per_token, FT_DOUBLE, 0, NULL, "FLOP/token", "training FLOPs per token (docs/metrics.md)") \
    X(S, kv_bytes_per_token, FT_DOUBLE, 0, NULL, "bytes/token", "KV-cache bytes per generated token") \
    X(S, blas_core, FT_STR, 32, NULL, NULL, "OpenBLAS core type the run used") \
    X(S, blas_threads, FT_INT, 0, NULL, "threads", "BLAS threads the run used") \
    X(S, start_utc, FT_STR, EV_UTC_MAX, NULL, "UTC", "when the run started (ISO 8601)") \
    X(S, data_sha256, FT_STR, 65, NULL, NULL, "SHA-256 of the data file's bytes the run trained on (as its worker read them)") \
    X(S, data_bytes, FT_LONG, 0, NULL, "bytes", "size of that data file") \
    X(S, data_vocab, FT_STR, 65, NULL, NULL, "SHA-256 of the tokenizer's vocabulary (char: the data's distinct bytes)") \
    X(S, data_vocab_size, FT_INT, 0, NULL, "tokens", "vocabulary size of the model trained (what model.vocab_size shows)") \
    X(S, active_params, FT_LONG, 0, NULL, "parameters", "parameters one token uses (mixture of experts: without the experts it is not routed to; else = params)")
#define EVENT_START_V1 4
#define EVENT_START_V2 11

#define EVENT_STEP_FIELDS(X, S) \
    X(S, step, FT_LONG, 0, NULL, "steps", "optimizer steps taken (1-based: 1 after the first update)") \
    X(S, tokens, FT_LONG, 0, NULL, "tokens", "training tokens consumed so far") \
    X(S, loss, FT_DOUBLE, 0, NULL, "nats/token", "training loss of this step's batch") \
    X(S, lr, FT_DOUBLE, 0, NULL, "1", "learning rate of this step") \
    X(S, grad_norm, FT_DOUBLE, 0, NULL, "1", "global gradient norm before clipping") \
    X(S, time, FT_DOUBLE, 0, NULL, "s", "training seconds so far")
#define EVENT_STEP_V1 6
#define EVENT_STEP_V2 6

#define EVENT_EVAL_FIELDS(X, S) \
    X(S, step, FT_LONG, 0, NULL, "steps", "optimizer steps taken when evaluated (1-based)") \
    X(S, val_loss, FT_DOUBLE, 0, NULL, "nats/token", "validation loss") \
    X(S, val_acc, FT_DOUBLE, 0, NULL, "fraction", "validation next-token accuracy") \
    X(S, tokens, FT_LONG, 0, NULL, "tokens", "training tokens consumed at that step") \
    X(S, time, FT_DOUBLE, 0, NULL, "s", "training seconds at that step (NaN in version-1 journals)") \
    X(S, val_aux_loss, FT_DOUBLE, 0, NULL, "1", "auxiliary losses on the validation batches, weights applied (mixture of experts: balance + z-loss summed over the MoE blocks, mean over batches; 0 without); val_loss excludes them")
#define EVENT_EVAL_V1 3
#define EVENT_EVAL_V2 6

#define EVENT_ACT_FIELDS(X, S) \
    X(S, step, FT_LONG, 0, NULL, "steps", "optimizer steps taken (1-based)") \
    X(S, layer, FT_INT, 0, NULL, "layer", "block index (0-based)") \
    X(S, zero_frac, FT_DOUBLE, 0, NULL, "fraction", "MLP hidden activation after the nonlinearity (GLU: the gated product): share of exact zeros") \
    X(S, max, FT_DOUBLE, 0, NULL, "1", "maximum of that activation") \
    X(S, min, FT_DOUBLE, 0, NULL, "1", "minimum of that activation") \
    X(S, mean, FT_DOUBLE, 0, NULL, "1", "mean of that activation") \
    X(S, rms, FT_DOUBLE, 0, NULL, "1", "root mean square of that activation") \
    X(S, resid_rms, FT_DOUBLE, 0, NULL, "1", "residual stream rms after the block") \
    X(S, grad_norm, FT_DOUBLE, 0, NULL, "1", "gradient norm of the layer's parameters, before clipping") \
    X(S, n_head, FT_INT, 0, NULL, "heads", "query heads (entries of attn_entropy)") \
    X(S, attn_entropy, FT_HEADS, ABL_MAX_HEADS, NULL, "nats", "attention entropy per head, mean over query positions") \
    X(S, near_zero_frac, FT_DOUBLE, 0, NULL, "fraction", "share of that activation with abs(h) <= 0.1 x its rms (exact zeros included; docs/metrics.md)") \
    X(S, moe_experts, FT_INT, 0, NULL, NULL, "experts of the block (1: a dense MLP, and the moe_ fields below are 0)") \
    X(S, router_entropy, FT_DOUBLE, 0, NULL, "nats", "MoE router: entropy of its probabilities, mean over tokens") \
    X(S, moe_balance, FT_DOUBLE, 0, NULL, "1", "MoE load-balancing loss of the block, alpha E sum f_i P_i (weight applied)") \
    X(S, moe_zloss, FT_DOUBLE, 0, NULL, "1", "MoE router z-loss of the block (weight applied)") \
    X(S, moe_dropped, FT_DOUBLE, 0, NULL, "fraction", "share of the token-expert assignments dropped by the capacity") \
    X(S, moe_max_frac, FT_DOUBLE, 0, NULL, "fraction", "largest share f_i of assignments routed to one expert (1/E: balanced, 1: collapsed)") \
    X(S, expert_frac, FT_STR, 512, NULL, "fraction", "f_i of every expert i, space-separated (%.4g each; empty for a dense block)") \
    X(S, moh_entropy, FT_DOUBLE, 0, NULL, "nats", "mixture of heads: entropy of the routed heads' router, mean over tokens (0 without)") \
    X(S, moh_balance, FT_DOUBLE, 0, NULL, "1", "mixture of heads: the block's balance loss, beta sum f_i P_i (weight applied)") \
    X(S, head_frac, FT_STR, 512, NULL, "fraction", "mixture of heads: share of tokens each head is active for, space-separated (shared heads 1; empty without)") \
    X(S, pre_max, FT_DOUBLE, 0, NULL, "1", "maximum of the MLP hidden pre-activation, the nonlinearity's input (GLU: the gate's input; NaN in older files)") \
    X(S, pre_min, FT_DOUBLE, 0, NULL, "1", "minimum of that pre-activation") \
    X(S, split, FT_ENUM, ACT_SPLIT_COUNT, act_split_names, NULL, "train: one training step's batch; val: every validation batch of the evaluation at that step (stats.val; no attention, gradient or routing statistics)")
#define EVENT_ACT_V1 11
#define EVENT_ACT_V2 22

#define EVENT_SAMPLE_FIELDS(X, S) \
    X(S, kind, FT_ENUM, SAMPLE_KIND_COUNT, sample_kind_names, NULL, "greedy or temperature") \
    X(S, temperature, FT_DOUBLE, 0, NULL, "1", "sampling temperature (0 = greedy)") \
    X(S, n_tokens, FT_INT, 0, NULL, "tokens", "tokens generated") \
    X(S, text, FT_TEXT, ABL_SAMPLE_MAX, NULL, NULL, "the decoded sample (prompt excluded)") \
    X(S, tokens_per_s, FT_DOUBLE, 0, NULL, "tokens/s", "generation speed with the KV cache") \
    X(S, distinct_ratio, FT_DOUBLE, 0, NULL, "fraction", "distinct tokens / tokens") \
    X(S, longest_run, FT_INT, 0, NULL, "tokens", "longest run of one repeated token") \
    X(S, top_token_frac, FT_DOUBLE, 0, NULL, "fraction", "share of the most frequent token") \
    X(S, degenerate, FT_BOOL, 0, NULL, NULL, "judged degenerate (docs/metrics.md)") \
    X(S, ids, FT_TEXT, ABL_SAMPLE_IDS, NULL, NULL, "the generated token ids, space-separated (as many as fit; text is them decoded)") \
    X(S, repetition, FT_ENUM, REP_COUNT, repetition_names, NULL, "none, token_run (degenerate) or ngram_loop: what repeats (docs/metrics.md)") \
    X(S, loop_period, FT_INT, 0, NULL, "tokens", "tokens in the unit the sample ends looping on (0: no loop)") \
    X(S, loop_frac, FT_DOUBLE, 0, NULL, "fraction", "share of the sample that final loop covers (0: no loop)")
#define EVENT_SAMPLE_V1 9
#define EVENT_SAMPLE_V2 13

#define EVENT_END_FIELDS(X, S) \
    X(S, status, FT_ENUM, RUN_STATUS_COUNT, run_status_names, NULL, "done, diverged, failed, interrupted or not_needed (a replicate: sweep settled without it)") \
    X(S, steps, FT_LONG, 0, NULL, "steps", "optimizer steps taken") \
    X(S, tokens, FT_LONG, 0, NULL, "tokens", "training tokens consumed") \
    X(S, train_seconds, FT_DOUBLE, 0, NULL, "s", "training time (evaluation and sampling excluded)") \
    X(S, tokens_per_s, FT_DOUBLE, 0, NULL, "tokens/s", "training throughput") \
    X(S, final_val_loss, FT_DOUBLE, 0, NULL, "nats/token", "validation loss at the end") \
    X(S, final_val_acc, FT_DOUBLE, 0, NULL, "fraction", "validation accuracy at the end") \
    X(S, message, FT_STR, 256, NULL, NULL, "why a run failed or diverged") \
    X(S, attempt_start_utc, FT_STR, EV_UTC_MAX, NULL, "UTC", "when this attempt started (ISO 8601)") \
    X(S, end_utc, FT_STR, EV_UTC_MAX, NULL, "UTC", "when this attempt ended (ISO 8601)") \
    X(S, peak_rss, FT_LONG, 0, NULL, "bytes", "peak resident memory of the process during the attempt (-1 unknown)") \
    X(S, slurm_job_id, FT_STR, 32, NULL, NULL, "SLURM_JOB_ID of the attempt (empty outside SLURM)") \
    X(S, slurm_array_task_id, FT_STR, 16, NULL, NULL, "SLURM_ARRAY_TASK_ID") \
    X(S, slurm_restart_count, FT_INT, 0, NULL, NULL, "SLURM_RESTART_COUNT (-1 if unset)") \
    X(S, slurm_partition, FT_STR, 64, NULL, NULL, "SLURM_JOB_PARTITION") \
    X(S, slurm_nodelist, FT_STR, 256, NULL, NULL, "SLURM_JOB_NODELIST") \
    X(S, instability, FT_ENUM, INSTAB_COUNT, instability_names, NULL, "none, nonfinite, above_uniform or loss_spike: the instability rule's clause that fired first (docs/metrics.md); a done run may carry it") \
    X(S, unstable_step, FT_LONG, 0, NULL, "steps", "step at which it fired (0: never)") \
    X(S, unstable_loss, FT_DOUBLE, 0, NULL, "nats/token", "training loss of that step (NaN: never)") \
    X(S, attempt_blas_core, FT_STR, 32, NULL, NULL, "OpenBLAS core type of this attempt (blas_core is the first attempt's; a run whose attempts differ matches neither)") \
    X(S, attempt_blas_threads, FT_INT, 0, NULL, "threads", "BLAS threads of this attempt (blas_threads is the first attempt's)") \
    X(S, final_test_loss, FT_DOUBLE, 0, NULL, "nats/token", "loss on the held-out test split (data.test_fraction), once, on the final weights of a done run (NaN: no test split)") \
    X(S, final_test_acc, FT_DOUBLE, 0, NULL, "fraction", "next-token accuracy on the test split (NaN: no test split)") \
    X(S, tune_rung, FT_INT, 0, NULL, NULL, "a tune: sweep's tuning run: the successive-halving rung (0-based) this attempt trained to; a done run stopped at a rung before the last was not promoted (-1: not a tuning run)")
#define EVENT_END_V1 8
#define EVENT_END_V2 21
/* clang-format on */

/* Struct members from the lists. */
#define EF_CTYPE_FT_LONG   long
#define EF_CTYPE_FT_INT    int
#define EF_CTYPE_FT_DOUBLE double
#define EF_CTYPE_FT_BOOL   int
#define EF_CTYPE_FT_ENUM   int
#define EF_CTYPE_FT_STR    char
#define EF_CTYPE_FT_TEXT   char
#define EF_CTYPE_FT_HEADS  double
#define EF_DIM_FT_LONG(n)
#define EF_DIM_FT_INT(n)
#define EF_DIM_FT_DOUBLE(n)
#define EF_DIM_FT_BOOL(n)
#define EF_DIM_FT_ENUM(n)
#define EF_DIM_FT_STR(n)   [n]
#define EF_DIM_FT_TEXT(n)  [n]
#define EF_DIM_FT_HEADS(n) [n]
#define EF_EXTRA_FT_LONG(name)
#define EF_EXTRA_FT_INT(name)
#define EF_EXTRA_FT_DOUBLE(name)
#define EF_EXTRA_FT_BOOL(name)
#define EF_EXTRA_FT_ENUM(name)
#define EF_EXTRA_FT_STR(name)
#define EF_EXTRA_FT_TEXT(name) int name##_len; /* bytes of text used */
#define EF_EXTRA_FT_HEADS(name)
#define EF_MEMBER(S, name, type, n, names, units, desc)                                            \
    EF_CTYPE_##type name EF_DIM_##type(n);                                                         \
    EF_EXTRA_##type(name)

typedef struct {
    EVENT_START_FIELDS(EF_MEMBER, _)
    const RunConfig *config; /* not packed: the journal's PLAN record holds the config */
} StartEvent;
typedef struct {
    EVENT_STEP_FIELDS(EF_MEMBER, _)
} StepEvent;
typedef struct {
    EVENT_EVAL_FIELDS(EF_MEMBER, _)
} EvalEvent;
typedef struct {
    EVENT_ACT_FIELDS(EF_MEMBER, _)
} ActEvent;
typedef struct {
    EVENT_SAMPLE_FIELDS(EF_MEMBER, _)
} SampleEvent;
typedef struct {
    EVENT_END_FIELDS(EF_MEMBER, _)
} EndEvent;

typedef struct {
    EventKind kind;
    union {
        StartEvent start;
        StepEvent step;
        EvalEvent eval;
        ActEvent act;
        SampleEvent sample;
        EndEvent end;
    } u;
} Event;

typedef struct EventSink {
    void (*emit)(struct EventSink *self, const Event *ev);
} EventSink;

static inline void sink_emit(EventSink *s, const Event *ev) {
    if (s) s->emit(s, ev);
}

#endif
