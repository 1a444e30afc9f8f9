/* NOT a public interface: only src/model/gpt.c, gpt_moe.c and gpt_moh.c include it (the rest
 * of the tree uses gpt.h). It shares what one pass of the model is among the files that
 * compute it: the sizes (Dims, LayerSizes), the activations (GPT_LAYER_ACTS, GptActs,
 * LayerActs) and the pass (Pass) that gpt.c allocates and slices; the routers' plain loops
 * (gpt_moe.c; the mixture of heads routes with them too); the MLP statistics (gpt.c; the MoE
 * MLP collects them too); and the sublayers the block calls: the mixture of heads (gpt_moh.c)
 * inside attention and the mixture of experts (gpt_moe.c) as the MLP of an MoE block. */
#ifndef ABLATE_MODEL_GPT_INTERNAL_H
#define ABLATE_MODEL_GPT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gpt.h"

/* The sizes every part of the model uses, derived from the config once. */
typedef struct {
    int V, C, L, H, KV, hd, QKV, FF, UP;
    int group;          /* query heads per key/value head */
    int E, K, FFE, UPE; /* experts, experts per token, an expert's ff and UP */
    int Lm, Ld;         /* blocks with the MoE MLP, with the dense MLP */
} Dims;

/* Floats of one layer's slice of each per-layer activation, for passes of up to (B, T) rows. */
typedef struct {
    double BT, BTC, QKV, H, KV, UP, FF; /* UP, FF: the larger of the dense MLP's and k experts' */
    double RE, NK, NKC;                 /* MoE: (B,T,E), (B,T,k), (B,T,k,C); 0 when dense */
    double ints;                        /* MoE: int32 entries of one layer's routing tables */
    double MZ, MH, MC;          /* mixture of heads: (B,T,H+2), (B,T,H), (B,T,C); 0 without */
    double lane_tile, lane_att; /* lane layout (attention.h): (T,hd) and (T,T) per pair */
    int in_place;               /* activation_in_place: fch holds the activation */
} LayerSizes;

/* Every per-layer activation, one row each: X(field, floats of one layer's slice). GptActs
 * holds n_layer slices of each; LayerActs points at one layer's. act_layout sizes them and
 * layer_acts slices them from these rows, in this order, which is the buffer order. */
#define GPT_LAYER_ACTS(X)                                                                          \
    X(n1, z.BTC)      /* (B,T,C) first norm's output (post: of sum1) */                            \
    X(n1_mean, z.BT)  /* (B,T) */                                                                  \
    X(n1_rstd, z.BT)  /* (B,T) */                                                                  \
    X(qkv, z.QKV)     /* (B,T,QKV) projection output */                                            \
    X(q_mean, z.H)    /* (B,T,H) per-head q norm */                                                \
    X(q_rstd, z.H)    /* (B,T,H) */                                                                \
    X(k_mean, z.KV)   /* (B,T,KV) */                                                               \
    X(k_rstd, z.KV)   /* (B,T,KV) */                                                               \
    X(q, z.lane_tile) /* lane layout, one lane per (b, query head) */                              \
    X(k, z.lane_tile) /* k and v copied to every query head of their group */                      \
    X(v, z.lane_tile)                                                                              \
    X(att, z.lane_att) /* lane layout, (T,T) per pair: probabilities */                            \
    X(atty, z.BTC)     /* (B,T,C) heads concatenated */                                            \
    X(ao, z.BTC)       /* (B,T,C) attention output projection */                                   \
    X(aon, z.BTC)      /* (B,T,C) peri: normalized ao */                                           \
    X(aon_mean, z.BT)                                                                              \
    X(aon_rstd, z.BT)                                                                              \
    X(sum1, z.BTC) /* (B,T,C) x + attention (post: before n1) */                                   \
    X(n2, z.BTC)   /* (B,T,C) second norm's output */                                              \
    X(n2_mean, z.BT)                                                                               \
    X(n2_rstd, z.BT)                                                                               \
    X(fch, z.UP) /* (B,T,UP) pre-activation; the activation itself when in place */                \
    X(fch_act, z.in_place ? 0 : z.FF) /* (B,T,FF) the activation; empty when in place */           \
    X(mo, z.BTC)                      /* (B,T,C) MLP output projection */                          \
    X(mon, z.BTC)                     /* (B,T,C) peri: normalized mo */                            \
    X(mon_mean, z.BT)                                                                              \
    X(mon_rstd, z.BT)                                                                              \
    X(sum2, z.BTC) /* (B,T,C) post: before n2 */                                                   \
    X(rlog, z.RE)  /* (B,T,E) MoE router logits */                                                 \
    X(rprob, z.RE) /* (B,T,E) their softmax */                                                     \
    X(gate, z.NK)  /* (B,T,k) gate of each token's j-th expert */                                  \
    X(xg, z.NKC)   /* (B T k, C) packed: the inputs of each expert's tokens, expert by expert */   \
    X(eo, z.NKC)   /* (B T k, C) packed: the experts' outputs (fch/fch_act are packed too) */      \
    X(mz, z.MZ)    /* (B,T,H+2) mixture of heads: router logits (shared, routed, mix) */           \
    X(mp, z.MZ)    /* (B,T,H+2) their softmaxes, part by part */                                   \
    X(mg, z.MH)    /* (B,T,H) head gates (0: a routed head not chosen) */                          \
    X(attg, z.MC)  /* (B,T,C) the gated heads, input of the output projection */

#define GPT_ACT_FIELD(field, size) float *field;

/* Every activation of a pass, pointers into one allocation. Per-layer buffers hold n_layer
 * slices sized for the capacity (B, T); a smaller batch uses a prefix of each slice. Each
 * buffer holds one quantity, named by what it is. */
struct GptActs {
    Dims d;
    int B, T;                  /* capacity */
    LayerSizes z;              /* one layer's slice of each per-layer buffer */
    float *buf;                /* the allocation */
    int32_t *tokens, *targets; /* (B,T) copies of the batch */
    float *encoded;            /* (B,T,C) wte[x] + wpe[t] */
    float *in_mean, *in_rstd;  /* (B,T) */
    float *resid;              /* (L+1, B,T,C): resid[l] block l's input, resid[l+1] its output */
    GPT_LAYER_ACTS(GPT_ACT_FIELD) /* (L, ...) each */
    /* MoE routing tables, int32, (L, ...) each (moe_route fills them) */
    int32_t *sel;  /* (B,T,k) each token's experts, by decreasing probability */
    int32_t *row;  /* (B,T,k) the packed row of each assignment, -1 if dropped */
    int32_t *asg;  /* (B T k) the assignment (token t k + j) of each packed row */
    int32_t *eoff; /* (E+1) each expert's first packed row */
    /* after the blocks */
    float *fn_out, *fn_mean, *fn_rstd; /* (B,T,C) */
    float *logits;                     /* (B,T,V); with targets, xent.h's exps */
    float *xent_max, *xent_sum;        /* (B,T) each row's logit maximum and sum of exps */
    /* forward scratch, one layer at a time */
    float *qk;     /* (B,T,QKV) q and k heads after the per-head norm and RoPE (v rows unused) */
    float *y;      /* lane layout (T,hd): attention output */
    float *scores; /* (context) one query's attention scores against the KV cache */
    float *rope_cos, *rope_sin; /* (context, hd/2) RoPE angles of every position */
    /* backward scratch (training only), one gradient each */
    float *d_resid;         /* (B,T,C) dL/d the residual stream where the backward has reached */
    float *d_sub_in;        /* (B,T,C) dL/d a sublayer's input (the norm output, or x) */
    float *d_sub_out;       /* (B,T,C) dL/d a sublayer's output (post, peri: the norm's input) */
    float *d_atty;          /* (B,T,C) dL/d the concatenated heads */
    float *d_final;         /* (B,T,C) dL/d the final norm's output */
    float *d_embed;         /* (B,T,C) dL/d encoded, through the input norm */
    float *d_h;             /* (B,T,FF) dL/d the MLP hidden (after the activation) */
    float *d_fch;           /* (B,T,UP) dL/d its pre-activation; empty when activation_in_place,
                               where the ReLU's backward turns d_h into it in place */
    float *d_qkv;           /* (B,T,QKV) */
    float *d_q, *d_k, *d_v; /* lane layout, one layer */
    float *d_y;             /* lane layout (T,hd) */
    float *d_qk_row;        /* (H + KV) hd: one token's q and k gradients before the norm */
    float *d_eo, *d_xg;     /* (B T k, C) MoE: dL/d the experts' outputs, inputs (packed) */
    float *d_gate;          /* (B,T,k) dL/d the gates */
    float *d_rlog;          /* (B,T,E) dL/d the router logits */
    float *d_router;        /* (E or H+2, C) doubles: a router weight gradient's sums */
    float *d_mz;            /* (B,T,H+2) dL/d the mixture-of-heads router logits */
    float *attn_scratch;    /* (T) lanes */
    float *xent_tile;       /* the cross-entropy's scratch: its tile, and the factors the
                               forward leaves for the backward (xent.h) */
    /* Transposed copies (in, out) of the forward's weight matrices whose products run through
     * OpenBLAS's small-matrix kernels (gemm.h), which take only the untransposed form;
     * refreshed by every gpt_forward. wt_at[id] is the copy's offset in wt, or NO_WT. */
    float *wt;
    size_t wt_at[T_COUNT];
};

/* One pass through the model: B sequences of T rows at positions pos0 .. pos0 + T - 1.
 * Training attends over the pass's own rows (causally); generation passes one row that
 * attends to the keys and values of earlier positions in k, v, and adds its own. That is
 * the only difference between them. */
typedef struct {
    const GPT *m;
    GptActs *a;
    int B, T, pos0;
    float *k, *v;      /* generation: (L, KV, context, hd) cache; NULL in training */
    LayerStats *stats; /* [n_layer] to collect into, or NULL */
    float *aux;        /* training: the MoE auxiliary losses are added here; NULL otherwise */
} Pass;

/* Layer l's slice of every per-layer activation (llm.c's layer prologue). */
typedef struct {
    float *in, *out; /* the residual stream into and out of the block */
    GPT_LAYER_ACTS(GPT_ACT_FIELD)
    float *h; /* (B,T,FF) the MLP hidden after the activation: fch_act, or fch in place */
    int32_t *sel, *row, *asg, *eoff; /* MoE routing tables */
} LayerActs;

/* ------------------------------------------------------------------- routers (gpt_moe.c) */

/* z (N,E) = x (N,C) W^T (E,C), in double sums in a fixed order. */
void router_logits(float *z, const float *x, const float *w, int N, int C, int E);
/* p (n) = softmax(z (n)) in double: equal logits give equal probabilities. */
void softmax_exact(float *p, const float *z, int n);
/* dz (n) = d/dz of softmax given dp (n) and the probabilities p. */
void softmax_exact_backward(float *dz, const float *dp, const float *p, int n);
/* chosen[i] (n) = whether i is among the k largest z (ties: the lower index). */
void top_k_mask(int *chosen, const float *z, int n, int k);
/* dW (E,C) += dz^T x, with acc (E C doubles) of scratch. */
void router_weight_backward(float *dw, double *acc, const float *dz, const float *x, int N, int C,
                            int E);

/* -------------------------------------------------------------- MLP statistics (gpt.c) */

/* The statistics of the MLP hidden h (n floats) into st. */
void mlp_stats(LayerStats *st, const float *h, size_t n);
/* The range of the nonlinearity's input pre (rows of width F; GLU: the gate half) into st. */
void pre_stats(LayerStats *st, const float *pre, int rows, int F, int glu);

/* ---------------------------------------------------------- mixture of heads (gpt_moh.c) */

/* attg = the heads of atty times their gates, routed from the attention input x. */
void moh_forward(const Pass *p, const LayerView *L, const LayerActs *s, int l, const float *x);
/* a->d_atty: dL/d attg in, dL/d atty out; dL/d the router logits into a->d_mz. */
void moh_backward(const Pass *p, const LayerActs *s);

/* -------------------------------------------------------- mixture of experts (gpt_moe.c) */

/* y (B,T,C) = the MoE MLP of x. */
void moe_forward(const Pass *p, const LayerView *L, const LayerActs *s, int l, const float *x,
                 float *y);
/* dx = beta dx + d/dx of the MoE MLP given dy, plus the auxiliary losses' gradients. */
void moe_backward(const Pass *p, const LayerView *L, const LayerActs *s, const float *x,
                  const float *dy, float *dx, float beta);

#endif
