#include "gpt.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "attention.h"
#include "gemm.h"
#include "gpt_internal.h"
#include "layers.h"
#include "par.h"
#include "rng.h"
#include "transpose.h"
#include "xent.h"

static Dims dims_of(const ModelConfig *c) {
    Dims d = {.V = c->vocab_size, .C = c->d_model, .L = c->n_layer, .H = c->n_head};
    d.KV = model_kv_heads(c);
    d.hd = model_head_dim(c);
    d.QKV = (d.H + 2 * d.KV) * d.hd;
    d.FF = model_d_ff(c);
    d.UP = model_is_glu(c) ? 2 * d.FF : d.FF;
    d.group = d.H / d.KV;
    d.E = c->moe_experts;
    d.K = c->moe_top_k;
    d.FFE = model_expert_ff(c);
    d.UPE = model_is_glu(c) ? 2 * d.FFE : d.FFE;
    d.Lm = model_moe_layer_count(c);
    d.Ld = d.L - d.Lm;
    return d;
}

#define NO_WT ((size_t)-1)

/* ------------------------------------------------------------------ tensor table */

const char *const init_kind_names[4] = {"normal", "residual", "ones", "zeros"};

static void tensor(TensorInfo *t, const char *name, size_t *off, int present, int per_layer, int L,
                   int d0, int d1, int decay, InitKind init) {
    t->name = name;
    t->per_layer = per_layer;
    t->stack = STACK_ALL;
    t->decay = decay;
    t->init = init;
    t->ndim = 0;
    t->fan_in = 0;
    if (per_layer) t->shape[t->ndim++] = L;
    t->shape[t->ndim++] = d0;
    if (d1 > 0) t->shape[t->ndim++] = d1;
    size_t n = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1) * (size_t)(per_layer ? L : 1);
    t->size = present ? n : 0;
    t->offset = *off;
    *off += t->size;
}

size_t gpt_tensor_table(const ModelConfig *c, TensorInfo t[T_COUNT]) {
    Dims d = dims_of(c);
    int V = d.V, C = d.C, L = d.L, hd = d.hd, QKV = d.QKV, FF = d.FF, UP = d.UP;
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
    /* the dense MLP stacks over the blocks without experts (all of them when dense) */
    int Ld = d.Ld, dense = Ld > 0;
    tensor(&t[T_FC_W], "fc.w", &o, dense, 1, Ld, UP, C, 1, INIT_NORMAL);
    tensor(&t[T_FC_B], "fc.b", &o, dense && c->mlp_bias, 1, Ld, UP, 0, 0, INIT_ZEROS);
    tensor(&t[T_FC_PROJ_W], "fc_proj.w", &o, dense, 1, Ld, C, FF, 1, INIT_RESIDUAL);
    tensor(&t[T_FC_PROJ_B], "fc_proj.b", &o, dense && c->mlp_bias, 1, Ld, C, 0, 0, INIT_ZEROS);
    for (int i = T_FC_W; i <= T_FC_PROJ_B; i++)
        t[i].stack = STACK_DENSE_MLP;
    tensor(&t[T_MLP_ONORM_W], "mlp_onorm.w", &o, peri && aff, 1, L, C, 0, 0, INIT_ONES);
    tensor(&t[T_MLP_ONORM_B], "mlp_onorm.b", &o, peri && aff && ln, 1, L, C, 0, 0, INIT_ZEROS);
    tensor(&t[T_FINAL_NORM_W], "final_norm.w", &o, c->final_norm && aff, 0, L, C, 0, 0, INIT_ONES);
    tensor(&t[T_FINAL_NORM_B], "final_norm.b", &o, c->final_norm && aff && ln, 0, L, C, 0, 0,
           INIT_ZEROS);
    tensor(&t[T_LM_HEAD], "lm_head.w", &o, !c->tie_embeddings, 0, L, V, C, 1, INIT_NORMAL);
    /* the MoE MLP stacks over the blocks with experts */
    int Lm = d.Lm, moe = Lm > 0, E = d.E;
    tensor(&t[T_ROUTER_W], "router.w", &o, moe, 1, Lm, E, C, 1, INIT_NORMAL);
    tensor(&t[T_EXP_FC_W], "exp_fc.w", &o, moe, 1, Lm, E * d.UPE, C, 1, INIT_NORMAL);
    tensor(&t[T_EXP_FC_B], "exp_fc.b", &o, moe && c->mlp_bias, 1, Lm, E * d.UPE, 0, 0, INIT_ZEROS);
    tensor(&t[T_EXP_PROJ_W], "exp_proj.w", &o, moe, 1, Lm, E * C, d.FFE, 1, INIT_RESIDUAL);
    tensor(&t[T_EXP_PROJ_B], "exp_proj.b", &o, moe && c->mlp_bias, 1, Lm, E * C, 0, 0, INIT_ZEROS);
    for (int i = T_ROUTER_W; i <= T_EXP_PROJ_B; i++)
        t[i].stack = STACK_MOE;
    tensor(&t[T_MOH_W], "moh.w", &o, model_is_moh(c), 1, L, d.H + 2, C, 1, INIT_NORMAL);
    /* the input width of every linear layer (nn.Linear's fan_in), for its weight and bias */
    const struct {
        TensorId w, b;
        int fan_in;
    } linear[] = {{T_QKV_W, T_QKV_B, C},       {T_ATTN_PROJ_W, T_ATTN_PROJ_B, C},
                  {T_FC_W, T_FC_B, C},         {T_FC_PROJ_W, T_FC_PROJ_B, FF},
                  {T_LM_HEAD, T_LM_HEAD, C},   {T_ROUTER_W, T_ROUTER_W, C},
                  {T_EXP_FC_W, T_EXP_FC_B, C}, {T_EXP_PROJ_W, T_EXP_PROJ_B, d.FFE},
                  {T_MOH_W, T_MOH_W, C}};
    for (size_t i = 0; i < sizeof linear / sizeof linear[0]; i++)
        t[linear[i].w].fan_in = t[linear[i].b].fan_in = linear[i].fan_in;
    return o;
}

/* Floats in one layer's slice of a tensor (all of it for a tensor that is not per layer). */
static size_t layer_size(const GPT *m, TensorId id) {
    const TensorInfo *t = &m->tensors[id];
    return t->per_layer && t->size ? t->size / (size_t)t->shape[0] : t->size;
}

/* Index of block l in a tensor's stack; -1 when the block has no slice of it (a dense
 * block's expert tensors, an MoE block's dense MLP). */
static int stack_slot(const GPT *m, TensorId id, int l) {
    const TensorInfo *t = &m->tensors[id];
    if (!t->per_layer || t->stack == STACK_ALL) return t->per_layer ? l : 0;
    if ((t->stack == STACK_MOE) != model_layer_is_moe(&m->cfg, l)) return -1;
    return model_mlp_slot(&m->cfg, l);
}

/* Pointer to layer l's slice of a tensor in a buffer (params or grads); NULL if absent. */
static float *tp(const GPT *m, float *buf, TensorId id, int l) {
    const TensorInfo *t = &m->tensors[id];
    int slot = stack_slot(m, id, l);
    if (t->size == 0 || slot < 0) return NULL;
    return buf + t->offset + (size_t)slot * (t->per_layer ? layer_size(m, id) : 0);
}

/* Layer l's transposed copy of a forward weight matrix, or NULL when none is kept. */
static float *wt(const GPT *m, TensorId id, int l) {
    const GptActs *a = m->a;
    int slot = stack_slot(m, id, l);
    if (a->wt_at[id] == NO_WT || slot < 0) return NULL;
    return a->wt + a->wt_at[id] + (size_t)slot * layer_size(m, id);
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
    Dims d = dims_of(c);
    f[0] = (FwdMatrix){T_QKV_W, d.QKV, d.C, d.L};
    f[1] = (FwdMatrix){T_ATTN_PROJ_W, d.C, d.C, d.L};
    f[2] = (FwdMatrix){T_FC_W, d.UP, d.C, d.Ld};
    f[3] = (FwdMatrix){T_FC_PROJ_W, d.C, d.FF, d.Ld};
    f[4] = (FwdMatrix){lm_head_id(c), d.V, d.C, 1};
    return 5;
}

typedef struct {
    float **ptr;
    double n; /* floats; a double so that an absurd size (the planner's) is measured, not wrapped */
} Req;

#define GPT_MAX_REQ 80

/* The activation buffers of a pass over (B, T), in buffer order: fills req (pointing into
 * a, whose dims and transposed-copy offsets it sets) and returns how many. One table serves
 * gpt_acts_alloc and gpt_acts_bytes, so the planner's memory estimate is the allocation. */
static int act_layout(const ModelConfig *c, int B, int T, int training, GptActs *a,
                      Req req[GPT_MAX_REQ]) {
    Dims d = a->d = dims_of(c);
    a->B = B;
    a->T = T;
    double C = d.C, L = d.L, V = d.V, H = d.H, KV = d.KV;
    double hd = d.hd, QKV = d.QKV, moe = d.Lm > 0, moh = model_is_moh(c), E = d.E,
           NK = moe ? (double)d.K : 0;
    /* the MLP buffers serve the dense MLP ((B,T) rows) and the experts ((B T k) packed rows) */
    double FF = fmax(d.FF, NK * d.FFE), UP = fmax(d.UP, NK * d.UPE);
    double BT = (double)B * T, ctx = c->context, Td = T;
    /* attention over the pass's own rows: (batch, head) pairs in lanes, padded (training),
     * for every pass of up to B rows (the last evaluation batch may be smaller) */
    double tile = training ? (double)attn_tile_floats(B * d.H, T, d.hd) : 0;
    double tile_att = training ? (double)attn_tile_floats(B * d.H, T, T) : 0;
    double BTb = training ? BT : 0; /* backward scratch */
    int in_place = activation_in_place(c->activation);
    LayerSizes z = a->z = (LayerSizes){.BT = BT,
                                       .BTC = BT * C,
                                       .QKV = BT * QKV,
                                       .H = BT * H,
                                       .KV = BT * KV,
                                       .UP = BT * UP,
                                       .FF = BT * FF,
                                       .lane_tile = tile,
                                       .lane_att = tile_att,
                                       .in_place = in_place,
                                       .RE = moe ? BT * E : 0,
                                       .NK = BT * NK,
                                       .NKC = BT * NK * C,
                                       .ints = moe ? 3 * BT * NK + E + 1 : 0,
                                       .MZ = moh ? BT * (d.H + 2) : 0,
                                       .MH = moh ? BT * d.H : 0,
                                       .MC = moh ? BT * C : 0};
    double wt_total = 0;
    for (int i = 0; i < T_COUNT; i++)
        a->wt_at[i] = NO_WT;
    FwdMatrix fm[5];
    for (int i = 0, n = fwd_matrices(c, fm); training && i < n; i++)
        if (gemm_unpacked(0, BT < INT_MAX ? (int)BT : INT_MAX, fm[i].out, fm[i].in)) {
            a->wt_at[fm[i].id] = (size_t)wt_total;
            wt_total += (double)fm[i].layers * fm[i].out * fm[i].in;
        }
    const Req table[] = {
        {&a->encoded, BT * C},
        {&a->in_mean, BT},
        {&a->in_rstd, BT},
        {&a->resid, (L + 1) * BT * C},
#define GPT_ACT_REQ(field, size) {&a->field, L * (size)},
        GPT_LAYER_ACTS(GPT_ACT_REQ)
#undef GPT_ACT_REQ
            {&a->fn_out, BT * C},
        {&a->fn_mean, BT},
        {&a->fn_rstd, BT},
        {&a->logits, BT * V},
        {&a->xent_max, training ? BT : 0},
        {&a->xent_sum, training ? BT : 0},
        {&a->qk, BT * QKV},
        {&a->y, z.lane_tile},
        {&a->scores, training ? 0 : ctx},
        {&a->rope_cos, c->position == POS_ROPE ? ctx * floor(hd / 2) : 0},
        {&a->rope_sin, c->position == POS_ROPE ? ctx * floor(hd / 2) : 0},
        {&a->d_resid, BTb * C},
        {&a->d_sub_in, BTb * C},
        {&a->d_sub_out, BTb * C},
        {&a->d_atty, BTb * C},
        {&a->d_final, c->final_norm ? BTb * C : 0},
        {&a->d_embed, c->input_norm ? BTb * C : 0},
        {&a->d_h, BTb * FF},
        {&a->d_fch, in_place ? 0 : BTb * UP},
        {&a->d_qkv, BTb * QKV},
        {&a->d_q, z.lane_tile},
        {&a->d_k, z.lane_tile},
        {&a->d_v, z.lane_tile},
        {&a->d_y, z.lane_tile},
        {&a->d_qk_row, training ? (H + KV) * hd : 0},
        {&a->attn_scratch, training ? PAR_MAX_THREADS * ATTN_LANES * Td : 0},
        {&a->xent_tile, training ? (double)xent_scratch_floats(B * T, d.C, d.V) : 0},
        {&a->d_eo, training ? z.NKC : 0},
        {&a->d_xg, training ? z.NKC : 0},
        {&a->d_gate, training ? z.NK : 0},
        {&a->d_rlog, training ? z.RE : 0},
        {&a->d_router, training ? 2 * fmax(moe ? E : 0, moh ? d.H + 2 : 0) * C : 0}, /* doubles */
        {&a->d_mz, training ? z.MZ : 0},
        {&a->wt, wt_total},
    };
    _Static_assert(sizeof table / sizeof table[0] <= GPT_MAX_REQ, "raise GPT_MAX_REQ");
    memcpy(req, table, sizeof table);
    return (int)(sizeof table / sizeof table[0]);
}

/* A model's large buffers (the activations, the parameters, the gradients): on 2 MiB
 * boundaries and, where the kernel's transparent huge pages are "madvise" (Debian's
 * default), advised to use them. The backward's products read the (N, V) exponentials
 * down 1,024 rows 200 KB apart, each row on pages of its own: with 4 KiB pages book's step
 * took 245.5-247.7 ms (141.3 on 2 threads), with huge pages for the activations
 * 235.4-239.4 (136.2-137.3) (bench/engine_limit.sh, one Zen 5 core). Buffers under 4 MiB
 * stay on ordinary pages. Freed with free(). */
static void *model_alloc(size_t bytes) {
    const size_t huge = (size_t)1 << 21;
    if (bytes < 2 * huge) return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    bytes = (bytes + huge - 1) & ~(huge - 1);
    void *p = aligned_alloc(huge, bytes);
#ifdef MADV_HUGEPAGE
    if (p) (void)madvise(p, bytes, MADV_HUGEPAGE); /* advice: refused, ordinary pages */
#endif
    return p;
}

/* Floats of one buffer, rounded up so the next starts 64-byte aligned. */
static double aligned_floats(double n) {
    return ceil(n / 16) * 16;
}

/* All activation floats: the buffers, then the (B, T) token copies and the MoE routing
 * tables as int32 in the tail. */
static double act_floats(const GptActs *a, const Req *req, int nreq, int B, int T) {
    double total = 2.0 * B * T + a->d.L * a->z.ints;
    for (int i = 0; i < nreq; i++)
        total += aligned_floats(req[i].n);
    return total;
}

double gpt_acts_bytes(const ModelConfig *c, int B, int T, int training) {
    GptActs a;
    Req req[GPT_MAX_REQ];
    int nreq = act_layout(c, B, T, training, &a, req);
    return sizeof(float) * act_floats(&a, req, nreq, B, T);
}

double gpt_alloc_bytes(const ModelConfig *c, int B, int T) {
    /* parameters and gradients, then a training pass's activations */
    return sizeof(float) * 2.0 * (double)model_param_count(c) + gpt_acts_bytes(c, B, T, 1);
}

GptActs *gpt_acts_alloc(const ModelConfig *c, int B, int T, int training) {
    GptActs *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    Req req[GPT_MAX_REQ];
    int nreq = act_layout(c, B, T, training, a, req);
    double total = act_floats(a, req, nreq, B, T);
    if (total * sizeof(float) > (double)(SIZE_MAX / 2) ||
        !(a->buf = model_alloc((size_t)total * sizeof(float)))) {
        free(a);
        return NULL;
    }
    memset(a->buf, 0, (size_t)total * sizeof(float));
    float *p = a->buf;
    for (int i = 0; i < nreq; i++) {
        *req[i].ptr = p;
        p += (size_t)aligned_floats(req[i].n);
    }
    size_t BT = (size_t)B * (size_t)T, hd = (size_t)a->d.hd;
    a->tokens = (int32_t *)p;
    a->targets = (int32_t *)(p + BT);
    size_t NK = (size_t)a->z.NK, L = (size_t)a->d.L; /* MoE routing tables, (L, ...) each */
    a->sel = a->targets + BT;
    a->row = a->sel + L * NK;
    a->asg = a->row + L * NK;
    a->eoff = a->asg + L * NK;
    if (c->position == POS_ROPE)
        for (int t = 0; t < c->context; t++)
            rope_angles(a->rope_cos + (size_t)t * (hd / 2), a->rope_sin + (size_t)t * (hd / 2), t,
                        (int)hd, c->rope_base);
    return a;
}

void gpt_acts_free(GptActs *a) {
    if (a) free(a->buf);
    free(a);
}

/* The views of every tensor: built once, after the parameters, gradients and copies exist. */
static void build_views(GPT *m) {
#define GPT_VIEW(id, field)                                                                        \
    v->w.field = tp(m, m->params, id, l);                                                          \
    v->g.field = tp(m, m->grads, id, l);                                                           \
    v->wt.field = wt(m, id, l);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        LayerView *v = &m->layers[l];
        GPT_LAYER_TENSORS(GPT_VIEW)
        GPT_MOE_TENSORS(GPT_VIEW)
    }
    {
        ModelView *v = &m->view;
        int l = 0;
        GPT_EMBED_TENSORS(GPT_VIEW)
        GPT_HEAD_TENSORS(GPT_VIEW)
        if (m->cfg.tie_embeddings) { /* the lm_head is wte; wte alone is only looked up */
            v->w.lm_head = v->w.wte;
            v->g.lm_head = v->g.wte;
            v->wt.lm_head = v->wt.wte;
            v->wt.wte = NULL;
        }
    }
#undef GPT_VIEW
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
    m->params = model_alloc(m->n_params * sizeof(float));
    m->grads = model_alloc(m->n_params * sizeof(float));
    m->a = gpt_acts_alloc(c, B, T, 1);
    m->stats = calloc((size_t)c->n_layer, sizeof *m->stats);
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    m->grad_sums = calloc(GPT_NORM_BLOCKS(m->n_params), sizeof *m->grad_sums);
    if (!m->params || !m->grads || !m->a || !m->stats || !m->layers || !m->grad_sums) {
        snprintf(err, ABL_ERR_MAX,
                 "cannot allocate the model: %zu parameters (%.1f MiB) and the activations of a "
                 "batch of %d x %d",
                 m->n_params, (double)(4 * m->n_params) * sizeof(float) / 1048576.0, B, T);
        gpt_free(m);
        return -1;
    }
    memset(m->grads, 0, m->n_params * sizeof(float));
    build_views(m);
    return 0;
}

void gpt_free(GPT *m) {
    free(m->params);
    free(m->grads);
    gpt_acts_free(m->a);
    free(m->stats);
    free(m->layers);
    free(m->grad_sums);
    memset(m, 0, sizeof *m);
}

/* model.init torch: what PyTorch's default modules draw (gpt.h). nn.Linear's weight is
 * kaiming_uniform_(a = sqrt(5)), whose bound gain sqrt(3 / fan_in) with gain sqrt(2 / (1 + 5))
 * is 1/sqrt(fan_in), and its bias the same bound; uniform from 53 random bits. */
static void init_torch(GPT *m, uint64_t seed) {
    for (int i = 0; i < T_COUNT; i++) {
        const TensorInfo *t = &m->tensors[i];
        float *w = m->params + t->offset;
        uint64_t stream = ((uint64_t)RNG_STREAM_INIT << 32) | (uint64_t)i;
        double bound = t->fan_in > 0 ? 1.0 / sqrt((double)t->fan_in) : 0.0;
        for (size_t j = 0; j < t->size; j++) {
            if (t->fan_in > 0) {
                double u = (double)(rng_u64(seed, stream, j) >> 11) * 0x1.0p-53;
                w[j] = (float)(bound * (2.0 * u - 1.0));
            } else if (t->init == INIT_ONES) {
                w[j] = 1.0f;
            } else if (t->init == INIT_ZEROS) {
                w[j] = 0.0f;
            } else { /* the embeddings */
                w[j] = rng_normal(seed, stream, j);
            }
        }
    }
}

void gpt_init_weights(GPT *m, uint64_t seed) {
    if (m->cfg.init == WINIT_TORCH) {
        init_torch(m, seed);
        return;
    }
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

static void zero_piece(void *ctx, size_t b, size_t e, int chunk) {
    (void)chunk;
    memset((float *)ctx + b, 0, (e - b) * sizeof(float));
}

void gpt_zero_grad(GPT *m) {
    par_for(m->n_params, par_grain(1, 16), zero_piece, m->grads);
}
float *gpt_logits(GPT *m) {
    return m->a->logits;
}

/* The transposed copies follow the weights: every forward may follow an update. */
static void refresh_transposed(GPT *m) {
    FwdMatrix fm[5];
    for (int i = 0, n = fwd_matrices(&m->cfg, fm); i < n; i++) {
        if (m->a->wt_at[fm[i].id] == NO_WT) continue;
        for (int l = 0; l < (m->tensors[fm[i].id].per_layer ? m->cfg.n_layer : 1); l++) {
            float *copy = wt(m, fm[i].id, l); /* NULL: block l has no slice (MoE blocks' fc) */
            if (copy) transpose(copy, tp(m, m->params, fm[i].id, l), fm[i].out, fm[i].in);
        }
    }
}

/* ------------------------------------------------------------------ a pass */

static LayerActs layer_acts(const GptActs *a, int l) {
    const LayerSizes z = a->z;
    size_t L = (size_t)l;
    LayerActs s = {.in = a->resid + L * (size_t)z.BTC, .out = a->resid + (L + 1) * (size_t)z.BTC};
#define GPT_ACT_SLICE(field, size) s.field = a->field + L * (size_t)(size);
    GPT_LAYER_ACTS(GPT_ACT_SLICE)
#undef GPT_ACT_SLICE
    s.h = z.in_place ? s.fch : s.fch_act;
    size_t NK = (size_t)z.NK;
    s.sel = a->sel + L * NK;
    s.row = a->row + L * NK;
    s.asg = a->asg + L * NK;
    s.eoff = a->eoff + L * (size_t)(a->d.E + 1);
    return s;
}

/* The forward's matrix products use the transposed copies gpt_forward refreshes; generation
 * may follow an update without a gpt_forward, so it multiplies by the weights themselves. */
static const float *fwd_wt(const Pass *p, const float *copy) {
    return p->k ? NULL : copy;
}

static void norm_fwd(const ModelConfig *c, float *out, float *mean, float *rstd, const float *inp,
                     const float *w, const float *b, int N) {
    norm_forward(c->norm_type, out, mean, rstd, inp, w, b, N, c->d_model, (float)c->norm_eps);
}
/* dinp += d/dinp of a norm site with parameters w (gradients dw, db). */
static void norm_bwd(const ModelConfig *c, float *dinp, const float *dout, const float *inp,
                     const float *mean, const float *rstd, const float *w, float *dw, float *db,
                     int N) {
    norm_backward(c->norm_type, dinp, dw, db, dout, inp, mean, rstd, w, N, c->d_model);
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

/* The q and k heads of the pass's rows through the optional per-head norm and RoPE, into
 * a->qk. Returns the rows attention reads q and k from: qkv itself when neither applies. */
static const float *qk_forward(const Pass *p, const LayerView *L, const LayerActs *s) {
    const ModelConfig *c = &p->m->cfg;
    GptActs *a = p->a;
    const Dims *d = &a->d;
    if (!c->qk_norm && c->position != POS_ROPE) return s->qkv;
    int H = d->H, KV = d->KV, hd = d->hd;
    float eps = (float)c->norm_eps;
    size_t nqk = (size_t)(H + KV) * hd;
    for (size_t bt = 0; bt < (size_t)p->B * p->T; bt++) {
        size_t pos = (size_t)p->pos0 + bt % (size_t)p->T;
        const float *x = s->qkv + bt * d->QKV;
        float *y = a->qk + bt * d->QKV;
        if (c->qk_norm) { /* the H q heads, then the KV k heads: rows of hd */
            norm_forward(c->norm_type, y, s->q_mean + bt * H, s->q_rstd + bt * H, x, L->w.q_norm_w,
                         L->w.q_norm_b, H, hd, eps);
            norm_forward(c->norm_type, y + (size_t)H * hd, s->k_mean + bt * KV, s->k_rstd + bt * KV,
                         x + (size_t)H * hd, L->w.k_norm_w, L->w.k_norm_b, KV, hd, eps);
        } else {
            memcpy(y, x, nqk * sizeof(float));
        }
        if (c->position == POS_ROPE)
            for (int h = 0; h < H + KV; h++)
                rope_rotate(y + (size_t)h * hd, hd, a->rope_cos + pos * (hd / 2),
                            a->rope_sin + pos * (hd / 2), 0);
    }
    return a->qk;
}

/* atty = causal attention over the pass's own rows: q and k from qk, v from qkv. */
static void attend_rows(const Pass *p, const LayerActs *s, const float *qk, int l) {
    GptActs *a = p->a;
    const Dims *d = &a->d;
    int B = p->B, T = p->T, H = d->H, hd = d->hd;
    attn_to_lanes(s->q, qk, B, T, H, hd, (size_t)d->QKV, 1);
    attn_to_lanes(s->k, qk + (size_t)H * hd, B, T, H, hd, (size_t)d->QKV, d->group);
    attn_to_lanes(s->v, s->qkv + (size_t)(H + d->KV) * hd, B, T, H, hd, (size_t)d->QKV, d->group);
    attention_forward(a->y, s->att, s->q, s->k, s->v, B * H, T, hd);
    if (p->stats) {
        double entropy[MODEL_MAX_HEADS] = {0};
        attention_entropy(entropy, s->att, B * H, H, T, hd);
        for (int h = 0; h < H; h++)
            p->stats[l].attn_entropy[h] = entropy[h] / ((double)B * T);
    }
    attn_from_lanes(s->atty, a->y, B, T, H, hd, (size_t)d->C, 1);
}

/* atty = attention of the pass's one row to the cached positions and itself: its k and v
 * go into the cache at position pos0 first. */
static void attend_cache(const Pass *p, const LayerActs *s, const float *qk, int l) {
    const Dims *d = &p->a->d;
    int H = d->H, KV = d->KV, hd = d->hd, ctx = p->m->cfg.context, pos = p->pos0;
    size_t layer = (size_t)l * KV * ctx * hd;
    float *K = p->k + layer, *V = p->v + layer;
    for (int g = 0; g < KV; g++) {
        memcpy(K + ((size_t)g * ctx + pos) * hd, qk + (size_t)(H + g) * hd,
               (size_t)hd * sizeof(float));
        memcpy(V + ((size_t)g * ctx + pos) * hd, s->qkv + (size_t)(H + KV + g) * hd,
               (size_t)hd * sizeof(float));
    }
    attention_cached(s->atty, qk, K, V, H, KV, ctx, pos + 1, hd, p->a->scores);
}

/* y (B,T,C) = attention sublayer of x; keeps everything backward needs. */
static void attn_forward(const Pass *p, const LayerView *L, const LayerActs *s, int l,
                         const float *x, float *y) {
    const Dims *d = &p->a->d;
    int N = p->B * p->T, C = d->C;
    matmul_forward(s->qkv, x, L->w.qkv_w, fwd_wt(p, L->wt.qkv_w), L->w.qkv_b, N, C, d->QKV);
    const float *qk = qk_forward(p, L, s);
    if (p->k)
        attend_cache(p, s, qk, l);
    else
        attend_rows(p, s, qk, l);
    const float *heads = s->atty;
    if (model_is_moh(&p->m->cfg)) { /* each head times its gate */
        moh_forward(p, L, s, l, x);
        heads = s->attg;
    }
    matmul_forward(y, heads, L->w.attn_proj_w, fwd_wt(p, L->wt.attn_proj_w), L->w.attn_proj_b, N, C,
                   C);
}

/* d_q, d_k, d_v (lanes) -> d_qkv (overwritten). Undoes RoPE, then the per-head norm. */
static void qk_backward(const Pass *p, const LayerView *L, const LayerActs *s) {
    const ModelConfig *c = &p->m->cfg;
    GptActs *a = p->a;
    const Dims *d = &a->d;
    int B = p->B, T = p->T, H = d->H, KV = d->KV, hd = d->hd, QKV = d->QKV;
    attn_from_lanes(a->d_qkv, a->d_q, B, T, H, hd, (size_t)QKV, 1);
    attn_from_lanes(a->d_qkv + (size_t)H * hd, a->d_k, B, T, H, hd, (size_t)QKV, d->group);
    attn_from_lanes(a->d_qkv + (size_t)(H + KV) * hd, a->d_v, B, T, H, hd, (size_t)QKV, d->group);
    if (!c->qk_norm && c->position != POS_ROPE) return;
    for (size_t bt = 0; bt < (size_t)B * T; bt++) {
        size_t pos = (size_t)p->pos0 + bt % (size_t)T;
        float *dq = a->d_qkv + bt * QKV;
        if (c->position == POS_ROPE)
            for (int h = 0; h < H + KV; h++)
                rope_rotate(dq + (size_t)h * hd, hd, a->rope_cos + pos * (hd / 2),
                            a->rope_sin + pos * (hd / 2), 1);
        if (!c->qk_norm) continue;
        /* through the norms and their affine (gain w, shift b), H q rows then KV k rows of hd */
        size_t nqk = (size_t)(H + KV) * hd;
        float *dn = a->d_qk_row; /* d of the norms' output */
        memcpy(dn, dq, nqk * sizeof(float));
        memset(dq, 0, nqk * sizeof(float));
        const float *x = s->qkv + bt * QKV;
        norm_backward(c->norm_type, dq, L->g.q_norm_w, L->g.q_norm_b, dn, x, s->q_mean + bt * H,
                      s->q_rstd + bt * H, L->w.q_norm_w, H, hd);
        norm_backward(c->norm_type, dq + (size_t)H * hd, L->g.k_norm_w, L->g.k_norm_b,
                      dn + (size_t)H * hd, x + (size_t)H * hd, s->k_mean + bt * KV,
                      s->k_rstd + bt * KV, L->w.k_norm_w, KV, hd);
    }
}

/* dx = beta dx + d/dx of the attention sublayer given dy. */
static void attn_backward(const Pass *p, const LayerView *L, const LayerActs *s, const float *x,
                          const float *dy, float *dx, float beta) {
    GptActs *a = p->a;
    const Dims *d = &a->d;
    int B = p->B, T = p->T, N = B * T, C = d->C, H = d->H, hd = d->hd;
    int moh = model_is_moh(&p->m->cfg);
    matmul_backward(a->d_atty, 0.0f, L->g.attn_proj_w, L->g.attn_proj_b, dy, 1.0f,
                    moh ? s->attg : s->atty, L->w.attn_proj_w, N, C, C);
    if (moh) moh_backward(p, s);
    attn_to_lanes(a->d_y, a->d_atty, B, T, H, hd, (size_t)C, 1);
    attention_backward(a->d_q, a->d_k, a->d_v, a->d_y, s->att, s->q, s->k, s->v, B * H, T, hd,
                       a->attn_scratch);
    qk_backward(p, L, s);
    matmul_backward(dx, beta, L->g.qkv_w, L->g.qkv_b, a->d_qkv, 1.0f, x, L->w.qkv_w, N, C, d->QKV);
    if (!moh) return;
    int Z = H + 2; /* the mixture-of-heads router: its weights, and dx += dz W */
    router_weight_backward(L->g.moh_w, (double *)(void *)a->d_router, a->d_mz, x, N, C, Z);
    gemm(0, 0, N, C, Z, 1.0f, a->d_mz, Z, L->w.moh_w, C, 1.0f, dx, C);
}

/* ------------------------------------------------------------------ MLP */

void mlp_stats(LayerStats *st, const float *h, size_t n) {
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
    st->h_count = (double)n;
    st->zero_frac = zeros / (double)n;
    st->mean = sum / (double)n;
    st->rms = sqrt(sq / (double)n);
    st->max = mx;
    st->min = mn;
    /* a second pass: the threshold needs the rms (<=, so exact zeros count even when the
     * whole tensor is zero) */
    double tau = GPT_NEAR_ZERO * st->rms, near = 0;
    for (size_t i = 0; i < n; i++)
        near += fabs((double)h[i]) <= tau;
    st->near_zero_frac = near / (double)n;
}

/* The range of the nonlinearity's input over rows of width F at a stride of F (GLU: 2F,
 * the gate first): taken before the activation, which a ReLU computes in place. */
void pre_stats(LayerStats *st, const float *pre, int rows, int F, int glu) {
    float mx = -INFINITY, mn = INFINITY;
    size_t stride = (size_t)F * (glu ? 2 : 1);
    for (int r = 0; r < rows; r++) {
        const float *g = pre + (size_t)r * stride;
        for (int i = 0; i < F; i++) {
            mx = g[i] > mx ? g[i] : mx;
            mn = g[i] < mn ? g[i] : mn;
        }
    }
    st->pre_max = mx;
    st->pre_min = mn;
}

static void mlp_forward(const Pass *p, const LayerView *L, const LayerActs *s, int l,
                        const float *x, float *y) {
    const ModelConfig *c = &p->m->cfg;
    if (model_layer_is_moe(c, l)) {
        moe_forward(p, L, s, l, x, y);
        return;
    }
    const Dims *d = &p->a->d;
    int N = p->B * p->T, C = d->C, FF = d->FF;
    if (p->a->z.in_place && !p->stats) { /* the ReLU in the product (layers.h) */
        matmul_forward_relu(s->fch, x, L->w.fc_w, fwd_wt(p, L->wt.fc_w), L->w.fc_b, N, C, d->UP);
    } else {
        matmul_forward(s->fch, x, L->w.fc_w, fwd_wt(p, L->wt.fc_w), L->w.fc_b, N, C, d->UP);
        if (p->stats) pre_stats(&p->stats[l], s->fch, N, FF, model_is_glu(c));
        if (p->a->z.in_place)
            relu_forward_inplace(s->h, (size_t)N * FF);
        else
            activation_forward(c->activation, s->h, s->fch, N, FF);
    }
    if (p->stats) mlp_stats(&p->stats[l], s->h, (size_t)N * FF);
    matmul_forward(y, s->h, L->w.fc_proj_w, fwd_wt(p, L->wt.fc_proj_w), L->w.fc_proj_b, N, FF, C);
}

/* dx = beta dx + d/dx of the MLP sublayer given dy. */
static void mlp_backward(const Pass *p, const LayerView *L, const LayerActs *s, int l,
                         const float *x, const float *dy, float *dx, float beta) {
    const ModelConfig *c = &p->m->cfg;
    if (model_layer_is_moe(c, l)) {
        moe_backward(p, L, s, x, dy, dx, beta);
        return;
    }
    GptActs *a = p->a;
    const Dims *d = &a->d;
    int N = p->B * p->T, C = d->C, FF = d->FF;
    float *d_fch = a->d_fch;
    if (a->z.in_place) { /* d_h through the ReLU in the product (layers.h): d_fch in place */
        matmul_backward_relu(a->d_h, 0.0f, L->g.fc_proj_w, L->g.fc_proj_b, dy, 1.0f, s->h,
                             L->w.fc_proj_w, N, FF, C);
        d_fch = a->d_h;
    } else {
        matmul_backward(a->d_h, 0.0f, L->g.fc_proj_w, L->g.fc_proj_b, dy, 1.0f, s->h,
                        L->w.fc_proj_w, N, FF, C);
        activation_backward(c->activation, d_fch, a->d_h, s->fch, N, FF);
    }
    matmul_backward(dx, beta, L->g.fc_w, L->g.fc_b, d_fch, 1.0f, x, L->w.fc_w, N, C, d->UP);
}

/* ------------------------------------------------------------------ the block */

/* Block l: s.in -> s.out, as the placement says (gpt.h). */
static void block_forward(const Pass *p, int l) {
    const ModelConfig *c = &p->m->cfg;
    const LayerView *L = &p->m->layers[l];
    LayerActs s = layer_acts(p->a, l);
    int N = p->B * p->T;
    size_t n = (size_t)N * c->d_model;
    switch (c->norm) {
    case NORM_PRE:
        norm_fwd(c, s.n1, s.n1_mean, s.n1_rstd, s.in, L->w.attn_norm_w, L->w.attn_norm_b, N);
        attn_forward(p, L, &s, l, s.n1, s.ao);
        add(s.sum1, s.in, s.ao, n);
        norm_fwd(c, s.n2, s.n2_mean, s.n2_rstd, s.sum1, L->w.mlp_norm_w, L->w.mlp_norm_b, N);
        mlp_forward(p, L, &s, l, s.n2, s.mo);
        add(s.out, s.sum1, s.mo, n);
        break;
    case NORM_POST:
        attn_forward(p, L, &s, l, s.in, s.ao);
        add(s.sum1, s.in, s.ao, n);
        norm_fwd(c, s.n1, s.n1_mean, s.n1_rstd, s.sum1, L->w.attn_norm_w, L->w.attn_norm_b, N);
        mlp_forward(p, L, &s, l, s.n1, s.mo);
        add(s.sum2, s.n1, s.mo, n);
        norm_fwd(c, s.out, s.n2_mean, s.n2_rstd, s.sum2, L->w.mlp_norm_w, L->w.mlp_norm_b, N);
        break;
    case NORM_PERI:
        norm_fwd(c, s.n1, s.n1_mean, s.n1_rstd, s.in, L->w.attn_norm_w, L->w.attn_norm_b, N);
        attn_forward(p, L, &s, l, s.n1, s.ao);
        norm_fwd(c, s.aon, s.aon_mean, s.aon_rstd, s.ao, L->w.attn_onorm_w, L->w.attn_onorm_b, N);
        add(s.sum1, s.in, s.aon, n);
        norm_fwd(c, s.n2, s.n2_mean, s.n2_rstd, s.sum1, L->w.mlp_norm_w, L->w.mlp_norm_b, N);
        mlp_forward(p, L, &s, l, s.n2, s.mo);
        norm_fwd(c, s.mon, s.mon_mean, s.mon_rstd, s.mo, L->w.mlp_onorm_w, L->w.mlp_onorm_b, N);
        add(s.out, s.sum1, s.mon, n);
        break;
    case NORM_NONE:
        attn_forward(p, L, &s, l, s.in, s.ao);
        add(s.sum1, s.in, s.ao, n);
        mlp_forward(p, L, &s, l, s.sum1, s.mo);
        add(s.out, s.sum1, s.mo, n);
        break;
    case NORM_COUNT: /* not a placement: model_config_validate refuses it */
        abort();
    }
    if (p->stats) {
        double sq = 0;
        for (size_t i = 0; i < n; i++)
            sq += (double)s.out[i] * s.out[i];
        p->stats[l].resid_rms = sqrt(sq / (double)n);
    }
}

/* On entry d_resid holds dL/d(block output); on exit dL/d(block input). */
static void block_backward(const Pass *p, int l) {
    const ModelConfig *c = &p->m->cfg;
    const LayerView *L = &p->m->layers[l];
    GptActs *a = p->a;
    LayerActs s = layer_acts(a, l);
    int N = p->B * p->T;
    size_t n = (size_t)N * c->d_model;
    float *dr = a->d_resid, *din = a->d_sub_in, *dout = a->d_sub_out;
    switch (c->norm) {
    case NORM_PRE:
        /* out = sum1 + mlp(n2(sum1)): dr is d sum1's direct path */
        mlp_backward(p, L, &s, l, s.n2, dr, din, 0.0f);
        norm_bwd(c, dr, din, s.sum1, s.n2_mean, s.n2_rstd, L->w.mlp_norm_w, L->g.mlp_norm_w,
                 L->g.mlp_norm_b, N);
        /* sum1 = x + attn(n1(x)) */
        attn_backward(p, L, &s, s.n1, dr, din, 0.0f);
        norm_bwd(c, dr, din, s.in, s.n1_mean, s.n1_rstd, L->w.attn_norm_w, L->g.attn_norm_w,
                 L->g.attn_norm_b, N);
        break;
    case NORM_POST:
        /* out = n2(sum2), sum2 = n1 + mlp(n1), n1 = norm(sum1), sum1 = x + attn(x) */
        memset(dout, 0, n * sizeof(float));
        norm_bwd(c, dout, dr, s.sum2, s.n2_mean, s.n2_rstd, L->w.mlp_norm_w, L->g.mlp_norm_w,
                 L->g.mlp_norm_b, N);
        memcpy(din, dout, n * sizeof(float)); /* d n1: the direct path, then the MLP's */
        mlp_backward(p, L, &s, l, s.n1, dout, din, 1.0f);
        memset(dr, 0, n * sizeof(float));
        norm_bwd(c, dr, din, s.sum1, s.n1_mean, s.n1_rstd, L->w.attn_norm_w, L->g.attn_norm_w,
                 L->g.attn_norm_b, N);
        /* dr = d sum1 = d x (direct) + attn backward */
        attn_backward(p, L, &s, s.in, dr, din, 0.0f);
        accumulate(dr, din, n);
        break;
    case NORM_PERI:
        /* out = sum1 + n2o(mlp(n2(sum1))) */
        memset(dout, 0, n * sizeof(float));
        norm_bwd(c, dout, dr, s.mo, s.mon_mean, s.mon_rstd, L->w.mlp_onorm_w, L->g.mlp_onorm_w,
                 L->g.mlp_onorm_b, N);
        mlp_backward(p, L, &s, l, s.n2, dout, din, 0.0f);
        norm_bwd(c, dr, din, s.sum1, s.n2_mean, s.n2_rstd, L->w.mlp_norm_w, L->g.mlp_norm_w,
                 L->g.mlp_norm_b, N);
        /* sum1 = x + n1o(attn(n1(x))) */
        memset(dout, 0, n * sizeof(float));
        norm_bwd(c, dout, dr, s.ao, s.aon_mean, s.aon_rstd, L->w.attn_onorm_w, L->g.attn_onorm_w,
                 L->g.attn_onorm_b, N);
        attn_backward(p, L, &s, s.n1, dout, din, 0.0f);
        norm_bwd(c, dr, din, s.in, s.n1_mean, s.n1_rstd, L->w.attn_norm_w, L->g.attn_norm_w,
                 L->g.attn_norm_b, N);
        break;
    case NORM_NONE:
        mlp_backward(p, L, &s, l, s.sum1, dr, dr, 1.0f);
        attn_backward(p, L, &s, s.in, dr, dr, 1.0f);
        break;
    case NORM_COUNT: /* not a placement: model_config_validate refuses it */
        abort();
    }
}

/* ------------------------------------------------------------------ the model */

/* tokens (B,T) -> the lm_head's input (B,T,C): embedding, input norm, the blocks, final
 * norm. The one forward of training and generation; the lm_head follows (forward_pass), or
 * with targets the tiled lm_head and loss (xent.h). */
static const float *hidden_pass(const Pass *p, const int32_t *tokens) {
    const ModelConfig *c = &p->m->cfg;
    const ModelView *M = &p->m->view;
    GptActs *a = p->a;
    int B = p->B, T = p->T, C = c->d_model, N = B * T;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = a->encoded + ((size_t)b * T + t) * C;
            const float *e = M->w.wte + (size_t)tokens[b * T + t] * C;
            const float *pe = M->w.wpe ? M->w.wpe + (size_t)(p->pos0 + t) * C : NULL;
            if (pe) /* learned positions; otherwise the token embedding alone */
                for (int i = 0; i < C; i++)
                    o[i] = e[i] + pe[i];
            else
                memcpy(o, e, (size_t)C * sizeof(float));
        }
    if (c->input_norm)
        norm_fwd(c, a->resid, a->in_mean, a->in_rstd, a->encoded, M->w.in_norm_w, M->w.in_norm_b,
                 N);
    else
        memcpy(a->resid, a->encoded, (size_t)N * C * sizeof(float));

    for (int l = 0; l < c->n_layer; l++)
        block_forward(p, l);

    const float *last = layer_acts(a, c->n_layer - 1).out;
    if (c->final_norm) {
        norm_fwd(c, a->fn_out, a->fn_mean, a->fn_rstd, last, M->w.final_norm_w, M->w.final_norm_b,
                 N);
        last = a->fn_out;
    }
    return last;
}

/* tokens (B,T) -> logits (B,T,V) in p->a. */
static const float *forward_pass(const Pass *p, const int32_t *tokens) {
    const ModelConfig *c = &p->m->cfg;
    const ModelView *M = &p->m->view;
    const float *last = hidden_pass(p, tokens);
    matmul_forward(p->a->logits, last, M->w.lm_head, fwd_wt(p, M->wt.lm_head), NULL, p->B * p->T,
                   c->d_model, c->vocab_size);
    return p->a->logits;
}

float gpt_forward(GPT *m, const int32_t *x, const int32_t *y, int B, int T) {
    const ModelConfig *c = &m->cfg;
    GptActs *a = m->a;
    int N = B * T;
    m->cur_B = B;
    m->cur_T = T;
    memcpy(a->tokens, x, (size_t)N * sizeof(int32_t));
    if (y) memcpy(a->targets, y, (size_t)N * sizeof(int32_t));
    if (m->collect_stats) memset(m->stats, 0, (size_t)c->n_layer * sizeof *m->stats);
    refresh_transposed(m);
    m->aux_loss = 0.0f;
    Pass p = {.m = m,
              .a = a,
              .B = B,
              .T = T,
              .stats = m->collect_stats ? m->stats : NULL,
              .aux = &m->aux_loss};
    m->loss = 0.0f;
    m->correct = 0;
    if (!y) {
        forward_pass(&p, x);
        return m->loss;
    }
    const ModelView *M = &m->view;
    const float *last = hidden_pass(&p, x);
    m->loss = xent_forward(a->logits, a->xent_max, a->xent_sum, last, M->w.lm_head,
                           fwd_wt(&p, M->wt.lm_head), N, c->d_model, c->vocab_size, y, &m->correct,
                           a->xent_tile);
    return m->loss;
}

const float *gpt_forward_cached(const GPT *m, GptActs *a, float *k, float *v, int pos,
                                int32_t token) {
    Pass p = {.m = m, .a = a, .B = 1, .T = 1, .pos0 = pos, .k = k, .v = v};
    return forward_pass(&p, &token);
}

void gpt_backward(GPT *m) {
    const ModelConfig *c = &m->cfg;
    const ModelView *M = &m->view;
    GptActs *a = m->a;
    int B = m->cur_B, T = m->cur_T, C = c->d_model, V = c->vocab_size, N = B * T;
    Pass p = {.m = m, .a = a, .B = B, .T = T};

    const float *blocks_out = layer_acts(a, c->n_layer - 1).out;
    const float *last = c->final_norm ? a->fn_out : blocks_out;
    /* d logits = (probs - onehot) / N, tile by tile from the forward's stored exponentials
     * (xent.h): the 1/N rides on the per-row factors and the one-hot correction */
    xent_backward(c->final_norm ? a->d_final : a->d_resid, M->g.lm_head, a->logits, a->targets,
                  last, M->w.lm_head, N, C, V, 1.0f / (float)N, a->xent_tile);
    if (c->final_norm) {
        memset(a->d_resid, 0, (size_t)N * C * sizeof(float));
        norm_bwd(c, a->d_resid, a->d_final, blocks_out, a->fn_mean, a->fn_rstd, M->w.final_norm_w,
                 M->g.final_norm_w, M->g.final_norm_b, N);
    }

    for (int l = c->n_layer - 1; l >= 0; l--)
        block_backward(&p, l);

    const float *denc = a->d_resid;
    if (c->input_norm) {
        memset(a->d_embed, 0, (size_t)N * C * sizeof(float));
        norm_bwd(c, a->d_embed, a->d_resid, a->encoded, a->in_mean, a->in_rstd, M->w.in_norm_w,
                 M->g.in_norm_w, M->g.in_norm_b, N);
        denc = a->d_embed;
    }
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = denc + ((size_t)b * T + t) * C;
            float *e = M->g.wte + (size_t)a->tokens[b * T + t] * C;
            for (int i = 0; i < C; i++)
                e[i] += d[i];
            if (M->g.wpe)
                for (int i = 0; i < C; i++)
                    M->g.wpe[(size_t)t * C + i] += d[i];
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

typedef struct {
    const float *g;
    size_t n;
    double *sums;
} NormJob;

static void norm_blocks(void *ctx, size_t b, size_t e, int chunk) {
    const NormJob *j = ctx;
    (void)chunk;
    for (size_t i = b; i < e; i++) {
        size_t o = i * GPT_NORM_BLOCK, n = j->n - o < GPT_NORM_BLOCK ? j->n - o : GPT_NORM_BLOCK;
        j->sums[i] = sumsq(j->g + o, n);
    }
}

double gpt_grad_norm(const GPT *m) {
    size_t blocks = GPT_NORM_BLOCKS(m->n_params);
    NormJob j = {m->grads, m->n_params, m->grad_sums};
    par_for(blocks, par_grain(GPT_NORM_BLOCK, 1), norm_blocks, &j);
    double s = 0.0;
    for (size_t i = 0; i < blocks; i++)
        s += m->grad_sums[i];
    return sqrt(s);
}

double gpt_layer_grad_norm(const GPT *m, int layer) {
    double s = 0.0;
    for (int i = 0; i < T_COUNT; i++) {
        const TensorInfo *t = &m->tensors[i];
        const float *g = t->per_layer ? tp(m, m->grads, (TensorId)i, layer) : NULL;
        if (g) s += sumsq(g, layer_size(m, (TensorId)i));
    }
    return sqrt(s);
}
