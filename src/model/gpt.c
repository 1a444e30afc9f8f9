#include "gpt.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "gemm.h"
#include "layers.h"
#include "rng.h"
#include "transpose.h"

/* Every activation, pointers into GPT.acts. Per-layer buffers are arrays of n_layer
 * slices. Shapes use B, T of the capacity; a smaller batch uses a prefix. */
typedef struct {
    float *v; /* base of this layer's slice */
} Slice;

typedef struct GptActs {
    int32_t *tokens, *targets; /* (B,T) copies of the batch */
    float *encoded;            /* (B,T,C) wte[x] + wpe[t] */
    float *in_mean, *in_rstd;  /* (B,T) */
    float *resid;              /* (L+1, B,T,C): resid[0] block 0 input, resid[l+1] output */
    /* per layer, (L, ...) */
    float *n1_out, *n1_mean, *n1_rstd;        /* (B,T,C), (B,T), (B,T) */
    float *qkv;                               /* (B,T,QKV) projection output */
    float *q_mean, *q_rstd, *k_mean, *k_rstd; /* (B,T,H), (B,T,KV) */
    float *q, *k, *v; /* lane layout (attention.h), one lane per (b, query head); k and v are
                         copied to every query head of their group */
    float *att;       /* lane layout, (T,T) per pair: probabilities */
    float *atty;      /* (B,T,C) heads concatenated */
    float *ao;        /* (B,T,C) attention output projection */
    float *aon, *aon_mean, *aon_rstd;  /* peri: normalized ao */
    float *sum1;                       /* (B,T,C) x + attention (post: before n1) */
    float *n2_out, *n2_mean, *n2_rstd; /* (B,T,C) */
    float *fch;                        /* (B,T,UP) pre-activation; the activation itself
                                          when activation_in_place (then fch_act is empty) */
    float *fch_act;                    /* (B,T,FF) */
    float *mo;                         /* (B,T,C) MLP output projection */
    float *mon, *mon_mean, *mon_rstd;  /* peri */
    float *sum2;                       /* (B,T,C) post: before n2 */
    /* after the blocks */
    float *fn_out, *fn_mean, *fn_rstd; /* (B,T,C) */
    float *logits;                     /* (B,T,V) */
    /* backward scratch */
    float *d_resid, *d_a, *d_b, *d_c; /* (B,T,C) */
    float *d_up;                      /* (B,T,UP); empty when activation_in_place (d_ff is used) */
    float *d_ff;                      /* (B,T,FF) */
    float *d_qkv;                     /* (B,T,QKV) */
    float *d_q, *d_k, *d_v;           /* one layer of q, k, v */
    float *y, *d_y;                   /* lane layout (T,hd): attention output, its gradient */
    float *attn_scratch;              /* (T) lanes */
    float *rope_cos, *rope_sin;       /* (T, hd/2) RoPE angles of every position */
    float *qk_scratch;                /* (H + KV) * hd: one token's q and k gradients */
    /* Transposed copies (in, out) of the forward's weight matrices whose products run through
     * OpenBLAS's small-matrix kernels (gemm.h), which take only the untransposed form;
     * refreshed by every forward. wt_at[id] is the copy's offset in wt, or NO_WT. */
    float *wt;
    size_t wt_at[T_COUNT];
} GptActs;

#define NO_WT ((size_t)-1)

/* ------------------------------------------------------------------ tensor table */

static void tensor(TensorInfo *t, const char *name, size_t *off, int present, int per_layer, int L,
                   int d0, int d1, int decay, InitKind init) {
    t->name = name;
    t->per_layer = per_layer;
    t->decay = decay;
    t->init = init;
    t->ndim = 0;
    if (per_layer) t->shape[t->ndim++] = L;
    t->shape[t->ndim++] = d0;
    if (d1 > 0) t->shape[t->ndim++] = d1;
    size_t n = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1) * (size_t)(per_layer ? L : 1);
    t->size = present ? n : 0;
    t->offset = *off;
    *off += t->size;
}

size_t gpt_tensor_table(const ModelConfig *c, TensorInfo t[T_COUNT]) {
    int V = c->vocab_size, C = c->d_model, L = c->n_layer, hd = model_head_dim(c);
    int QKV = (c->n_head + 2 * model_kv_heads(c)) * hd, FF = model_d_ff(c);
    int UP = model_is_glu(c) ? 2 * FF : FF;
    int aff = c->norm_affine, ln = c->norm_type == NORMTYPE_LAYER;
    int blk = c->norm != NORM_NONE, peri = c->norm == NORM_PERI, qkn = c->qk_norm && aff;
    size_t o = 0;
    tensor(&t[T_WTE], "wte", &o, 1, 0, L, V, C, 1, INIT_NORMAL);
    tensor(&t[T_WPE], "wpe", &o, c->position == POS_LEARNED, 0, L, c->context, C, 1, INIT_NORMAL);
    tensor(&t[T_IN_NORM_W], "in_norm.w", &o, c->input_norm && aff, 0, L, C, 0, 0, INIT_ONES);
    tensor(&t[T_IN_NORM_B], "in_norm.b", &o, c->input_norm && aff && ln, 0, L, C, 0, 0, INIT_ZEROS);
    tensor(&t[T_ATTN_NORM_W], "attn_norm.w", &o, blk && aff, 1, L, C, 0, 0, INIT_ONES);
    tensor(&t[T_ATTN_NORM_B], "attn_norm.b", &o, blk && aff && ln, 1, L, C, 0, 0, INIT_ZEROS);
    tensor(&t[T_QKV_W], "qkv.w", &o, 1, 1, L, QKV, C, 1, INIT_NORMAL);
    tensor(&t[T_QKV_B], "qkv.b", &o, c->qkv_bias, 1, L, QKV, 0, 0, INIT_ZEROS);
    tensor(&t[T_Q_NORM_W], "q_norm.w", &o, qkn, 1, L, hd, 0, 0, INIT_ONES);
    tensor(&t[T_Q_NORM_B], "q_norm.b", &o, qkn && ln, 1, L, hd, 0, 0, INIT_ZEROS);
    tensor(&t[T_K_NORM_W], "k_norm.w", &o, qkn, 1, L, hd, 0, 0, INIT_ONES);
    tensor(&t[T_K_NORM_B], "k_norm.b", &o, qkn && ln, 1, L, hd, 0, 0, INIT_ZEROS);
    tensor(&t[T_ATTN_PROJ_W], "attn_proj.w", &o, 1, 1, L, C, C, 1, INIT_RESIDUAL);
    tensor(&t[T_ATTN_PROJ_B], "attn_proj.b", &o, c->out_bias, 1, L, C, 0, 0, INIT_ZEROS);
    tensor(&t[T_ATTN_ONORM_W], "attn_onorm.w", &o, peri && aff, 1, L, C, 0, 0, INIT_ONES);
    tensor(&t[T_ATTN_ONORM_B], "attn_onorm.b", &o, peri && aff && ln, 1, L, C, 0, 0, INIT_ZEROS);
    tensor(&t[T_MLP_NORM_W], "mlp_norm.w", &o, blk && aff, 1, L, C, 0, 0, INIT_ONES);
    tensor(&t[T_MLP_NORM_B], "mlp_norm.b", &o, blk && aff && ln, 1, L, C, 0, 0, INIT_ZEROS);
    tensor(&t[T_FC_W], "fc.w", &o, 1, 1, L, UP, C, 1, INIT_NORMAL);
    tensor(&t[T_FC_B], "fc.b", &o, c->mlp_bias, 1, L, UP, 0, 0, INIT_ZEROS);
    tensor(&t[T_FC_PROJ_W], "fc_proj.w", &o, 1, 1, L, C, FF, 1, INIT_RESIDUAL);
    tensor(&t[T_FC_PROJ_B], "fc_proj.b", &o, c->mlp_bias, 1, L, C, 0, 0, INIT_ZEROS);
    tensor(&t[T_MLP_ONORM_W], "mlp_onorm.w", &o, peri && aff, 1, L, C, 0, 0, INIT_ONES);
    tensor(&t[T_MLP_ONORM_B], "mlp_onorm.b", &o, peri && aff && ln, 1, L, C, 0, 0, INIT_ZEROS);
    tensor(&t[T_FINAL_NORM_W], "final_norm.w", &o, c->final_norm && aff, 0, L, C, 0, 0, INIT_ONES);
    tensor(&t[T_FINAL_NORM_B], "final_norm.b", &o, c->final_norm && aff && ln, 0, L, C, 0, 0,
           INIT_ZEROS);
    tensor(&t[T_LM_HEAD], "lm_head.w", &o, !c->tie_embeddings, 0, L, V, C, 1, INIT_NORMAL);
    return o;
}

/* Floats in one layer's slice of a tensor (all of it for a tensor that is not per layer). */
static size_t layer_size(const GPT *m, TensorId id) {
    const TensorInfo *t = &m->tensors[id];
    return t->per_layer ? t->size / (size_t)m->cfg.n_layer : t->size;
}

/* Pointer to layer l's slice of a tensor in a buffer (params or grads); NULL if absent. */
static float *tp(const GPT *m, float *buf, TensorId id, int l) {
    const TensorInfo *t = &m->tensors[id];
    if (t->size == 0) return NULL;
    return buf + t->offset + (t->per_layer ? (size_t)l * layer_size(m, id) : 0);
}

/* The lm_head's matrix: wte when tied. */
static TensorId lm_head_id(const ModelConfig *c) {
    return c->tie_embeddings ? T_WTE : T_LM_HEAD;
}

/* ------------------------------------------------------------------ allocation */

/* The weight matrices of the forward's products, (out, in) per layer; the lm_head is wte
 * when tied. */
typedef struct {
    TensorId id;
    int out, in, layers;
} FwdMatrix;

static int fwd_matrices(const ModelConfig *c, FwdMatrix f[5]) {
    int C = c->d_model, L = c->n_layer, hd = model_head_dim(c), FF = model_d_ff(c);
    int QKV = (c->n_head + 2 * model_kv_heads(c)) * hd, UP = model_is_glu(c) ? 2 * FF : FF;
    f[0] = (FwdMatrix){T_QKV_W, QKV, C, L};
    f[1] = (FwdMatrix){T_ATTN_PROJ_W, C, C, L};
    f[2] = (FwdMatrix){T_FC_W, UP, C, L};
    f[3] = (FwdMatrix){T_FC_PROJ_W, C, FF, L};
    f[4] = (FwdMatrix){lm_head_id(c), c->vocab_size, C, 1};
    return 5;
}

typedef struct {
    float **ptr;
    double n; /* floats; a double so that an absurd size is measured rather than wrapped */
} Req;

#define GPT_MAX_REQ 64

/* The activation buffers for batches up to (B, T), in buffer order: fills req (pointing into
 * a, whose transposed-copy offsets wt_at it sets) and returns how many. One table serves
 * gpt_alloc and gpt_alloc_bytes. */
static int act_layout(const ModelConfig *c, int B, int T, GptActs *a, Req req[GPT_MAX_REQ]) {
    double C = c->d_model, L = c->n_layer, V = c->vocab_size, H = c->n_head;
    double KV = model_kv_heads(c), hd = model_head_dim(c), FF = model_d_ff(c);
    double UP = model_is_glu(c) ? 2 * FF : FF, QKV = (H + 2 * KV) * hd;
    double BT = (double)B * T, Td = T;
    double lanes = ceil((double)B * H / ATTN_LANES) * ATTN_LANES; /* pairs, padded */
    int in_place = activation_in_place(c->activation);
    FwdMatrix fm[5];
    double wt_total = 0;
    for (int i = 0; i < T_COUNT; i++)
        a->wt_at[i] = NO_WT;
    for (int i = 0, n = fwd_matrices(c, fm); i < n; i++)
        if (gemm_unpacked(0, BT < INT_MAX ? (int)BT : INT_MAX, fm[i].out, fm[i].in)) {
            a->wt_at[fm[i].id] = (size_t)wt_total;
            wt_total += (double)fm[i].layers * fm[i].out * fm[i].in;
        }
    const Req table[] = {
        {&a->encoded, BT * C},
        {&a->in_mean, BT},
        {&a->in_rstd, BT},
        {&a->resid, (L + 1) * BT * C},
        {&a->n1_out, L * BT * C},
        {&a->n1_mean, L * BT},
        {&a->n1_rstd, L * BT},
        {&a->qkv, L * BT * QKV},
        {&a->q_mean, L * BT * H},
        {&a->q_rstd, L * BT * H},
        {&a->k_mean, L * BT * KV},
        {&a->k_rstd, L * BT * KV},
        {&a->q, L * lanes * Td * hd},
        {&a->k, L * lanes * Td * hd},
        {&a->v, L * lanes * Td * hd},
        {&a->att, L * lanes * Td * Td},
        {&a->atty, L * BT * C},
        {&a->ao, L * BT * C},
        {&a->aon, L * BT * C},
        {&a->aon_mean, L * BT},
        {&a->aon_rstd, L * BT},
        {&a->sum1, L * BT * C},
        {&a->n2_out, L * BT * C},
        {&a->n2_mean, L * BT},
        {&a->n2_rstd, L * BT},
        {&a->fch, L * BT * UP},
        {&a->fch_act, in_place ? 0 : L * BT * FF},
        {&a->mo, L * BT * C},
        {&a->mon, L * BT * C},
        {&a->mon_mean, L * BT},
        {&a->mon_rstd, L * BT},
        {&a->sum2, L * BT * C},
        {&a->fn_out, BT * C},
        {&a->fn_mean, BT},
        {&a->fn_rstd, BT},
        {&a->logits, BT * V},
        {&a->d_resid, BT * C},
        {&a->d_a, BT * C},
        {&a->d_b, BT * C},
        {&a->d_c, BT * C},
        {&a->d_up, in_place ? 0 : BT * UP},
        {&a->d_ff, BT * FF},
        {&a->d_qkv, BT * QKV},
        {&a->d_q, lanes * Td * hd},
        {&a->d_k, lanes * Td * hd},
        {&a->d_v, lanes * Td * hd},
        {&a->y, lanes * Td * hd},
        {&a->d_y, lanes * Td * hd},
        {&a->attn_scratch, ATTN_LANES * Td},
        {&a->qk_scratch, (H + KV) * hd},
        {&a->rope_cos, Td * floor(hd / 2)},
        {&a->rope_sin, Td * floor(hd / 2)},
        {&a->wt, wt_total},
    };
    int n = (int)(sizeof table / sizeof table[0]);
    _Static_assert(sizeof table / sizeof table[0] <= GPT_MAX_REQ, "raise GPT_MAX_REQ");
    memcpy(req, table, sizeof table);
    return n;
}

/* Floats of one buffer, rounded up so the next starts 64-byte aligned. */
static double aligned_floats(double n) {
    return ceil(n / 16) * 16;
}

/* All activation floats: the buffers, then the (B, T) token copies as int32 in the tail. */
static double act_total(const Req *req, int nreq, int B, int T) {
    double total = 2.0 * B * T;
    for (int i = 0; i < nreq; i++)
        total += aligned_floats(req[i].n);
    return total;
}

double gpt_alloc_bytes(const ModelConfig *c, int B, int T) {
    GptActs a;
    Req req[GPT_MAX_REQ];
    double acts = act_total(req, act_layout(c, B, T, &a, req), B, T);
    return sizeof(float) * (2.0 * (double)model_param_count(c) + acts);
}

int gpt_alloc(GPT *m, const ModelConfig *c, int B, int T, char err[ABL_ERR_MAX]) {
    memset(m, 0, sizeof *m);
    if (model_config_validate(c, err) != 0) return -1;
    if (T > c->context) {
        snprintf(err, ABL_ERR_MAX, "sequence length %d exceeds model.context %d", T, c->context);
        return -1;
    }
    m->cfg = *c;
    m->B = B;
    m->T = T;
    m->n_params = gpt_tensor_table(c, m->tensors);
    size_t BT = (size_t)B * (size_t)T, L = (size_t)c->n_layer, hd = (size_t)model_head_dim(c);
    GptActs *a = calloc(1, sizeof *a);
    if (!a) goto oom;
    m->a = a;
    Req req[GPT_MAX_REQ];
    int nreq = act_layout(c, B, T, a, req);
    double total_d = act_total(req, nreq, B, T);
    if (!(total_d < 0x1p50)) { /* beyond any machine (4 PiB); every size below is exact */
        snprintf(err, ABL_ERR_MAX, "the activations for batch %d x context %d need %.3g GiB", B, T,
                 total_d * sizeof(float) / 0x1p30);
        gpt_free(m);
        return -1;
    }
    size_t total = (size_t)total_d;
    m->n_acts = total;
    m->params = aligned_alloc(64, ((m->n_params * sizeof(float)) + 63) & ~(size_t)63);
    m->grads = aligned_alloc(64, ((m->n_params * sizeof(float)) + 63) & ~(size_t)63);
    m->acts = aligned_alloc(64, ((total * sizeof(float)) + 63) & ~(size_t)63);
    m->stats = calloc(L, sizeof *m->stats);
    if (!m->params || !m->grads || !m->acts || !m->stats) goto oom;
    memset(m->grads, 0, m->n_params * sizeof(float));
    memset(m->acts, 0, total * sizeof(float));
    float *p = m->acts;
    for (int i = 0; i < nreq; i++) {
        *req[i].ptr = p;
        p += (size_t)aligned_floats(req[i].n);
    }
    a->tokens = (int32_t *)p;
    a->targets = (int32_t *)(p + BT);
    if (c->position == POS_ROPE)
        for (int t = 0; t < T; t++)
            rope_angles(a->rope_cos + (size_t)t * (hd / 2), a->rope_sin + (size_t)t * (hd / 2), t,
                        (int)hd, c->rope_base);
    return 0;
oom:
    snprintf(err, ABL_ERR_MAX,
             "cannot allocate the model: %zu parameters and %zu activation floats (%.1f MiB)",
             m->n_params, m->n_acts,
             (double)(4 * m->n_params + m->n_acts) * sizeof(float) / 1048576.0);
    gpt_free(m);
    return -1;
}

void gpt_free(GPT *m) {
    free(m->params);
    free(m->grads);
    free(m->acts);
    free(m->stats);
    free(m->a);
    memset(m, 0, sizeof *m);
}

void gpt_init_weights(GPT *m, uint64_t seed) {
    float resid_scale = 1.0f / sqrtf(2.0f * (float)m->cfg.n_layer);
    for (int i = 0; i < T_COUNT; i++) {
        const TensorInfo *t = &m->tensors[i];
        float *w = m->params + t->offset;
        float std = (float)m->cfg.init_std * (t->init == INIT_RESIDUAL ? resid_scale : 1.0f);
        uint64_t stream = ((uint64_t)RNG_STREAM_INIT << 32) | (uint64_t)i;
        for (size_t j = 0; j < t->size; j++) {
            switch (t->init) {
            case INIT_NORMAL:
            case INIT_RESIDUAL:
                w[j] = std * rng_normal(seed, stream, j);
                break;
            case INIT_ONES:
                w[j] = 1.0f;
                break;
            case INIT_ZEROS:
                w[j] = 0.0f;
                break;
            }
        }
    }
}

void gpt_zero_grad(GPT *m) {
    memset(m->grads, 0, m->n_params * sizeof(float));
}
float *gpt_logits(GPT *m) {
    return m->a->logits;
}

/* ------------------------------------------------------------------ helpers */

/* Layer l's transposed copy of a forward weight matrix, or NULL when none is kept. */
static float *wt(const GPT *m, TensorId id, int l) {
    const GptActs *a = m->a;
    if (a->wt_at[id] == NO_WT) return NULL;
    return a->wt + a->wt_at[id] + (size_t)l * layer_size(m, id);
}

/* The transposed copies follow the weights: every forward may follow an update. */
static void refresh_transposed(GPT *m) {
    FwdMatrix fm[5];
    for (int i = 0, n = fwd_matrices(&m->cfg, fm); i < n; i++) {
        if (m->a->wt_at[fm[i].id] == NO_WT) continue;
        for (int l = 0; l < fm[i].layers; l++)
            transpose(wt(m, fm[i].id, l), tp(m, m->params, fm[i].id, l), fm[i].out, fm[i].in);
    }
}

#define LAYER(buf, l, n) ((buf) + (size_t)(l) * (n))

/* A norm site: which parameters and which saved statistics. */
static void site_norm_forward(const GPT *m, TensorId w, TensorId b, int l, float *out, float *mean,
                              float *rstd, const float *inp, int N) {
    norm_forward(m->cfg.norm_type, out, mean, rstd, inp, tp(m, m->params, w, l),
                 tp(m, m->params, b, l), N, m->cfg.d_model, (float)m->cfg.norm_eps);
}

static void site_norm_backward(GPT *m, TensorId w, TensorId b, int l, float *dinp,
                               const float *dout, const float *inp, const float *mean,
                               const float *rstd, int N) {
    norm_backward(m->cfg.norm_type, dinp, tp(m, m->grads, w, l), tp(m, m->grads, b, l), dout, inp,
                  mean, rstd, tp(m, m->params, w, l), N, m->cfg.d_model);
}

static void add(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}
static void accumulate(float *out, const float *a, size_t n) {
    for (size_t i = 0; i < n; i++)
        out[i] += a[i];
}

/* ------------------------------------------------------------------ attention */

/* Lane-layout tensors of one layer (attention.h), sized for the capacity batch. */
static size_t lane_tile(const GPT *m) {
    const ModelConfig *c = &m->cfg;
    return (size_t)attn_groups(m->B * c->n_head) * ATTN_LANES * m->T * model_head_dim(c);
}
/* ... and of one layer's attention probabilities, (T,T) per pair. */
static size_t att_tile(const GPT *m) {
    return (size_t)attn_groups(m->B * m->cfg.n_head) * ATTN_LANES * m->T * m->T;
}

/* qkv (B,T,QKV) -> q, k, v in lane layout (attention.h), through the optional per-head norm
 * and RoPE. Transformed q and k heads go through d_qkv, free during forward. */
static void qkv_split_forward(GPT *m, int l, int B, int T) {
    const ModelConfig *c = &m->cfg;
    GptActs *a = m->a;
    int H = c->n_head, KV = model_kv_heads(c), hd = model_head_dim(c), QKV = (H + 2 * KV) * hd;
    int group = H / KV;
    size_t BTc = (size_t)m->B * m->T, lt = lane_tile(m);
    const float *qkv = LAYER(a->qkv, l, BTc * QKV), *qk = qkv;
    float *q = LAYER(a->q, l, lt), *k = LAYER(a->k, l, lt), *v = LAYER(a->v, l, lt);
    if (c->qk_norm || c->position == POS_ROPE) {
        float *q_mean = LAYER(a->q_mean, l, BTc * H), *q_rstd = LAYER(a->q_rstd, l, BTc * H);
        float *k_mean = LAYER(a->k_mean, l, BTc * KV), *k_rstd = LAYER(a->k_rstd, l, BTc * KV);
        const float *qw = tp(m, m->params, T_Q_NORM_W, l), *qb = tp(m, m->params, T_Q_NORM_B, l);
        const float *kw = tp(m, m->params, T_K_NORM_W, l), *kb = tp(m, m->params, T_K_NORM_B, l);
        float eps = (float)c->norm_eps, *out = a->d_qkv;
        size_t nqk = (size_t)(H + KV) * hd;
        for (size_t bt = 0; bt < (size_t)B * T; bt++) {
            int t = (int)(bt % (size_t)T);
            const float *x = qkv + bt * QKV;
            float *y = out + bt * QKV;
            if (c->qk_norm) { /* the H q heads, then the KV k heads: rows of hd */
                norm_forward(c->norm_type, y, q_mean + bt * H, q_rstd + bt * H, x, qw, qb, H, hd,
                             eps);
                norm_forward(c->norm_type, y + (size_t)H * hd, k_mean + bt * KV, k_rstd + bt * KV,
                             x + (size_t)H * hd, kw, kb, KV, hd, eps);
            } else {
                memcpy(y, x, nqk * sizeof(float));
            }
            if (c->position == POS_ROPE)
                for (int h = 0; h < H + KV; h++)
                    rope_rotate(y + (size_t)h * hd, hd, a->rope_cos + (size_t)t * (hd / 2),
                                a->rope_sin + (size_t)t * (hd / 2), 0);
        }
        qk = out;
    }
    attn_to_lanes(q, qk, B, T, H, hd, (size_t)QKV, 1);
    attn_to_lanes(k, qk + (size_t)H * hd, B, T, H, hd, (size_t)QKV, group);
    attn_to_lanes(v, qkv + (size_t)(H + KV) * hd, B, T, H, hd, (size_t)QKV, group);
}

/* d_q, d_k, d_v (lanes) -> d_qkv (overwritten). Undoes RoPE, then the per-head norm. */
static void qkv_split_backward(GPT *m, int l, int B, int T) {
    const ModelConfig *c = &m->cfg;
    GptActs *a = m->a;
    int H = c->n_head, KV = model_kv_heads(c), hd = model_head_dim(c), QKV = (H + 2 * KV) * hd;
    int group = H / KV;
    attn_from_lanes(a->d_qkv, a->d_q, B, T, H, hd, (size_t)QKV, 1);
    attn_from_lanes(a->d_qkv + (size_t)H * hd, a->d_k, B, T, H, hd, (size_t)QKV, group);
    attn_from_lanes(a->d_qkv + (size_t)(H + KV) * hd, a->d_v, B, T, H, hd, (size_t)QKV, group);
    if (!c->qk_norm && c->position != POS_ROPE) return;
    size_t BTc = (size_t)m->B * m->T;
    const float *qkv = LAYER(a->qkv, l, BTc * QKV);
    const float *q_mean = LAYER(a->q_mean, l, BTc * H), *q_rstd = LAYER(a->q_rstd, l, BTc * H);
    const float *k_mean = LAYER(a->k_mean, l, BTc * KV), *k_rstd = LAYER(a->k_rstd, l, BTc * KV);
    const float *qw = tp(m, m->params, T_Q_NORM_W, l), *kw = tp(m, m->params, T_K_NORM_W, l);
    float *dqw = tp(m, m->grads, T_Q_NORM_W, l), *dqb = tp(m, m->grads, T_Q_NORM_B, l);
    float *dkw = tp(m, m->grads, T_K_NORM_W, l), *dkb = tp(m, m->grads, T_K_NORM_B, l);
    float *tmp = a->qk_scratch; /* (H + KV) * hd */
    for (size_t bt = 0; bt < (size_t)B * T; bt++) {
        int t = (int)(bt % (size_t)T);
        float *d = a->d_qkv + bt * QKV;
        if (c->position == POS_ROPE)
            for (int h = 0; h < H + KV; h++)
                rope_rotate(d + (size_t)h * hd, hd, a->rope_cos + (size_t)t * (hd / 2),
                            a->rope_sin + (size_t)t * (hd / 2), 1);
        if (!c->qk_norm) continue;
        /* through the norms and their affine (gain w, shift b), H q rows then KV k rows of hd */
        size_t nqk = (size_t)(H + KV) * hd;
        memcpy(tmp, d, nqk * sizeof(float));
        memset(d, 0, nqk * sizeof(float));
        const float *x = qkv + bt * QKV;
        norm_backward(c->norm_type, d, dqw, dqb, tmp, x, q_mean + bt * H, q_rstd + bt * H, qw, H,
                      hd);
        norm_backward(c->norm_type, d + (size_t)H * hd, dkw, dkb, tmp + (size_t)H * hd,
                      x + (size_t)H * hd, k_mean + bt * KV, k_rstd + bt * KV, kw, KV, hd);
    }
}

/* ------------------------------------------------------------------ sublayers */

/* y (B,T,C) = attention sublayer of x; keeps everything backward needs. */
static void attn_sublayer_forward(GPT *m, int l, const float *x, float *y, int B, int T) {
    const ModelConfig *c = &m->cfg;
    GptActs *a = m->a;
    int N = B * T, C = c->d_model, H = c->n_head, hd = model_head_dim(c);
    int QKV = (H + 2 * model_kv_heads(c)) * hd;
    size_t BTc = (size_t)m->B * m->T, lt = lane_tile(m);
    float *att = LAYER(a->att, l, att_tile(m)), *atty = LAYER(a->atty, l, BTc * C);
    matmul_forward(LAYER(a->qkv, l, BTc * QKV), x, tp(m, m->params, T_QKV_W, l), wt(m, T_QKV_W, l),
                   tp(m, m->params, T_QKV_B, l), N, C, QKV);
    qkv_split_forward(m, l, B, T);
    attention_forward(a->y, att, LAYER(a->q, l, lt), LAYER(a->k, l, lt), LAYER(a->v, l, lt),
                      attn_groups(B * H), T, hd);
    if (m->collect_stats) {
        double entropy[MODEL_MAX_HEADS] = {0};
        attention_entropy(entropy, att, B * H, H, T);
        for (int h = 0; h < H; h++)
            m->stats[l].attn_entropy[h] = entropy[h] / ((double)B * T);
    }
    attn_from_lanes(atty, a->y, B, T, H, hd, (size_t)C, 1);
    matmul_forward(y, atty, tp(m, m->params, T_ATTN_PROJ_W, l), wt(m, T_ATTN_PROJ_W, l),
                   tp(m, m->params, T_ATTN_PROJ_B, l), N, C, C);
}

/* dx = (accumulate ? dx : 0) + d/dx of the attention sublayer given dy. */
static void attn_sublayer_backward(GPT *m, int l, const float *x, const float *dy, float *dx,
                                   float beta, int B, int T) {
    const ModelConfig *c = &m->cfg;
    GptActs *a = m->a;
    int N = B * T, C = c->d_model, H = c->n_head, hd = model_head_dim(c);
    int QKV = (H + 2 * model_kv_heads(c)) * hd;
    size_t BTc = (size_t)m->B * m->T, lt = lane_tile(m);
    /* d_c = d atty */
    matmul_backward(a->d_c, 0.0f, tp(m, m->grads, T_ATTN_PROJ_W, l),
                    tp(m, m->grads, T_ATTN_PROJ_B, l), dy, 1.0f, LAYER(a->atty, l, BTc * C),
                    tp(m, m->params, T_ATTN_PROJ_W, l), N, C, C);
    attn_to_lanes(a->d_y, a->d_c, B, T, H, hd, (size_t)C, 1);
    attention_backward(a->d_q, a->d_k, a->d_v, a->d_y, LAYER(a->att, l, att_tile(m)),
                       LAYER(a->q, l, lt), LAYER(a->k, l, lt), LAYER(a->v, l, lt),
                       attn_groups(B * H), T, hd, a->attn_scratch);
    qkv_split_backward(m, l, B, T);
    matmul_backward(dx, beta, tp(m, m->grads, T_QKV_W, l), tp(m, m->grads, T_QKV_B, l), a->d_qkv,
                    1.0f, x, tp(m, m->params, T_QKV_W, l), N, C, QKV);
}

static void mlp_stats(GPT *m, int l, const float *h, size_t n) {
    LayerStats *st = &m->stats[l];
    double zeros = 0, sum = 0, sq = 0;
    float mx = -INFINITY, mn = INFINITY;
    for (size_t i = 0; i < n; i++) {
        float v = h[i];
        zeros += v == 0.0f;
        sum += v;
        sq += (double)v * v;
        mx = v > mx ? v : mx;
        mn = v < mn ? v : mn;
    }
    st->zero_frac = zeros / (double)n;
    st->mean = sum / (double)n;
    st->rms = sqrt(sq / (double)n);
    st->max = mx;
    st->min = mn;
}

static void mlp_sublayer_forward(GPT *m, int l, const float *x, float *y, int B, int T) {
    const ModelConfig *c = &m->cfg;
    GptActs *a = m->a;
    int N = B * T, C = c->d_model, FF = model_d_ff(c), UP = model_is_glu(c) ? 2 * FF : FF;
    size_t BTc = (size_t)m->B * m->T;
    int in_place = activation_in_place(c->activation);
    float *fch = LAYER(a->fch, l, BTc * UP), *h = in_place ? fch : LAYER(a->fch_act, l, BTc * FF);
    matmul_forward(fch, x, tp(m, m->params, T_FC_W, l), wt(m, T_FC_W, l),
                   tp(m, m->params, T_FC_B, l), N, C, UP);
    if (in_place)
        relu_forward_inplace(h, (size_t)N * FF);
    else
        activation_forward(c->activation, h, fch, N, FF);
    if (m->collect_stats) mlp_stats(m, l, h, (size_t)N * FF);
    matmul_forward(y, h, tp(m, m->params, T_FC_PROJ_W, l), wt(m, T_FC_PROJ_W, l),
                   tp(m, m->params, T_FC_PROJ_B, l), N, FF, C);
}

static void mlp_sublayer_backward(GPT *m, int l, const float *x, const float *dy, float *dx,
                                  float beta, int B, int T) {
    const ModelConfig *c = &m->cfg;
    GptActs *a = m->a;
    int N = B * T, C = c->d_model, FF = model_d_ff(c), UP = model_is_glu(c) ? 2 * FF : FF;
    size_t BTc = (size_t)m->B * m->T;
    int in_place = activation_in_place(c->activation);
    const float *fch = LAYER(a->fch, l, BTc * UP);
    const float *h = in_place ? fch : LAYER(a->fch_act, l, BTc * FF);
    float *d_up = in_place ? a->d_ff : a->d_up;
    matmul_backward(a->d_ff, 0.0f, tp(m, m->grads, T_FC_PROJ_W, l), tp(m, m->grads, T_FC_PROJ_B, l),
                    dy, 1.0f, h, tp(m, m->params, T_FC_PROJ_W, l), N, FF, C);
    if (in_place)
        relu_backward_inplace(d_up, h, (size_t)N * FF);
    else
        activation_backward(c->activation, d_up, a->d_ff, fch, N, FF);
    matmul_backward(dx, beta, tp(m, m->grads, T_FC_W, l), tp(m, m->grads, T_FC_B, l), d_up, 1.0f, x,
                    tp(m, m->params, T_FC_W, l), N, C, UP);
}

/* ------------------------------------------------------------------ blocks */

static void block_forward(GPT *m, int l, int B, int T) {
    const ModelConfig *c = &m->cfg;
    GptActs *a = m->a;
    size_t BTc = (size_t)m->B * m->T, C = (size_t)c->d_model, n = (size_t)B * T * C;
    int N = B * T;
    const float *x = LAYER(a->resid, l, BTc * C);
    float *out = LAYER(a->resid, l + 1, BTc * C);
    float *n1 = LAYER(a->n1_out, l, BTc * C), *n1m = LAYER(a->n1_mean, l, BTc),
          *n1r = LAYER(a->n1_rstd, l, BTc);
    float *n2 = LAYER(a->n2_out, l, BTc * C), *n2m = LAYER(a->n2_mean, l, BTc),
          *n2r = LAYER(a->n2_rstd, l, BTc);
    float *ao = LAYER(a->ao, l, BTc * C), *mo = LAYER(a->mo, l, BTc * C);
    float *sum1 = LAYER(a->sum1, l, BTc * C), *sum2 = LAYER(a->sum2, l, BTc * C);
    switch (c->norm) {
    case NORM_PRE:
        site_norm_forward(m, T_ATTN_NORM_W, T_ATTN_NORM_B, l, n1, n1m, n1r, x, N);
        attn_sublayer_forward(m, l, n1, ao, B, T);
        add(sum1, x, ao, n);
        site_norm_forward(m, T_MLP_NORM_W, T_MLP_NORM_B, l, n2, n2m, n2r, sum1, N);
        mlp_sublayer_forward(m, l, n2, mo, B, T);
        add(out, sum1, mo, n);
        break;
    case NORM_POST:
        attn_sublayer_forward(m, l, x, ao, B, T);
        add(sum1, x, ao, n);
        site_norm_forward(m, T_ATTN_NORM_W, T_ATTN_NORM_B, l, n1, n1m, n1r, sum1, N);
        mlp_sublayer_forward(m, l, n1, mo, B, T);
        add(sum2, n1, mo, n);
        site_norm_forward(m, T_MLP_NORM_W, T_MLP_NORM_B, l, out, n2m, n2r, sum2, N);
        break;
    case NORM_PERI: {
        float *aon = LAYER(a->aon, l, BTc * C), *mon = LAYER(a->mon, l, BTc * C);
        site_norm_forward(m, T_ATTN_NORM_W, T_ATTN_NORM_B, l, n1, n1m, n1r, x, N);
        attn_sublayer_forward(m, l, n1, ao, B, T);
        site_norm_forward(m, T_ATTN_ONORM_W, T_ATTN_ONORM_B, l, aon, LAYER(a->aon_mean, l, BTc),
                          LAYER(a->aon_rstd, l, BTc), ao, N);
        add(sum1, x, aon, n);
        site_norm_forward(m, T_MLP_NORM_W, T_MLP_NORM_B, l, n2, n2m, n2r, sum1, N);
        mlp_sublayer_forward(m, l, n2, mo, B, T);
        site_norm_forward(m, T_MLP_ONORM_W, T_MLP_ONORM_B, l, mon, LAYER(a->mon_mean, l, BTc),
                          LAYER(a->mon_rstd, l, BTc), mo, N);
        add(out, sum1, mon, n);
        break;
    }
    case NORM_NONE:
    default:
        attn_sublayer_forward(m, l, x, ao, B, T);
        add(sum1, x, ao, n);
        mlp_sublayer_forward(m, l, sum1, mo, B, T);
        add(out, sum1, mo, n);
        break;
    }
    if (m->collect_stats) {
        double sq = 0;
        for (size_t i = 0; i < n; i++)
            sq += (double)out[i] * out[i];
        m->stats[l].resid_rms = sqrt(sq / (double)n);
    }
}

/* On entry d_resid holds dL/d(block output); on exit dL/d(block input). */
static void block_backward(GPT *m, int l, int B, int T) {
    const ModelConfig *c = &m->cfg;
    GptActs *a = m->a;
    size_t BTc = (size_t)m->B * m->T, C = (size_t)c->d_model, n = (size_t)B * T * C;
    int N = B * T;
    const float *x = LAYER(a->resid, l, BTc * C);
    const float *n1 = LAYER(a->n1_out, l, BTc * C), *n1m = LAYER(a->n1_mean, l, BTc),
                *n1r = LAYER(a->n1_rstd, l, BTc);
    const float *n2 = LAYER(a->n2_out, l, BTc * C), *n2m = LAYER(a->n2_mean, l, BTc),
                *n2r = LAYER(a->n2_rstd, l, BTc);
    const float *ao = LAYER(a->ao, l, BTc * C), *mo = LAYER(a->mo, l, BTc * C);
    const float *sum1 = LAYER(a->sum1, l, BTc * C), *sum2 = LAYER(a->sum2, l, BTc * C);
    float *dr = a->d_resid, *da = a->d_a, *db = a->d_b;
    switch (c->norm) {
    case NORM_PRE:
        /* out = sum1 + mlp(n2(sum1)): dr is d sum1's direct path */
        mlp_sublayer_backward(m, l, n2, dr, da, 0.0f, B, T);
        site_norm_backward(m, T_MLP_NORM_W, T_MLP_NORM_B, l, dr, da, sum1, n2m, n2r, N);
        /* sum1 = x + attn(n1(x)) */
        attn_sublayer_backward(m, l, n1, dr, da, 0.0f, B, T);
        site_norm_backward(m, T_ATTN_NORM_W, T_ATTN_NORM_B, l, dr, da, x, n1m, n1r, N);
        break;
    case NORM_POST:
        /* out = n2(sum2), sum2 = n1 + mlp(n1), n1 = norm(sum1), sum1 = x + attn(x) */
        memset(da, 0, n * sizeof(float));
        site_norm_backward(m, T_MLP_NORM_W, T_MLP_NORM_B, l, da, dr, sum2, n2m, n2r, N);
        memcpy(db, da, n * sizeof(float)); /* db = d n1 (direct path) */
        mlp_sublayer_backward(m, l, n1, da, db, 1.0f, B, T);
        memset(dr, 0, n * sizeof(float));
        site_norm_backward(m, T_ATTN_NORM_W, T_ATTN_NORM_B, l, dr, db, sum1, n1m, n1r, N);
        /* dr = d sum1 = d x (direct) + attn backward */
        attn_sublayer_backward(m, l, x, dr, da, 0.0f, B, T);
        accumulate(dr, da, n);
        break;
    case NORM_PERI: {
        const float *aon_m = LAYER(a->aon_mean, l, BTc), *aon_r = LAYER(a->aon_rstd, l, BTc);
        const float *mon_m = LAYER(a->mon_mean, l, BTc), *mon_r = LAYER(a->mon_rstd, l, BTc);
        /* out = sum1 + n2o(mlp(n2(sum1))) */
        memset(db, 0, n * sizeof(float));
        site_norm_backward(m, T_MLP_ONORM_W, T_MLP_ONORM_B, l, db, dr, mo, mon_m, mon_r, N);
        mlp_sublayer_backward(m, l, n2, db, da, 0.0f, B, T);
        site_norm_backward(m, T_MLP_NORM_W, T_MLP_NORM_B, l, dr, da, sum1, n2m, n2r, N);
        /* sum1 = x + n1o(attn(n1(x))) */
        memset(db, 0, n * sizeof(float));
        site_norm_backward(m, T_ATTN_ONORM_W, T_ATTN_ONORM_B, l, db, dr, ao, aon_m, aon_r, N);
        attn_sublayer_backward(m, l, n1, db, da, 0.0f, B, T);
        site_norm_backward(m, T_ATTN_NORM_W, T_ATTN_NORM_B, l, dr, da, x, n1m, n1r, N);
        break;
    }
    case NORM_NONE:
    default:
        mlp_sublayer_backward(m, l, sum1, dr, dr, 1.0f, B, T);
        attn_sublayer_backward(m, l, x, dr, dr, 1.0f, B, T);
        break;
    }
}

/* ------------------------------------------------------------------ the model */

float gpt_forward(GPT *m, const int32_t *x, const int32_t *y, int B, int T) {
    const ModelConfig *c = &m->cfg;
    GptActs *a = m->a;
    int C = c->d_model, V = c->vocab_size, N = B * T;
    size_t BTc = (size_t)m->B * m->T;
    m->cur_B = B;
    m->cur_T = T;
    memcpy(a->tokens, x, (size_t)N * sizeof(int32_t));
    if (y) memcpy(a->targets, y, (size_t)N * sizeof(int32_t));
    if (m->collect_stats) memset(m->stats, 0, (size_t)c->n_layer * sizeof *m->stats);
    refresh_transposed(m);

    const float *wte = m->params + m->tensors[T_WTE].offset;
    const float *wpe = tp(m, m->params, T_WPE, 0);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = a->encoded + ((size_t)b * T + t) * C;
            const float *e = wte + (size_t)x[b * T + t] * C;
            if (wpe) /* learned positions; otherwise the token embedding alone */
                for (int i = 0; i < C; i++)
                    o[i] = e[i] + wpe[(size_t)t * C + i];
            else
                memcpy(o, e, (size_t)C * sizeof(float));
        }
    if (c->input_norm)
        site_norm_forward(m, T_IN_NORM_W, T_IN_NORM_B, 0, a->resid, a->in_mean, a->in_rstd,
                          a->encoded, N);
    else
        memcpy(a->resid, a->encoded, (size_t)N * C * sizeof(float));

    for (int l = 0; l < c->n_layer; l++)
        block_forward(m, l, B, T);

    const float *last = LAYER(a->resid, c->n_layer, BTc * C);
    if (c->final_norm) {
        site_norm_forward(m, T_FINAL_NORM_W, T_FINAL_NORM_B, 0, a->fn_out, a->fn_mean, a->fn_rstd,
                          last, N);
        last = a->fn_out;
    }
    TensorId lm = lm_head_id(c);
    matmul_forward(a->logits, last, tp(m, m->params, lm, 0), wt(m, lm, 0), NULL, N, C, V);
    m->loss = 0.0f;
    m->correct = 0;
    if (y) m->loss = softmax_xent_forward(a->logits, y, N, V, &m->correct);
    return m->loss;
}

void gpt_backward(GPT *m) {
    const ModelConfig *c = &m->cfg;
    GptActs *a = m->a;
    int B = m->cur_B, T = m->cur_T, C = c->d_model, V = c->vocab_size, N = B * T;
    size_t BTc = (size_t)m->B * m->T;

    softmax_xent_backward(a->logits, a->targets, N, V);
    float *dwte = m->grads + m->tensors[T_WTE].offset;
    const float *lm = tp(m, m->params, lm_head_id(c), 0);
    float *dlm = tp(m, m->grads, lm_head_id(c), 0);
    const float *last = c->final_norm ? a->fn_out : LAYER(a->resid, c->n_layer, BTc * C);
    /* d logits = (probs - onehot) / N, the 1/N applied by the GEMMs */
    matmul_backward(c->final_norm ? a->d_a : a->d_resid, 0.0f, dlm, NULL, a->logits,
                    1.0f / (float)N, last, lm, N, C, V);
    if (c->final_norm) {
        memset(a->d_resid, 0, (size_t)N * C * sizeof(float));
        site_norm_backward(m, T_FINAL_NORM_W, T_FINAL_NORM_B, 0, a->d_resid, a->d_a,
                           LAYER(a->resid, c->n_layer, BTc * C), a->fn_mean, a->fn_rstd, N);
    }

    for (int l = c->n_layer - 1; l >= 0; l--)
        block_backward(m, l, B, T);

    const float *denc = a->d_resid;
    if (c->input_norm) {
        memset(a->d_a, 0, (size_t)N * C * sizeof(float));
        site_norm_backward(m, T_IN_NORM_W, T_IN_NORM_B, 0, a->d_a, a->d_resid, a->encoded,
                           a->in_mean, a->in_rstd, N);
        denc = a->d_a;
    }
    float *dwpe = tp(m, m->grads, T_WPE, 0);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = denc + ((size_t)b * T + t) * C;
            float *e = dwte + (size_t)a->tokens[b * T + t] * C;
            for (int i = 0; i < C; i++)
                e[i] += d[i];
            if (dwpe)
                for (int i = 0; i < C; i++)
                    dwpe[(size_t)t * C + i] += d[i];
        }
}

/* In 8 double partial sums, combined in a fixed order: vectorizes, same result every run. */
static double sumsq(const float *g, size_t n) {
    double acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += (double)g[i + k] * g[i + k];
    for (int k = 0; i + (size_t)k < n; k++)
        acc[k] += (double)g[i + k] * g[i + k];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

double gpt_grad_norm(const GPT *m) {
    return sqrt(sumsq(m->grads, m->n_params));
}

double gpt_layer_grad_norm(const GPT *m, int layer) {
    double s = 0.0;
    for (int i = 0; i < T_COUNT; i++) {
        const TensorInfo *t = &m->tensors[i];
        if (!t->per_layer || t->size == 0) continue;
        s += sumsq(tp(m, m->grads, (TensorId)i, layer), layer_size(m, (TensorId)i));
    }
    return sqrt(s);
}
