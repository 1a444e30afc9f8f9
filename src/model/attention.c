#include "attention.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fastmath.h"
#include "layers.h"
#include "par.h"
#include "transpose.h"

/* One value of each of ATTN_LANES pairs (a GCC/Clang vector type): arithmetic on it is
 * elementwise, so lanes never mix. Never passed by value, so the ABI does not depend on
 * the vector extensions the build targets. */
typedef float lane_t __attribute__((vector_size(ATTN_LANES * sizeof(float))));

/* The register kernels below work on the lanes in vectors of the machine's width: GCC
 * lowers a lane_t wider than the registers (16 floats on AVX2's 8-float registers) through
 * the stack once a loop keeps several of them live, and the weighted sums spent most of the
 * attention's time moving halves between registers and memory. A lane_t is VEC_PER_LANE
 * vec_t; each float still sees the same chain of operations, so the bits do not depend on
 * the width. */
#if defined(__AVX512F__)
#define VEC_FLOATS 16
#elif defined(__AVX__)
#define VEC_FLOATS 8
#else
#define VEC_FLOATS 4
#endif
#define VEC_PER_LANE (ATTN_LANES / VEC_FLOATS)
typedef float vec_t __attribute__((vector_size(VEC_FLOATS * sizeof(float))));
/* Accumulators a kernel keeps: a quarter of the registers (16 with AVX2, 32 with AVX-512),
 * leaving the rest to the operands and the loads. */
#if defined(__AVX512F__)
#define KERNEL_ACC 8
#else
#define KERNEL_ACC 4
#endif

/* out[s0 + k] = scale * sum_i a[i] b[s0 + k][i] for k < W (W a constant after inlining):
 * W independent multiply-add chains in registers, per vector of lanes. */
static inline __attribute__((always_inline)) void dots_block(lane_t *restrict out,
                                                             const lane_t *restrict a,
                                                             const lane_t *restrict b, int s0,
                                                             int hd, float scale, const int W) {
    const vec_t *av = (const vec_t *)a, *bv = (const vec_t *)b;
    vec_t *ov = (vec_t *)out;
    for (int h = 0; h < VEC_PER_LANE; h++) {
        vec_t acc[KERNEL_ACC] = {{0}};
        for (int i = 0; i < hd; i++) {
            const vec_t x = av[(size_t)i * VEC_PER_LANE + h];
            for (int k = 0; k < W; k++)
                acc[k] += x * bv[((size_t)(s0 + k) * hd + i) * VEC_PER_LANE + h];
        }
        for (int k = 0; k < W; k++)
            ov[(size_t)(s0 + k) * VEC_PER_LANE + h] = acc[k] * scale;
    }
}

/* out[s] = scale * sum_i a[i] b[s][i] for s < n: a is one (hd) row, b holds n (hd) rows.
 * Scores q_t . k_s (forward) and dy_t . v_s (backward), KERNEL_ACC rows at a time. */
static void lane_dots(lane_t *restrict out, const lane_t *restrict a, const lane_t *restrict b,
                      int n, int hd, float scale) {
    int s = 0;
    for (; s + KERNEL_ACC <= n; s += KERNEL_ACC)
        dots_block(out, a, b, s, hd, scale, KERNEL_ACC);
    for (; s < n; s++)
        dots_block(out, a, b, s, hd, scale, 1);
}

/* out[i0 + k] = sum_{s<n} w[s*ws] b[s][i0 + k] for k < W (W a constant after inlining),
 * accumulated in registers, per vector of lanes. */
static inline __attribute__((always_inline)) void
weighted_block(lane_t *restrict out, const lane_t *restrict w, size_t ws, const lane_t *restrict b,
               int n, int hd, int i0, const int W) {
    const vec_t *wv = (const vec_t *)w, *bv = (const vec_t *)b;
    vec_t *ov = (vec_t *)out;
    for (int h = 0; h < VEC_PER_LANE; h++) {
        vec_t acc[KERNEL_ACC] = {{0}};
        for (int s = 0; s < n; s++) {
            const vec_t x = wv[(size_t)s * ws * VEC_PER_LANE + h];
            const vec_t *bs = bv + ((size_t)s * hd + i0) * VEC_PER_LANE + h;
            for (int k = 0; k < W; k++)
                acc[k] += x * bs[(size_t)k * VEC_PER_LANE];
        }
        for (int k = 0; k < W; k++)
            ov[(size_t)(i0 + k) * VEC_PER_LANE + h] = acc[k];
    }
}

/* out[i] = sum_{s<n} w[s*ws] b[s][i] for i < hd: y_t = P_t v (forward); dq_t = dS_t k,
 * dk_s = dS^T_s q, dv_s = P^T_s dy (backward: a column of P or dS, stride ws = T).
 * KERNEL_ACC output columns at a time, then one. */
static void lane_weighted_sum(lane_t *restrict out, const lane_t *restrict w, size_t ws,
                              const lane_t *restrict b, int n, int hd) {
    int i = 0;
    for (; i + KERNEL_ACC <= hd; i += KERNEL_ACC)
        weighted_block(out, w, ws, b, n, hd, i, KERNEL_ACC);
    for (; i < hd; i++)
        weighted_block(out, w, ws, b, n, hd, i, 1);
}

/* Softmax over p[0..n) in every lane, in place. The max is a select per native vector (a
 * lane_t select on AVX2 was lowered one float at a time through the stack); exp and the
 * scaling are plain float loops of ATTN_LANES iterations, which the compiler vectorizes. */
static void lane_softmax(lane_t *p, int n) {
    typedef int32_t vmask_t __attribute__((vector_size(VEC_FLOATS * sizeof(int32_t))));
    const vec_t *pv = (const vec_t *)p;
    vec_t mv[VEC_PER_LANE];
    for (int h = 0; h < VEC_PER_LANE; h++) {
        vec_t mx = pv[h];
        for (int s = 1; s < n; s++) {
            vec_t x = pv[(size_t)s * VEC_PER_LANE + h];
            vmask_t gt = x > mx;
            mx = (vec_t)((gt & (vmask_t)x) | (~gt & (vmask_t)mx));
        }
        mv[h] = mx;
    }
    float *x = (float *)p, m[ATTN_LANES], sum[ATTN_LANES];
    memcpy(m, mv, sizeof m);
    for (int j = 0; j < ATTN_LANES; j++)
        sum[j] = 0.0f;
    for (int s = 0; s < n; s++)
        for (int j = 0; j < ATTN_LANES; j++) {
            float e = exp_nonpos(x[s * ATTN_LANES + j] - m[j]);
            x[s * ATTN_LANES + j] = e;
            sum[j] += e;
        }
    for (int j = 0; j < ATTN_LANES; j++)
        sum[j] = 1.0f / sum[j];
    for (int s = 0; s < n; s++)
        for (int j = 0; j < ATTN_LANES; j++)
            x[s * ATTN_LANES + j] *= sum[j];
}

/* p[s] = P_t[s] (dp[s] - P_t . dp) * scale for s < n, in place: row t of the score
 * gradients, per native vector (as a lane_t the sum went through the stack on AVX2). */
static void dscores(lane_t *restrict p, const lane_t *restrict dp, int n, float scale) {
    vec_t *pv = (vec_t *)p;
    const vec_t *dv = (const vec_t *)dp;
    for (int h = 0; h < VEC_PER_LANE; h++) {
        vec_t dot = {0};
        for (int s = 0; s < n; s++)
            dot += pv[(size_t)s * VEC_PER_LANE + h] * dv[(size_t)s * VEC_PER_LANE + h];
        for (int s = 0; s < n; s++) {
            size_t o = (size_t)s * VEC_PER_LANE + h;
            pv[o] = pv[o] * (dv[o] - dot) * scale;
        }
    }
}

/* The arguments of a pass, for par_for: groups are independent, each a chunk's own work. */
typedef struct {
    float *y, *att, *dq, *dk, *dv, *scratch;
    const float *q, *k, *v, *dy;
    int T, hd;
} AttnJob;

static void forward_groups(void *ctx, size_t g0, size_t g1, int chunk) {
    const AttnJob *j = ctx;
    float *y = j->y, *att = j->att;
    const float *q = j->q, *k = j->k, *v = j->v;
    int T = j->T, hd = j->hd;
    (void)chunk;
    const float scale = 1.0f / sqrtf((float)hd);
    const size_t tile = (size_t)T * hd;
    for (size_t g = g0; g < g1; g++) {
        const lane_t *Q = (const lane_t *)q + g * tile, *K = (const lane_t *)k + g * tile;
        const lane_t *V = (const lane_t *)v + g * tile;
        lane_t *Y = (lane_t *)y + g * tile, *P = (lane_t *)att + (size_t)g * T * T;
        for (int t = 0; t < T; t++) {
            lane_t *p = P + (size_t)t * T;
            lane_dots(p, Q + (size_t)t * hd, K, t + 1, hd, scale);
            lane_softmax(p, t + 1);
            lane_weighted_sum(Y + (size_t)t * hd, p, 1, V, t + 1, hd);
        }
    }
}

void attention_forward(float *y, float *att, const float *q, const float *k, const float *v, int G,
                       int T, int hd) {
    AttnJob j = {.y = y, .att = att, .q = q, .k = k, .v = v, .T = T, .hd = hd};
    par_for((size_t)G, par_grain((size_t)T * T * hd * ATTN_LANES, 1), forward_groups, &j);
}

/* With dp_t[s] = dy_t . v_s and dS_t = P_t * (dp_t - P_t . dp_t) / sqrt(hd):
 * dq_t = sum_s dS_t[s] k_s, dk_s = sum_t dS_t[s] q_t, dv_s = sum_t P_t[s] dy_t. Every sum runs
 * in registers (accumulating into dk, dv in memory made each update a load and a store):
 * dv from P's columns first, then P is overwritten row by row with dS, then dk from dS's
 * columns. */
static void backward_groups(void *ctx, size_t g0, size_t g1, int chunk) {
    const AttnJob *j = ctx;
    float *dq = j->dq, *dk = j->dk, *dv = j->dv, *att = j->att;
    const float *q = j->q, *k = j->k, *v = j->v, *dy = j->dy;
    int T = j->T, hd = j->hd;
    const float scale = 1.0f / sqrtf((float)hd);
    const size_t tile = (size_t)T * hd;
    lane_t *dp = (lane_t *)j->scratch + (size_t)chunk * T; /* the chunk's own */
    for (size_t g = g0; g < g1; g++) {
        const lane_t *Q = (const lane_t *)q + g * tile, *K = (const lane_t *)k + g * tile;
        const lane_t *V = (const lane_t *)v + g * tile, *DY = (const lane_t *)dy + g * tile;
        lane_t *P = (lane_t *)att + (size_t)g * T * T;
        lane_t *DQ = (lane_t *)dq + g * tile, *DK = (lane_t *)dk + g * tile;
        lane_t *DV = (lane_t *)dv + g * tile;
        for (int s = 0; s < T; s++) /* column s of P: rows t >= s */
            lane_weighted_sum(DV + (size_t)s * hd, P + (size_t)s * T + s, (size_t)T,
                              DY + (size_t)s * hd, T - s, hd);
        for (int t = 0; t < T; t++) {
            lane_t *p = P + (size_t)t * T;
            lane_dots(dp, DY + (size_t)t * hd, V, t + 1, hd, 1.0f);
            dscores(p, dp, t + 1, scale);
            lane_weighted_sum(DQ + (size_t)t * hd, p, 1, K, t + 1, hd);
        }
        for (int s = 0; s < T; s++) /* column s of dS */
            lane_weighted_sum(DK + (size_t)s * hd, P + (size_t)s * T + s, (size_t)T,
                              Q + (size_t)s * hd, T - s, hd);
    }
}

void attention_backward(float *dq, float *dk, float *dv, const float *dy, float *att,
                        const float *q, const float *k, const float *v, int G, int T, int hd,
                        float *scratch) {
    AttnJob j = {.dq = dq,
                 .dk = dk,
                 .dv = dv,
                 .dy = dy,
                 .att = att,
                 .q = q,
                 .k = k,
                 .v = v,
                 .scratch = scratch,
                 .T = T,
                 .hd = hd};
    par_for((size_t)G, par_grain((size_t)T * T * hd * ATTN_LANES, 1), backward_groups, &j);
}

/* Where pair p's (hd) vector at position t starts in a rows tensor (see attn_to_lanes). */
static inline size_t row_offset(int p, int t, int H, int T, int hd, size_t stride, int rep) {
    return ((size_t)(p / H) * T + t) * stride + (size_t)(p % H / rep) * hd;
}

/* The arguments of a lane transpose, for par_for: groups (into lanes) or blocks of 8 rep
 * pairs (out of lanes: whole 8-pair blocks, and every pair of a shared head in one piece,
 * added in order) are independent, so the same bits for every K. */
typedef struct {
    float *dst;
    const float *src;
    int B, T, H, hd, rep;
    size_t stride;
} LaneJob;

static void to_lanes_groups(void *ctx, size_t g0, size_t g1, int chunk) {
    const LaneJob *lj = ctx;
    float *restrict dst = lj->dst;
    const float *restrict src = lj->src;
    int T = lj->T, H = lj->H, hd = lj->hd, rep = lj->rep, pairs = lj->B * H;
    size_t stride = lj->stride;
    (void)chunk;
    for (int g = (int)g0; g < (int)g1; g++) {
        ptrdiff_t off[ATTN_LANES]; /* where each lane's rows start */
        for (int j = 0; j < ATTN_LANES; j++) {
            int p = g * ATTN_LANES + j < pairs ? g * ATTN_LANES + j : 0;
            off[j] = (ptrdiff_t)row_offset(p, 0, H, T, hd, stride, rep);
        }
        float *d = dst + (size_t)g * T * hd * ATTN_LANES;
#if FAST_TRANSPOSE
        /* 8 lanes by 8 head dims at a time, in registers (a float-by-float gather was ~1%
         * of micro's step) */
        if (hd % 8 == 0) {
            for (int t = 0; t < T; t++) {
                const float *s = src + (size_t)t * stride, *in[8];
                float *out[8];
                for (int i = 0; i < hd; i += 8, d += 8 * ATTN_LANES)
                    for (int j = 0; j < ATTN_LANES; j += 8) {
                        for (int k = 0; k < 8; k++) {
                            in[k] = s + off[j + k] + i;
                            out[k] = d + (size_t)k * ATTN_LANES + j;
                        }
                        transpose8(out, in);
                    }
            }
            continue;
        }
#endif
        for (int t = 0; t < T; t++) {
            const float *s = src + (size_t)t * stride;
            for (int i = 0; i < hd; i++, d += ATTN_LANES)
                for (int j = 0; j < ATTN_LANES; j++)
                    d[j] = s[off[j] + i];
        }
    }
}

void attn_to_lanes(float *dst, const float *src, int B, int T, int H, int hd, size_t stride,
                   int rep) {
    LaneJob j = {dst, src, B, T, H, hd, rep, stride};
    size_t group = (size_t)T * hd * ATTN_LANES;
    par_for((size_t)attn_groups(B * H), par_grain(group * PAR_COPY_WORK, 1), to_lanes_groups, &j);
}

static void from_lanes_pairs(void *ctx, size_t p0, size_t p1, int chunk) {
    const LaneJob *lj = ctx;
    float *restrict dst = lj->dst;
    const float *restrict src = lj->src;
    int T = lj->T, H = lj->H, hd = lj->hd, rep = lj->rep, end = (int)p1, p = (int)p0;
    size_t stride = lj->stride;
    (void)chunk;
#if FAST_TRANSPOSE
    /* 8 pairs by 8 head dims at a time (with rep > 1, a shared head sums its pairs in order) */
    if (hd % 8 == 0)
        for (; p + 8 <= end; p += 8) {
            size_t base[8]; /* the 8 pairs' rows at t = 0 (divisions out of the loops) */
            int add[8];
            for (int k = 0; k < 8; k++) {
                base[k] = row_offset(p + k, 0, H, T, hd, stride, rep);
                add[k] = (p + k) % H % rep != 0;
            }
            for (int t = 0; t < T; t++) {
                const float *in[8], *s = src + attn_lane_offset(T, hd, p, t, 0);
                float *out[8];
                for (int i = 0; i < hd; i += 8) {
                    for (int k = 0; k < 8; k++) {
                        in[k] = s + (size_t)(i + k) * ATTN_LANES;
                        out[k] = dst + base[k] + (size_t)t * stride + i;
                    }
                    if (rep == 1) {
                        transpose8(out, in);
                        continue;
                    }
                    float tile[8][8], *tp[8];
                    for (int k = 0; k < 8; k++)
                        tp[k] = tile[k];
                    transpose8(tp, in);
                    for (int k = 0; k < 8; k++)
                        for (int r = 0; r < 8; r++)
                            out[k][r] = add[k] ? out[k][r] + tile[k][r] : tile[k][r];
                }
            }
        }
#endif
    for (; p < end; p++) {
        const float *s = src + attn_lane_offset(T, hd, p, 0, 0);
        float *d = dst + row_offset(p, 0, H, T, hd, stride, rep);
        if (p % H % rep == 0)
            for (int t = 0; t < T; t++)
                for (int i = 0; i < hd; i++)
                    d[(size_t)t * stride + i] = s[((size_t)t * hd + i) * ATTN_LANES];
        else
            for (int t = 0; t < T; t++)
                for (int i = 0; i < hd; i++)
                    d[(size_t)t * stride + i] += s[((size_t)t * hd + i) * ATTN_LANES];
    }
}

void attn_from_lanes(float *dst, const float *src, int B, int T, int H, int hd, size_t stride,
                     int rep) {
    LaneJob j = {dst, src, B, T, H, hd, rep, stride};
    /* pieces of whole 8-pair blocks, each shared head's rep pairs (consecutive, from a
     * multiple of rep) in one piece; not whole batches of H pairs: book's 32 pairs would be
     * one piece, on one thread */
    size_t block = (size_t)8 * rep;
    par_for((size_t)B * H, par_grain((size_t)T * hd * PAR_COPY_WORK, block), from_lanes_pairs, &j);
}

void attention_entropy(double *entropy, const float *att, int pairs, int H, int T) {
    for (int p = 0; p < pairs; p++) {
        double e = 0.0;
        for (int t = 0; t < T; t++)
            for (int s = 0; s <= t; s++) { /* att is a (T, T) lane tensor */
                double x = att[attn_lane_offset(T, T, p, t, s)];
                if (x > 0.0) e -= x * log(x);
            }
        entropy[p % H] += e;
    }
}

void attention_cached(float *y, const float *q, const float *K, const float *V, int H, int KV,
                      int cap, int n, int hd, float *scores) {
    int group = H / KV;
    float scale = 1.0f / sqrtf((float)hd);
    for (int h = 0; h < H; h++) {
        const float *qh = q + (size_t)h * hd;
        const float *Kg = K + (size_t)(h / group) * cap * hd;
        const float *Vg = V + (size_t)(h / group) * cap * hd;
        for (int s = 0; s < n; s++) {
            float dot = 0.0f;
            for (int i = 0; i < hd; i++)
                dot += qh[i] * Kg[(size_t)s * hd + i];
            scores[s] = dot * scale;
        }
        softmax_row(scores, n);
        float *out = y + (size_t)h * hd;
        memset(out, 0, (size_t)hd * sizeof(float));
        for (int s = 0; s < n; s++)
            for (int i = 0; i < hd; i++)
                out[i] += scores[s] * Vg[(size_t)s * hd + i];
    }
}
