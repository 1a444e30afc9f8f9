/* What a run reports: a stream of typed events through a small sink interface. The JSON
 * Lines printer, the MPI batcher and the HDF5 writer are all sinks. */
#ifndef ABLATE_WORKER_EVENTS_H
#define ABLATE_WORKER_EVENTS_H

#include <stddef.h>

#include "run_config.h"

#define ABL_MAX_HEADS  MODEL_MAX_HEADS
#define ABL_SAMPLE_MAX 4096
#define ABL_SAMPLE_IDS 1024 /* token ids kept per sample (the first ones) */

typedef enum { EV_START, EV_STEP, EV_EVAL, EV_ACT, EV_SAMPLE, EV_END, EV_KIND_COUNT } EventKind;
typedef enum { RUN_DONE, RUN_DIVERGED, RUN_FAILED, RUN_INTERRUPTED, RUN_STATUS_COUNT } RunStatus;

extern const char *const event_kind_names[EV_KIND_COUNT];
extern const char *const run_status_names[RUN_STATUS_COUNT];

typedef struct {
    long params;
    double flops_per_token;
    double kv_bytes_per_token;
    char blas_core[32];
    const RunConfig *config;
} StartEvent;

typedef struct {
    long step; /* 1-based: the number of optimizer steps taken */
    long tokens;
    double loss, lr, grad_norm;
    double time; /* training seconds so far */
} StepEvent;

typedef struct {
    long step;
    double val_loss, val_acc;
} EvalEvent;

typedef struct {
    long step;
    int layer;
    /* MLP hidden activation after the nonlinearity (GLU: the gated product). */
    double zero_frac, max, min, mean, rms;
    double resid_rms; /* residual stream after the block */
    double grad_norm; /* of the layer's parameters */
    int n_head;
    double attn_entropy[ABL_MAX_HEADS]; /* nats, mean over query positions */
} ActEvent;

typedef enum { SAMPLE_GREEDY, SAMPLE_TEMPERATURE, SAMPLE_KIND_COUNT } SampleKind;
extern const char *const sample_kind_names[SAMPLE_KIND_COUNT];

typedef struct {
    SampleKind kind;
    double temperature;
    int n_tokens;
    char text[ABL_SAMPLE_MAX]; /* decoded, NUL-terminated (truncated if longer) */
    double tokens_per_s;       /* generation speed with the KV cache */
    double distinct_ratio;     /* distinct tokens / tokens */
    int longest_run;           /* longest run of one repeated token */
    double top_token_frac;     /* share of the most frequent token */
    int degenerate;
    /* the generated token ids (text is them decoded): the first min(n_tokens, ABL_SAMPLE_IDS) */
    int n_ids;
    int32_t ids[ABL_SAMPLE_IDS];
} SampleEvent;

typedef struct {
    RunStatus status;
    long steps, tokens;
    double train_seconds, tokens_per_s;
    double final_val_loss, final_val_acc;
    char message[256];
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
