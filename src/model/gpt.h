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
 * moe (the MLP of an MoE block, model.moe_experts E > 1): router logits z = x W_r^T (E),
 *   p = softmax(z); the k experts of largest z (= of p; ties: the lower index), in that order;
 *   gates g_j = p_{e_j} when k = 1 (Switch), p_{e_j} / sum_j' p_{e_j'} when k > 1 (Mixtral);
 *   out = sum_j g_j mlp_{e_j}(x), each expert an mlp above with its own weights (rows
 *   [e UP, (e+1) UP) of exp_fc.w, [e C, (e+1) C) of exp_proj.w). With a capacity, each
 *   expert takes its first cap assignments in the order (choice j, token): first choices of
 *   every token before second choices; a dropped assignment contributes 0.
 *   Auxiliary losses per MoE block, added to the objective but not to the reported loss:
 *   balance = alpha E sum_i f_i P_i, f_i = share of the N k assignments (before dropping)
 *   routed to i, P_i = mean_t p_i; z = beta mean_t logsumexp(z_t)^2.
 * moh (mixture of heads, model.moh_top_k k > 0; Jin et al. 2024): heads [0, hs) are shared,
 *   [hs, H) routed (R = H - hs). From the attention input x: z = x W_moh^T, rows [0, hs) the
 *   shared router, [hs, H) the routed router, [H, H+2) the two-stage mix; ps, pr, a = softmax
 *   of each part. Head h's output (its hd columns of atty) is multiplied by g_h before the
 *   output projection: g_h = a_0 ps_h (shared), a_1 pr_i for the k routed heads of largest
 *   z (ties: the lower index), 0 for the others. Every head is still computed. Auxiliary
 *   loss: beta sum_i f_i P_i over routed heads, f_i = share of tokens routed to head i (sums
 *   to k), P_i = mean_t pr_i.
 * Matrices are (out, in) as in torch.nn.Linear. */
#ifndef ABLATE_MODEL_GPT_H
#define ABLATE_MODEL_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* Every parameter tensor, in buffer order, as X(TensorId, field of the views below): the
 * embedding end, the per-layer tensors, the head end. Per-layer tensors are stacked with a
 * leading n_layer dimension (llm.c style); a tensor absent under the config has size 0 and
 * a NULL view. Shapes and presence: gpt_tensor_table. */
#define GPT_EMBED_TENSORS(X)                                                                       \
    X(T_WTE, wte)             /* (V, C) */                                                         \
    X(T_WPE, wpe)             /* (T, C) learned positions */                                       \
    X(T_IN_NORM_W, in_norm_w) /* (C) */                                                            \
    X(T_IN_NORM_B, in_norm_b) /* (C) layernorm shift */
#define GPT_LAYER_TENSORS(X)                                                                       \
    X(T_ATTN_NORM_W, attn_norm_w)   /* (L, C) */                                                   \
    X(T_ATTN_NORM_B, attn_norm_b)   /* (L, C) */                                                   \
    X(T_QKV_W, qkv_w)               /* (L, (H + 2 KV) hd, C): q rows, then k, then v */            \
    X(T_QKV_B, qkv_b)               /* (L, (H + 2 KV) hd) */                                       \
    X(T_Q_NORM_W, q_norm_w)         /* (L, hd) */                                                  \
    X(T_Q_NORM_B, q_norm_b)         /* (L, hd) */                                                  \
    X(T_K_NORM_W, k_norm_w)         /* (L, hd) */                                                  \
    X(T_K_NORM_B, k_norm_b)         /* (L, hd) */                                                  \
    X(T_ATTN_PROJ_W, attn_proj_w)   /* (L, C, C) */                                                \
    X(T_ATTN_PROJ_B, attn_proj_b)   /* (L, C) */                                                   \
    X(T_ATTN_ONORM_W, attn_onorm_w) /* (L, C) peri: norm of the attention output */                \
    X(T_ATTN_ONORM_B, attn_onorm_b) /* (L, C) */                                                   \
    X(T_MLP_NORM_W, mlp_norm_w)     /* (L, C) */                                                   \
    X(T_MLP_NORM_B, mlp_norm_b)     /* (L, C) */                                                   \
    X(T_FC_W, fc_w)                 /* (L, UP, C), UP = ff or 2 ff (GLU) */                        \
    X(T_FC_B, fc_b)                 /* (L, UP) */                                                  \
    X(T_FC_PROJ_W, fc_proj_w)       /* (L, C, ff) */                                               \
    X(T_FC_PROJ_B, fc_proj_b)       /* (L, C) */                                                   \
    X(T_MLP_ONORM_W, mlp_onorm_w)   /* (L, C) peri */                                              \
    X(T_MLP_ONORM_B, mlp_onorm_b)   /* (L, C) */
#define GPT_HEAD_TENSORS(X)                                                                        \
    X(T_FINAL_NORM_W, final_norm_w) /* (C) */                                                      \
    X(T_FINAL_NORM_B, final_norm_b) /* (C) */                                                      \
    X(T_LM_HEAD, lm_head)           /* (V, C), absent when tied to wte */
/* The MoE MLP's tensors: per layer, stacked over the MoE blocks only (Lm of them), while the
 * dense MLP's fc/fc_proj tensors stack over the other blocks (model_mlp_slot). After the head
 * in the enum, so the dense tensors keep their ids (and init streams). UPe, FFe: an expert's
 * UP and ff. */
#define GPT_MOE_TENSORS(X)                                                                         \
    X(T_ROUTER_W, router_w)     /* (Lm, E, C) */                                                   \
    X(T_EXP_FC_W, exp_fc_w)     /* (Lm, E UPe, C): expert e's fc.w is rows [e UPe, (e+1) UPe) */   \
    X(T_EXP_FC_B, exp_fc_b)     /* (Lm, E UPe) */                                                  \
    X(T_EXP_PROJ_W, exp_proj_w) /* (Lm, E C, FFe): expert e's fc_proj.w is rows [e C, (e+1) C) */  \
    X(T_EXP_PROJ_B, exp_proj_b) /* (Lm, E C) */                                                    \
    X(T_MOH_W, moh_w)           /* (L, H + 2, C) mixture of heads: shared, routed, mix rows */

#define GPT_TENSOR_ID(id, field) id,
typedef enum {
    GPT_EMBED_TENSORS(GPT_TENSOR_ID) GPT_LAYER_TENSORS(GPT_TENSOR_ID)
        GPT_HEAD_TENSORS(GPT_TENSOR_ID) GPT_MOE_TENSORS(GPT_TENSOR_ID) T_COUNT
} TensorId;

/* Views: one pointer per tensor, into the parameters, the gradients, or the transposed
 * copies the forward multiplies by (src/model/gemm.h; NULL for a matrix without one and for
 * every vector). Built once by gpt_alloc, so the code reads `L->w.fc_w`, not a table lookup. */
#define GPT_TENSOR_FIELD(id, field) float *field;
typedef struct {
    GPT_LAYER_TENSORS(GPT_TENSOR_FIELD)
    GPT_MOE_TENSORS(GPT_TENSOR_FIELD)
} LayerTensors;
typedef struct {
    GPT_EMBED_TENSORS(GPT_TENSOR_FIELD)
    GPT_HEAD_TENSORS(GPT_TENSOR_FIELD)
} ModelTensors;
typedef struct {
    LayerTensors w, g, wt; /* one layer's slices: weights, gradients, transposed copies */
} LayerView;
typedef struct {
    ModelTensors w, g, wt; /* lm_head points at wte (and its gradient) when tied */
} ModelView;

typedef enum { INIT_NORMAL, INIT_RESIDUAL, INIT_ONES, INIT_ZEROS } InitKind;
extern const char *const init_kind_names[4]; /* indexed by InitKind: "normal", "residual", ... */

typedef struct {
    const char *name;
    int ndim;
    int shape[3];
    size_t offset; /* floats from the start of the buffer */
    size_t size;   /* floats; 0 = absent */
    int decay;     /* weight decay applies: 2-D per layer (matrices and embeddings) */
    InitKind init;
    int per_layer; /* leading dimension is a stack of blocks: see stack */
    int stack;     /* which blocks: STACK_ALL (n_layer), STACK_DENSE_MLP, STACK_MOE */
    int fan_in;    /* a linear layer's weight or bias: its input width (model.init torch); 0
                      for embeddings and norm parameters */
} TensorInfo;
enum { STACK_ALL, STACK_DENSE_MLP, STACK_MOE };

/* Fills the table for a config; returns the total number of floats. */
size_t gpt_tensor_table(const ModelConfig *c, TensorInfo t[T_COUNT]);

/* Activation statistics gathered in forward when GPT.collect_stats is set. */
/* near_zero_frac counts |h| <= GPT_NEAR_ZERO x rms(h): scale-free (ReLU^2 maxima run to the
 * hundreds, Tanh stays within 1), and a unit under a tenth of the typical magnitude adds
 * under 1% of the typical energy to the down projection (docs/metrics.md). */
#define GPT_NEAR_ZERO 0.1

typedef struct {
    double zero_frac, max, min, mean, rms; /* MLP hidden after the nonlinearity */
    double near_zero_frac;                 /* of the same, |h| <= GPT_NEAR_ZERO * rms */
    double h_count;                        /* values of it they are over (MoE: routed rows) */
    double pre_max, pre_min; /* its pre-activation, the nonlinearity's input (GLU: the gate's) */
    double resid_rms;        /* residual stream after the block */
    double attn_entropy[MODEL_MAX_HEADS]; /* per head, nats, mean over (b, t) */
    /* MoE blocks (zero elsewhere) */
    double expert_frac[MODEL_MAX_EXPERTS]; /* f_i: share of assignments routed to expert i */
    double router_entropy;                 /* of p, nats, mean over tokens */
    double moe_balance, moe_zloss;         /* the block's auxiliary losses (weights applied) */
    double moe_dropped;                    /* share of assignments dropped by the capacity */
    /* mixture of heads (zero without) */
    double head_frac[MODEL_MAX_HEADS]; /* share of tokens each head is active for */
    double moh_entropy;                /* of the routed heads' router, nats, mean over tokens */
    double moh_balance;                /* the block's balance loss (weight applied) */
} LayerStats;

typedef struct {
    ModelConfig cfg;
    int B, T; /* capacity: forward may use any B' <= B, T' <= T */
    TensorInfo tensors[T_COUNT];
    size_t n_params;
    float *params, *grads;
    ModelView view;    /* the tensors outside the blocks */
    LayerView *layers; /* [n_layer] */
    struct GptActs *a; /* activations and backward scratch for batches up to (B, T) */
    int collect_stats;
    LayerStats *stats; /* [n_layer] */
    float loss;
    float aux_loss; /* the last forward's MoE auxiliary losses (balance + z), summed over blocks */
    long correct;   /* rows whose argmax equals the target in the last forward */
    int cur_B, cur_T;
    double *grad_sums; /* [GPT_NORM_BLOCKS(n_params)] gpt_grad_norm's block sums */
} GPT;

/* Allocates parameters, gradients and activations for batches up to (B, T). */
int gpt_alloc(GPT *m, const ModelConfig *c, int B, int T, char err[ABL_ERR_MAX]);
void gpt_free(GPT *m);
/* Bytes gpt_alloc takes for (B, T): parameters, gradients and activations (a double, so an
 * absurd configuration is measured, never wrapped). */
double gpt_alloc_bytes(const ModelConfig *c, int B, int T);
/* Deterministic initialization. model.init gpt2: N(0, init_std) matrices and embeddings,
 * residual output projections N(0, init_std / sqrt(2 n_layer)), gains 1, biases and shifts
 * 0. model.init torch: PyTorch's default modules, every linear layer's weight and bias
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (nn.Linear, the lm_head and output projections
 * included), embeddings N(0, 1) (nn.Embedding), gains 1 and shifts 0 (nn.LayerNorm);
 * init_std is not used. Tensor i draws from stream (RNG_STREAM_INIT, i) so the values do not
 * depend on other tensors. */
void gpt_init_weights(GPT *m, uint64_t seed);

/* x, y: (B, T) token ids, B <= m->B and T <= m->T. Without targets (y == NULL) it leaves
 * the logits in gpt_logits(m). With targets it returns the mean cross-entropy and counts
 * argmax hits in m->correct; the lm_head and the loss then run tiled over the vocabulary
 * (xent.h), and what it leaves in that buffer is what gpt_backward needs, not the logits. */
float gpt_forward(GPT *m, const int32_t *x, const int32_t *y, int B, int T);
/* Gradients of the last forward's mean loss plus its auxiliary losses (aux_loss),
 * ACCUMULATED into m->grads. */
void gpt_backward(GPT *m);
void gpt_zero_grad(GPT *m);
/* (B, T, V) logits of the last forward without targets. */
float *gpt_logits(GPT *m);

/* Activation buffers for passes of up to (B, T) rows. gpt_alloc makes the model's own, with
 * every layer's activations and the backward's scratch; generation makes one of (1, 1)
 * without the backward's scratch or the attention lanes (it attends over its KV cache). */
typedef struct GptActs GptActs;
GptActs *gpt_acts_alloc(const ModelConfig *c, int B, int T, int training);
void gpt_acts_free(GptActs *a);
/* Bytes gpt_acts_alloc takes (from the same buffer table). */
double gpt_acts_bytes(const ModelConfig *c, int B, int T, int training);

/* One token at position pos < context through the model: the blocks of gpt_forward, except
 * that attention reads the keys and values of positions [0, pos) from k, v ((L, KV, context,
 * hd) each) and stores the token's own there. Returns its (V) logits (inside a). */
const float *gpt_forward_cached(const GPT *m, GptActs *a, float *k, float *v, int pos,
                                int32_t token);

/* L2 norm of all gradients, and of the gradients of one layer's tensors. The first sums
 * blocks of GPT_NORM_BLOCK gradients on their own (on par_threads(): the blocks, never the
 * threads, fix the order, so the same bits for every K) and then the blocks in order. */
#define GPT_NORM_BLOCK     65536
#define GPT_NORM_BLOCKS(n) (((n) + GPT_NORM_BLOCK - 1) / GPT_NORM_BLOCK)
double gpt_grad_norm(const GPT *m);
double gpt_layer_grad_norm(const GPT *m, int layer);

#endif
