#include "generate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "rng.h"

static const float *param(const GPT *m, TensorId id, int l) {
    const TensorInfo *t = &m->tensors[id];
    if (t->size == 0) return NULL;
    size_t per = t->per_layer ? t->size / (size_t)m->cfg.n_layer : t->size;
    return m->params + t->offset + (t->per_layer ? (size_t)l * per : 0);
}

#define KV_BUFFERS 15

/* Floats of each buffer of the cache, in the order kvcache_alloc lays them out (doubles, so
 * the planner can size any configuration). */
static void kv_sizes(const ModelConfig *c, double sizes[KV_BUFFERS]) {
    double C = c->d_model, L = c->n_layer, Tc = c->context, KV = model_kv_heads(c);
    double hd = model_head_dim(c), H = c->n_head, FF = model_d_ff(c);
    double UP = model_is_glu(c) ? 2 * FF : FF, QKV = (H + 2 * KV) * hd, V = c->vocab_size;
    const double s[KV_BUFFERS] = {
        L * KV * Tc * hd, L * KV * Tc * hd, C, C, C, QKV, H * hd, Tc, C, C, UP, FF, C, V, C};
    memcpy(sizes, s, sizeof s);
}

double kvcache_bytes(const ModelConfig *c) {
    double sizes[KV_BUFFERS], total = 0;
    kv_sizes(c, sizes);
    for (int i = 0; i < KV_BUFFERS; i++)
        total += sizes[i];
    return total * sizeof(float);
}

int kvcache_alloc(KVCache *kc, const GPT *m, char err[ABL_ERR_MAX]) {
    double sizes[KV_BUFFERS];
    kv_sizes(&m->cfg, sizes);
    size_t total = (size_t)(kvcache_bytes(&m->cfg) / sizeof(float));
    memset(kc, 0, sizeof *kc);
    kc->m = m;
    kc->buf = calloc(total, sizeof(float));
    if (!kc->buf) {
        snprintf(err, ABL_ERR_MAX, "cannot allocate the KV cache (%zu floats)", total);
        return -1;
    }
    float **ptrs[] = {&kc->k,   &kc->v, &kc->x,   &kc->xn,     &kc->x2,
                      &kc->qkv, &kc->q, &kc->att, &kc->atty,   &kc->ao,
                      &kc->fch, &kc->h, &kc->mo,  &kc->logits, &kc->tmp};
    _Static_assert(sizeof ptrs / sizeof ptrs[0] == KV_BUFFERS, "one pointer per buffer");
    float *p = kc->buf;
    for (int i = 0; i < KV_BUFFERS; i++) {
        *ptrs[i] = p;
        p += (size_t)sizes[i];
    }
    return 0;
}

void kvcache_free(KVCache *kc) {
    free(kc->buf);
    memset(kc, 0, sizeof *kc);
}

/* out = norm(x) for one row, with the site's parameters (absent = no affine). */
static void norm1(const KVCache *kc, TensorId w, TensorId b, int l, float *out, const float *x,
                  int n) {
    const GPT *m = kc->m;
    float mean, rstd;
    norm_forward(m->cfg.norm_type, out, &mean, &rstd, x, param(m, w, l), param(m, b, l), 1, n,
                 (float)m->cfg.norm_eps);
}

/* One token through one layer's attention, reading and extending the cache at kc->len. */
static void attn1(KVCache *kc, int l, const float *x, float *y) {
    const GPT *m = kc->m;
    const ModelConfig *c = &m->cfg;
    int H = c->n_head, KV = model_kv_heads(c), hd = model_head_dim(c), C = c->d_model;
    int Tc = c->context, pos = kc->len, group = H / KV;
    int QKV = (H + 2 * KV) * hd;
    matmul_forward(kc->qkv, x, param(m, T_QKV_W, l), NULL, param(m, T_QKV_B, l), 1, C, QKV);
    float rope_cos[MODEL_MAX_HEAD_DIM / 2], rope_sin[MODEL_MAX_HEAD_DIM / 2];
    if (c->position == POS_ROPE) rope_angles(rope_cos, rope_sin, pos, hd, c->rope_base);
    for (int h = 0; h < H + KV; h++) { /* q and k heads: optional norm, then RoPE */
        float *v = kc->qkv + (size_t)h * hd;
        if (c->qk_norm) {
            int is_q = h < H;
            norm1(kc, is_q ? T_Q_NORM_W : T_K_NORM_W, is_q ? T_Q_NORM_B : T_K_NORM_B, l, kc->tmp, v,
                  hd);
            memcpy(v, kc->tmp, (size_t)hd * sizeof(float));
        }
        if (c->position == POS_ROPE) rope_rotate(v, hd, rope_cos, rope_sin, 0);
    }
    size_t layer = (size_t)l * KV * Tc * hd;
    for (int g = 0; g < KV; g++) {
        memcpy(kc->k + layer + ((size_t)g * Tc + pos) * hd, kc->qkv + (size_t)(H + g) * hd,
               (size_t)hd * sizeof(float));
        memcpy(kc->v + layer + ((size_t)g * Tc + pos) * hd, kc->qkv + (size_t)(H + KV + g) * hd,
               (size_t)hd * sizeof(float));
    }
    float scale = 1.0f / sqrtf((float)hd);
    for (int h = 0; h < H; h++) {
        const float *q = kc->qkv + (size_t)h * hd;
        const float *K = kc->k + layer + (size_t)(h / group) * Tc * hd;
        const float *Vv = kc->v + layer + (size_t)(h / group) * Tc * hd;
        for (int s = 0; s <= pos; s++) {
            float dot = 0.0f;
            for (int i = 0; i < hd; i++)
                dot += q[i] * K[(size_t)s * hd + i];
            kc->att[s] = dot * scale;
        }
        softmax_row(kc->att, pos + 1);
        float *out = kc->atty + (size_t)h * hd;
        memset(out, 0, (size_t)hd * sizeof(float));
        for (int s = 0; s <= pos; s++)
            for (int i = 0; i < hd; i++)
                out[i] += kc->att[s] * Vv[(size_t)s * hd + i];
    }
    matmul_forward(y, kc->atty, param(m, T_ATTN_PROJ_W, l), NULL, param(m, T_ATTN_PROJ_B, l), 1, C,
                   C);
}

static void mlp1(KVCache *kc, int l, const float *x, float *y) {
    const GPT *m = kc->m;
    const ModelConfig *c = &m->cfg;
    int C = c->d_model, FF = model_d_ff(c), UP = model_is_glu(c) ? 2 * FF : FF;
    matmul_forward(kc->fch, x, param(m, T_FC_W, l), NULL, param(m, T_FC_B, l), 1, C, UP);
    activation_forward(c->activation, kc->h, kc->fch, 1, FF);
    matmul_forward(y, kc->h, param(m, T_FC_PROJ_W, l), NULL, param(m, T_FC_PROJ_B, l), 1, FF, C);
}

const float *kvcache_step(KVCache *kc, int32_t token) {
    const GPT *m = kc->m;
    const ModelConfig *c = &m->cfg;
    int C = c->d_model, pos = kc->len;
    const float *wte = m->params + m->tensors[T_WTE].offset, *wpe = param(m, T_WPE, 0);
    float *x = kc->x, *xn = kc->xn, *x2 = kc->x2, *ao = kc->ao, *mo = kc->mo;
    for (int i = 0; i < C; i++)
        x[i] = wte[(size_t)token * C + i] + (wpe ? wpe[(size_t)pos * C + i] : 0.0f);
    if (c->input_norm) {
        norm1(kc, T_IN_NORM_W, T_IN_NORM_B, 0, xn, x, C);
        memcpy(x, xn, (size_t)C * sizeof(float));
    }
    for (int l = 0; l < c->n_layer; l++) {
        switch (c->norm) {
        case NORM_PRE:
            norm1(kc, T_ATTN_NORM_W, T_ATTN_NORM_B, l, xn, x, C);
            attn1(kc, l, xn, ao);
            for (int i = 0; i < C; i++)
                x[i] += ao[i];
            norm1(kc, T_MLP_NORM_W, T_MLP_NORM_B, l, xn, x, C);
            mlp1(kc, l, xn, mo);
            for (int i = 0; i < C; i++)
                x[i] += mo[i];
            break;
        case NORM_POST:
            attn1(kc, l, x, ao);
            for (int i = 0; i < C; i++)
                x2[i] = x[i] + ao[i];
            norm1(kc, T_ATTN_NORM_W, T_ATTN_NORM_B, l, x, x2, C);
            mlp1(kc, l, x, mo);
            for (int i = 0; i < C; i++)
                x2[i] = x[i] + mo[i];
            norm1(kc, T_MLP_NORM_W, T_MLP_NORM_B, l, x, x2, C);
            break;
        case NORM_PERI:
            norm1(kc, T_ATTN_NORM_W, T_ATTN_NORM_B, l, xn, x, C);
            attn1(kc, l, xn, ao);
            norm1(kc, T_ATTN_ONORM_W, T_ATTN_ONORM_B, l, x2, ao, C);
            for (int i = 0; i < C; i++)
                x[i] += x2[i];
            norm1(kc, T_MLP_NORM_W, T_MLP_NORM_B, l, xn, x, C);
            mlp1(kc, l, xn, mo);
            norm1(kc, T_MLP_ONORM_W, T_MLP_ONORM_B, l, x2, mo, C);
            for (int i = 0; i < C; i++)
                x[i] += x2[i];
            break;
        case NORM_NONE:
        default:
            attn1(kc, l, x, ao);
            for (int i = 0; i < C; i++)
                x[i] += ao[i];
            mlp1(kc, l, x, mo);
            for (int i = 0; i < C; i++)
                x[i] += mo[i];
            break;
        }
    }
    if (c->final_norm) {
        norm1(kc, T_FINAL_NORM_W, T_FINAL_NORM_B, 0, xn, x, C);
        x = xn;
    }
    const float *lm = c->tie_embeddings ? wte : param(m, T_LM_HEAD, 0);
    matmul_forward(kc->logits, x, lm, NULL, NULL, 1, C, c->vocab_size);
    kc->len++;
    return kc->logits;
}

static int32_t pick(const float *logits, int V, double temperature, uint64_t seed, long i,
                    float *scratch) {
    if (temperature <= 0) {
        int best = 0;
        for (int j = 1; j < V; j++)
            if (logits[j] > logits[best]) best = j;
        return best;
    }
    for (int j = 0; j < V; j++)
        scratch[j] = logits[j] / (float)temperature;
    softmax_row(scratch, V);
    float u = rng_uniform(seed, RNG_STREAM_SAMPLE, (uint64_t)i), cdf = 0.0f;
    for (int j = 0; j < V; j++) {
        cdf += scratch[j];
        if (u < cdf) return j;
    }
    return V - 1;
}

void generate(KVCache *kc, const int32_t *prompt, int n_prompt, int n, double temperature,
              uint64_t seed, int32_t *out) {
    const ModelConfig *c = &kc->m->cfg;
    int Tc = c->context, V = c->vocab_size, keep = Tc / 2 > 0 ? Tc / 2 : 1;
    /* history = prompt + generated; the cache always holds a suffix of it */
    int32_t *hist = malloc(sizeof(int32_t) * (size_t)(n_prompt + n + 1));
    float *scratch = malloc(sizeof(float) * (size_t)V);
    if (!hist || !scratch) {
        free(hist);
        free(scratch);
        memset(out, 0, sizeof(int32_t) * (size_t)n);
        return;
    }
    int len = 0;
    if (n_prompt == 0) hist[len++] = 0; /* an empty prompt starts from token 0 */
    for (int i = 0; i < n_prompt; i++)
        hist[len++] = prompt[i];
    kc->len = 0;
    const float *logits = NULL;
    int start = len > Tc ? len - Tc : 0;
    for (int i = start; i < len; i++)
        logits = kvcache_step(kc, hist[i]);
    for (int i = 0; i < n; i++) {
        int32_t t = pick(logits, V, temperature, seed, i, scratch);
        out[i] = t;
        hist[len++] = t;
        if (i == n - 1) break;
        if (kc->len == Tc) { /* context shift: re-encode the last `keep` tokens */
            kc->len = 0;
            for (int j = len - keep; j < len; j++)
                logits = kvcache_step(kc, hist[j]);
        } else {
            logits = kvcache_step(kc, t);
        }
    }
    free(hist);
    free(scratch);
}
