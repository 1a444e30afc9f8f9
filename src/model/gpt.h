/* The GPT: parameters in one contiguous buffer addressed through a table of named tensors,
 * activations likewise; forward, backward and nothing that allocates inside a step.
 *
 * Block (x is the residual stream, (B,T,C)):
 *   pre : x = x + attn(n1(x));          x = x + mlp(n2(x))
 *   post: x = n1(x + attn(x));          x = n2(x + mlp(x))
 *   peri: x = x + n1o(attn(n1(x)));     x = x + n2o(mlp(n2(x)))
 *   none: x = x + attn(x);              x = x + mlp(x)
 * attn: qkv = x W_qkv^T (+b); q,k optionally normalized per head over head_dim, then
 *   rotated (RoPE, half-split pairs (i, i+hd/2)); causal softmax(q k^T / sqrt(hd)) v with
 *   query head h reading kv head h / (n_head / n_kv_head); out = y W_o^T (+b).
 * mlp: h = act(x W_fc^T (+b)); GLU variants split W_fc's rows into gate [0,ff) and value
 *   [ff,2ff) and use act(gate) * value; out = h W_proj^T (+b).
 * Matrices are (out, in) as in torch.nn.Linear. */
#ifndef ABLATE_MODEL_GPT_H
#define ABLATE_MODEL_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* Every parameter tensor, in buffer order. Per-layer tensors are stacked with a leading
 * n_layer dimension (llm.c style); a tensor absent under the config has size 0. */
typedef enum {
    T_WTE,          /* (V, C) */
    T_WPE,          /* (T, C) learned positions */
    T_IN_NORM_W,    /* (C) */
    T_IN_NORM_B,    /* (C) layernorm shift */
    T_ATTN_NORM_W,  /* (L, C) */
    T_ATTN_NORM_B,  /* (L, C) */
    T_QKV_W,        /* (L, (H + 2 KV) hd, C): q rows, then k, then v */
    T_QKV_B,        /* (L, (H + 2 KV) hd) */
    T_Q_NORM_W,     /* (L, hd) */
    T_Q_NORM_B,     /* (L, hd) */
    T_K_NORM_W,     /* (L, hd) */
    T_K_NORM_B,     /* (L, hd) */
    T_ATTN_PROJ_W,  /* (L, C, C) */
    T_ATTN_PROJ_B,  /* (L, C) */
    T_ATTN_ONORM_W, /* (L, C) peri: norm of the attention output */
    T_ATTN_ONORM_B, /* (L, C) */
    T_MLP_NORM_W,   /* (L, C) */
    T_MLP_NORM_B,   /* (L, C) */
    T_FC_W,         /* (L, UP, C), UP = ff or 2 ff (GLU) */
    T_FC_B,         /* (L, UP) */
    T_FC_PROJ_W,    /* (L, C, ff) */
    T_FC_PROJ_B,    /* (L, C) */
    T_MLP_ONORM_W,  /* (L, C) peri */
    T_MLP_ONORM_B,  /* (L, C) */
    T_FINAL_NORM_W, /* (C) */
    T_FINAL_NORM_B, /* (C) */
    T_LM_HEAD,      /* (V, C), absent when tied to wte */
    T_COUNT
} TensorId;

typedef enum { INIT_NORMAL, INIT_RESIDUAL, INIT_ONES, INIT_ZEROS } InitKind;

typedef struct {
    const char *name;
    int ndim;
    int shape[3];
    size_t offset; /* floats from the start of the buffer */
    size_t size;   /* floats; 0 = absent */
    int decay;     /* weight decay applies: 2-D per layer (matrices and embeddings) */
    InitKind init;
    int per_layer; /* leading dimension is n_layer */
} TensorInfo;

/* Fills the table for a config; returns the total number of floats. */
size_t gpt_tensor_table(const ModelConfig *c, TensorInfo t[T_COUNT]);

/* Activation statistics gathered in forward when GPT.collect_stats is set. */
typedef struct {
    double zero_frac, max, min, mean, rms; /* MLP hidden after the nonlinearity */
    double resid_rms;                      /* residual stream after the block */
    double attn_entropy[MODEL_MAX_HEADS];  /* per head, nats, mean over (b, t) */
} LayerStats;

typedef struct {
    ModelConfig cfg;
    int B, T; /* capacity: forward may use any B' <= B, T' <= T */
    TensorInfo tensors[T_COUNT];
    size_t n_params;
    float *params, *grads;
    float *acts; /* one buffer behind every activation below */
    size_t n_acts;
    /* Activations (see gpt.c for shapes); set by gpt_alloc. */
    struct GptActs *a;
    int collect_stats;
    LayerStats *stats; /* [n_layer] */
    float loss;
    long correct; /* rows whose argmax equals the target in the last forward */
    int cur_B, cur_T;
} GPT;

/* Allocates parameters, gradients and activations for batches up to (B, T). */
int gpt_alloc(GPT *m, const ModelConfig *c, int B, int T, char err[ABL_ERR_MAX]);
void gpt_free(GPT *m);
/* Bytes gpt_alloc takes for (B, T): parameters, gradients and activations (a double, so an
 * absurd configuration is measured, never wrapped). */
double gpt_alloc_bytes(const ModelConfig *c, int B, int T);
/* Deterministic initialization: N(0, init_std) matrices and embeddings, residual output
 * projections N(0, init_std / sqrt(2 n_layer)), gains 1, biases and shifts 0. Tensor i
 * draws from stream (RNG_STREAM_INIT, i) so the values do not depend on other tensors. */
void gpt_init_weights(GPT *m, uint64_t seed);

/* x, y: (B, T) token ids, B <= m->B and T <= m->T. Without targets (y == NULL) leaves the
 * logits in gpt_logits(m). With targets returns the mean cross-entropy, counts argmax hits in
 * m->correct, and leaves softmax probabilities in gpt_logits(m) for gpt_backward. */
float gpt_forward(GPT *m, const int32_t *x, const int32_t *y, int B, int T);
/* Gradients of the last forward's mean loss, ACCUMULATED into m->grads. */
void gpt_backward(GPT *m);
void gpt_zero_grad(GPT *m);
/* (B, T, V) logits / probabilities / dlogits of the last forward or backward. */
float *gpt_logits(GPT *m);

/* L2 norm of all gradients, and of the gradients of one layer's tensors. */
double gpt_grad_norm(const GPT *m);
double gpt_layer_grad_norm(const GPT *m, int layer);

#endif
