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

/* The last n % KERNEL_ACC rows or columns of a kernel, as one block of that many (W must be a
 * constant for the accumulators to live in registers): independent multiply-add chains side
 * by side, where one block per row or column ran one dependent chain at a time (a head dim
 * of 4 or 8 had no whole block of columns). Each float's chain, and so its bits, is the same
 * either way. */
// clang-format off
#if KERNEL_ACC > 4
#define KERNEL_REST(block, rest)                                                                   \
    switch (rest) {                                                                                \
    case 1: block(1); break;                                                                       \
    case 2: block(2); break;                                                                       \
    case 3: block(3); break;                                                                       \
    case 4: block(4); break;                                                                       \
    case 5: block(5); break;                                                                       \
    case 6: block(6); break;                                                                       \
    case 7: block(7); break;                                                                       \
    default: break;                                                                                \
    }
#else
#define KERNEL_REST(block, rest)                                                                   \
    switch (rest) {                                                                                \
    case 1: block(1); break;                                                                       \
    case 2: block(2); break;                                                                       \
    case 3: block(3); break;                                                                       \
    default: break;                                                                                \
    }
#endif
// clang-format on

/* out[s0 + k] = scale * sum_i a[i] b[s0 + k][i] for k < W (W a constant after inlining):
 * W independent multiply-add chains in registers, per vector of lanes. */
static inline __attribute__((always_inline)) void dots_block(lane_t *restrict out,
                                                             const lane_t *restrict a,
                                                             const lane_t *restrict b, int s0,
                                                             int hd, float scale, const int W) {
    const vec_t *av = (const vec_t *)a, *bv = (const vec_t *)b;
    vec_t *ov = (vec_t *)out;
    vec_t acc[VEC_PER_LANE][KERNEL_ACC] = {{{0}}}; /* every vector at once: weighted_block */
    for (int i = 0; i < hd; i++)
        for (int h = 0; h < VEC_PER_LANE; h++) {
            const vec_t x = av[(size_t)i * VEC_PER_LANE + h];
            for (int k = 0; k < W; k++)
                acc[h][k] += x * bv[((size_t)(s0 + k) * hd + i) * VEC_PER_LANE + h];
        }
    for (int h = 0; h < VEC_PER_LANE; h++)
        for (int k = 0; k < W; k++)
            ov[(size_t)(s0 + k) * VEC_PER_LANE + h] = acc[h][k] * scale;
}

/* out[s] = scale * sum_i a[i] b[s][i] for s < n: a is one (hd) row, b holds n (hd) rows.
 * Scores q_t . k_s (forward) and dy_t . v_s (backward), KERNEL_ACC rows at a time. */
static void lane_dots(lane_t *restrict out, const lane_t *restrict a, const lane_t *restrict b,
                      int n, int hd, float scale) {
    int s = 0;
    for (; s + KERNEL_ACC <= n; s += KERNEL_ACC)
        dots_block(out, a, b, s, hd, scale, KERNEL_ACC);
#define BLOCK(W) dots_block(out, a, b, s, hd, scale, W)
    KERNEL_REST(BLOCK, n - s)
#undef BLOCK
}

/* out[i0 + k] = sum_{s<n} w[s*ws] b[s][i0 + k] for k < W (W a constant after inlining),
 * accumulated in registers, per vector of lanes. */
static inline __attribute__((always_inline)) void
weighted_block(lane_t *restrict out, const lane_t *restrict w, size_t ws, const lane_t *restrict b,
               int n, int hd, int i0, const int W) {
    const vec_t *wv = (const vec_t *)w, *bv = (const vec_t *)b;
    vec_t *ov = (vec_t *)out;
    /* every vector of the lanes at once: VEC_PER_LANE x W independent chains (one vector at
     * a time, W = 4 chains at a head dim of 4 or 8 left half the multiply-add units idle) */
    vec_t acc[VEC_PER_LANE][KERNEL_ACC] = {{{0}}};
    for (int s = 0; s < n; s++) {
        const vec_t *bs = bv + ((size_t)s * hd + i0) * VEC_PER_LANE;
        for (int h = 0; h < VEC_PER_LANE; h++) {
            const vec_t x = wv[(size_t)s * ws * VEC_PER_LANE + h];
            for (int k = 0; k < W; k++)
                acc[h][k] += x * bs[(size_t)k * VEC_PER_LANE + h];
        }
    }
    for (int h = 0; h < VEC_PER_LANE; h++)
        for (int k = 0; k < W; k++)
            ov[(size_t)(i0 + k) * VEC_PER_LANE + h] = acc[h][k];
}

/* out[i] = sum_{s<n} w[s*ws] b[s][i] for i < hd: y_t = P_t v (forward); dq_t = dS_t k,
 * dk_s = dS^T_s q, dv_s = P^T_s dy (backward: a column of P or dS, stride ws = T).
 * KERNEL_ACC output columns at a time, then the rest. */
static void lane_weighted_sum(lane_t *restrict out, const lane_t *restrict w, size_t ws,
                              const lane_t *restrict b, int n, int hd) {
    int i = 0;
    for (; i + KERNEL_ACC <= hd; i += KERNEL_ACC)
        weighted_block(out, w, ws, b, n, hd, i, KERNEL_ACC);
#define BLOCK(W) weighted_block(out, w, ws, b, n, hd, i, W)
    KERNEL_REST(BLOCK, hd - i)
#undef BLOCK
}

/* Softmax over p[0..n) in every lane, in place, in two halves: exp of each score less its
 * lane's max, with inv = 1 / the lane's sum of them; then the scaling by inv. The max is a
 * select per native vector (a lane_t select on AVX2 was lowered one float at a time through
 * the stack); exp and the scaling are plain float loops of ATTN_LANES iterations, which the
 * compiler vectorizes. */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
/* GCC vectorizes plain loops 256 bits wide on AVX-512 cores (its tuning); the exp of the
 * softmax is as much work as the products at a head dim of 16, so it gets the full width */
#define SOFTMAX_WIDTH __attribute__((target("prefer-vector-width=512")))
#else
#define SOFTMAX_WIDTH
#endif
SOFTMAX_WIDTH static void softmax_exp(lane_t *p, int n, float inv[ATTN_LANES]) {
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
        inv[j] = 1.0f / sum[j];
}

SOFTMAX_WIDTH static void softmax_scale(lane_t *p, int n, const float inv[ATTN_LANES]) {
    float *x = (float *)p;
    for (int s = 0; s < n; s++)
        for (int j = 0; j < ATTN_LANES; j++)
            x[s * ATTN_LANES + j] *= inv[j];
}

static void lane_softmax(lane_t *p, int n) {
    float inv[ATTN_LANES];
    softmax_exp(p, n, inv);
    softmax_scale(p, n, inv);
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

/* Position lanes (attention.h): where scalar (t, i) of a pair's (T, hd) tensor is, from the
 * pair's first float. */
static inline size_t pos_at(int hd, int t, int i) {
    return ((size_t)(t / ATTN_LANES) * hd + i) * ATTN_LANES + (size_t)(t % ATTN_LANES);
}

/* out[s0 + k] = scale * sum_i a[i] b(s0 + k, i) for k < W (W a constant after inlining): a is
 * a block of (hd) rows in lanes, b a pair's tensor read one scalar at a time (broadcast). The
 * products and their order are those of dots_block: the same bits. */
static inline __attribute__((always_inline)) void bdots_block(lane_t *restrict out,
                                                              const lane_t *restrict a,
                                                              const float *restrict b, int s0,
                                                              int hd, float scale, const int W) {
    const vec_t *av = (const vec_t *)a;
    vec_t *ov = (vec_t *)out;
    const float *bs[KERNEL_ACC];
    for (int k = 0; k < W; k++)
        bs[k] = b + pos_at(hd, s0 + k, 0);
    vec_t acc[VEC_PER_LANE][KERNEL_ACC] = {{{0}}}; /* every vector at once: weighted_block */
    for (int i = 0; i < hd; i++)
        for (int h = 0; h < VEC_PER_LANE; h++) {
            const vec_t x = av[(size_t)i * VEC_PER_LANE + h];
            for (int k = 0; k < W; k++)
                acc[h][k] += x * bs[k][(size_t)i * ATTN_LANES];
        }
    for (int h = 0; h < VEC_PER_LANE; h++)
        for (int k = 0; k < W; k++)
            ov[(size_t)(s0 + k) * VEC_PER_LANE + h] = acc[h][k] * scale;
}

/* out[s] = scale * sum_i a[i] b(s, i) for s < n: scores of a block of query rows against n
 * keys (forward), dy . v (backward). */
static void pos_dots(lane_t *restrict out, const lane_t *restrict a, const float *restrict b, int n,
                     int hd, float scale) {
    int s = 0;
    for (; s + KERNEL_ACC <= n; s += KERNEL_ACC)
        bdots_block(out, a, b, s, hd, scale, KERNEL_ACC);
#define BLOCK(W) bdots_block(out, a, b, s, hd, scale, W)
    KERNEL_REST(BLOCK, n - s)
#undef BLOCK
}

/* out[i0 + k] = sum_{r<n} w[r] b(r0 + r, i0 + k) for k < W (W a constant after inlining), b
 * read one scalar at a time; the order of weighted_block. */
static inline __attribute__((always_inline)) void
bweighted_block(lane_t *restrict out, const lane_t *restrict w, const float *restrict b, int r0,
                int n, int hd, int i0, const int W) {
    const vec_t *wv = (const vec_t *)w;
    vec_t *ov = (vec_t *)out;
    vec_t acc[VEC_PER_LANE][KERNEL_ACC] = {{{0}}}; /* every vector at once: weighted_block */
    /* rows r0.. a block of positions at a time: consecutive floats within one */
    for (int r = 0, t = r0; r < n;) {
        int m = ATTN_LANES - t % ATTN_LANES < n - r ? ATTN_LANES - t % ATTN_LANES : n - r;
        const float *br = b + pos_at(hd, t, i0);
        for (int u = 0; u < m; u++, br++)
            for (int h = 0; h < VEC_PER_LANE; h++) {
                const vec_t x = wv[(size_t)(r + u) * VEC_PER_LANE + h];
                for (int k = 0; k < W; k++)
                    acc[h][k] += x * br[(size_t)k * ATTN_LANES];
            }
        r += m;
        t += m;
    }
    for (int h = 0; h < VEC_PER_LANE; h++)
        for (int k = 0; k < W; k++)
            ov[(size_t)(i0 + k) * VEC_PER_LANE + h] = acc[h][k];
}

/* out[i] = sum_{r<n} w[r] b(r0 + r, i) for i < hd: y = P v, dq = dS k (rows of a query block
 * as lanes, r0 = 0), dv = P^T dy, dk = dS^T q (a key block's column of P or dS as lanes, from
 * its diagonal row r0 on). */
static void pos_weighted_sum(lane_t *restrict out, const lane_t *restrict w,
                             const float *restrict b, int r0, int n, int hd) {
    int i = 0;
    for (; i + KERNEL_ACC <= hd; i += KERNEL_ACC)
        bweighted_block(out, w, b, r0, n, hd, i, KERNEL_ACC);
#define BLOCK(W) bweighted_block(out, w, b, r0, n, hd, i, W)
    KERNEL_REST(BLOCK, hd - i)
#undef BLOCK
}

/* Softmax over p[0..n) of the query rows t0 + j (lane j), each over its keys s <= t0 + j, in
 * place; the keys past a row's own (the diagonal block's upper half) become 0. Those keys
 * enter softmax_exp as -inf: never the max, and their exp (exp_nonpos clamps its argument to
 * -87: 1.6e-38) is added after the row's own keys, to a sum of at least 1 (its max's exp),
 * which it leaves unchanged. So a row gets the bits it gets in pair lanes, with the loops of
 * lane_softmax, which the compiler vectorizes (a select per float did not). They are zeroed
 * before the scaling: 1.6e-38 / sum is subnormal, and each subnormal result cost a
 * microcode assist (the softmax took 43% of the attention at head dim 8). */
static void pos_softmax(lane_t *p, int n, int t0) {
    float *x = (float *)p, inv[ATTN_LANES];
    for (int s = t0 + 1; s < n; s++)
        for (int j = 0; j < s - t0; j++)
            x[s * ATTN_LANES + j] = -INFINITY;
    softmax_exp(p, n, inv);
    for (int s = t0 + 1; s < n; s++)
        for (int j = 0; j < s - t0; j++)
            x[s * ATTN_LANES + j] = 0.0f;
    softmax_scale(p, n, inv);
}

/* col[r][l] = P(s0 + r, s0 + l) for s0 + r < T (0 past the last key): key block s0's column
 * of a pair's (T, T) position-lane score tensor P, from its diagonal row on, with the keys as
 * lanes. Entries above the diagonal are the zeros the forward wrote. */
static void pos_column(lane_t *restrict col, const float *restrict P, int T, int s0) {
    float *c = (float *)col;
    int keys = T - s0 < ATTN_LANES ? T - s0 : ATTN_LANES, t = s0;
#if FAST_TRANSPOSE
    /* whole 16 x 16 tiles (rows t.. of lanes, keys s0.. as rows) as four 8 x 8 transposes in
     * registers: one float at a time, the columns cost as much as the products at hd 8 */
    if (keys == ATTN_LANES)
        for (; t + ATTN_LANES <= T; t += ATTN_LANES)
            for (int a = 0; a < ATTN_LANES; a += 8)
                for (int b = 0; b < ATTN_LANES; b += 8) {
                    const float *in[8];
                    float *out[8];
                    for (int k = 0; k < 8; k++) {
                        in[k] = P + pos_at(T, t, s0 + a + k) + b; /* key a+k, rows b.. */
                        out[k] = c + (size_t)(t - s0 + b + k) * ATTN_LANES + a;
                    }
                    transpose8(out, in);
                }
#endif
    for (; t < T; t++) {
        const float *row = P + pos_at(T, t, s0);
        float *out = c + (size_t)(t - s0) * ATTN_LANES;
        for (int l = 0; l < keys; l++)
            out[l] = row[(size_t)l * ATTN_LANES];
        for (int l = keys; l < ATTN_LANES; l++)
            out[l] = 0.0f;
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

/* Position lanes: per pair, per block of ATTN_LANES query rows, the scores against the keys
 * up to the block's last row, their softmax and y. */
static void forward_pairs(void *ctx, size_t p0, size_t p1, int chunk) {
    const AttnJob *j = ctx;
    int T = j->T, hd = j->hd, blocks = attn_padded(T) / ATTN_LANES;
    (void)chunk;
    const float scale = 1.0f / sqrtf((float)hd);
    const size_t tile = (size_t)blocks * hd, ptile = (size_t)blocks * T; /* in lane_t */
    for (size_t p = p0; p < p1; p++) {
        const lane_t *Q = (const lane_t *)j->q + p * tile;
        const float *K = j->k + p * tile * ATTN_LANES, *V = j->v + p * tile * ATTN_LANES;
        lane_t *Y = (lane_t *)j->y + p * tile, *P = (lane_t *)j->att + p * ptile;
        for (int b = 0; b < blocks; b++) {
            int t0 = b * ATTN_LANES, n = t0 + ATTN_LANES < T ? t0 + ATTN_LANES : T;
            lane_t *pb = P + (size_t)b * T;
            pos_dots(pb, Q + (size_t)b * hd, K, n, hd, scale);
            pos_softmax(pb, n, t0);
            pos_weighted_sum(Y + (size_t)b * hd, pb, V, 0, n, hd);
        }
    }
}

void attention_forward(float *y, float *att, const float *q, const float *k, const float *v,
                       int pairs, int T, int hd) {
    AttnJob j = {.y = y, .att = att, .q = q, .k = k, .v = v, .T = T, .hd = hd};
    if (attn_by_position(pairs, T, hd))
        par_for((size_t)pairs, par_grain((size_t)attn_padded(T) * T * hd, 1), forward_pairs, &j);
    else
        par_for((size_t)attn_groups(pairs), par_grain((size_t)T * T * hd * ATTN_LANES, 1),
                forward_groups, &j);
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

/* Position lanes: dv a key block at a time (P's column as lanes), then dp, dS and dq a query
 * block at a time, then dk a key block at a time (dS's column). The scratch holds a block's
 * dp or a column: T lane_t either way. */
static void backward_pairs(void *ctx, size_t p0, size_t p1, int chunk) {
    const AttnJob *j = ctx;
    int T = j->T, hd = j->hd, blocks = attn_padded(T) / ATTN_LANES;
    const float scale = 1.0f / sqrtf((float)hd);
    const size_t tile = (size_t)blocks * hd, ptile = (size_t)blocks * T; /* in lane_t */
    lane_t *col = (lane_t *)j->scratch + (size_t)chunk * T;              /* the chunk's own */
    for (size_t p = p0; p < p1; p++) {
        const float *Q = j->q + p * tile * ATTN_LANES, *K = j->k + p * tile * ATTN_LANES;
        const float *V = j->v + p * tile * ATTN_LANES, *DYs = j->dy + p * tile * ATTN_LANES;
        const lane_t *DY = (const lane_t *)j->dy + p * tile;
        lane_t *P = (lane_t *)j->att + p * ptile, *DQ = (lane_t *)j->dq + p * tile;
        lane_t *DK = (lane_t *)j->dk + p * tile, *DV = (lane_t *)j->dv + p * tile;
        for (int b = 0; b < blocks; b++) {
            int s0 = b * ATTN_LANES;
            pos_column(col, (const float *)P, T, s0);
            pos_weighted_sum(DV + (size_t)b * hd, col, DYs, s0, T - s0, hd);
        }
        for (int b = 0; b < blocks; b++) {
            int t0 = b * ATTN_LANES, n = t0 + ATTN_LANES < T ? t0 + ATTN_LANES : T;
            lane_t *pb = P + (size_t)b * T;
            pos_dots(col, DY + (size_t)b * hd, V, n, hd, 1.0f);
            dscores(pb, col, n, scale);
            pos_weighted_sum(DQ + (size_t)b * hd, pb, K, 0, n, hd);
        }
        for (int b = 0; b < blocks; b++) {
            int s0 = b * ATTN_LANES;
            pos_column(col, (const float *)P, T, s0);
            pos_weighted_sum(DK + (size_t)b * hd, col, Q, s0, T - s0, hd);
        }
    }
}

void attention_backward(float *dq, float *dk, float *dv, const float *dy, float *att,
                        const float *q, const float *k, const float *v, int pairs, int T, int hd,
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
    if (attn_by_position(pairs, T, hd))
        par_for((size_t)pairs, par_grain((size_t)attn_padded(T) * T * hd, 1), backward_pairs, &j);
    else
        par_for((size_t)attn_groups(pairs), par_grain((size_t)T * T * hd * ATTN_LANES, 1),
                backward_groups, &j);
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
        /* head dims of 4, 12, ... (micro at 8 heads): the (t, i) rows taken 8 at a time as
         * two runs of 4 floats per lane (a run never crosses a position), through a tile */
        if (hd % 8 == 4) {
            size_t n = (size_t)T * hd, r = 0;
            for (; r + 8 <= n; r += 8)
                for (int j = 0; j < ATTN_LANES; j += 8) {
                    float tile[8][8], *out[8];
                    const float *in[8];
                    size_t a = r / hd * stride + r % hd, b = (r + 4) / hd * stride + (r + 4) % hd;
                    for (int k = 0; k < 8; k++) {
                        memcpy(tile[k], src + a + off[j + k], 4 * sizeof(float));
                        memcpy(tile[k] + 4, src + b + off[j + k], 4 * sizeof(float));
                        in[k] = tile[k];
                        out[k] = d + (r + (size_t)k) * ATTN_LANES + j;
                    }
                    transpose8(out, in);
                }
            for (; r < n; r++) /* T * hd not a multiple of 8: the last 4 rows */
                for (int j = 0; j < ATTN_LANES; j++)
                    d[r * ATTN_LANES + j] = src[r / hd * stride + off[j] + r % hd];
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

/* Position lanes: a pair's rows into its blocks of ATTN_LANES positions (pairs are few here,
 * and this is T * hd floats a pair against the attention's T^2 * hd work). */
static void to_lanes_pos(void *ctx, size_t p0, size_t p1, int chunk) {
    const LaneJob *lj = ctx;
    float *restrict dst = lj->dst;
    const float *restrict src = lj->src;
    int T = lj->T, H = lj->H, hd = lj->hd, rep = lj->rep, TP = attn_padded(T);
    size_t stride = lj->stride;
    (void)chunk;
    for (int p = (int)p0; p < (int)p1; p++) {
        const float *s = src + row_offset(p, 0, H, T, hd, stride, rep);
        float *d = dst + (size_t)p * TP * hd;
        for (int t0 = 0; t0 < TP; t0 += ATTN_LANES)
            for (int i = 0; i < hd; i++, d += ATTN_LANES)
                for (int j = 0; j < ATTN_LANES; j++) {
                    int t = t0 + j < T ? t0 + j : 0;
                    d[j] = s[(size_t)t * stride + i];
                }
    }
}

void attn_to_lanes(float *dst, const float *src, int B, int T, int H, int hd, size_t stride,
                   int rep) {
    LaneJob j = {dst, src, B, T, H, hd, rep, stride};
    if (attn_by_position(B * H, T, hd)) {
        size_t pair = (size_t)attn_padded(T) * hd;
        par_for((size_t)B * H, par_grain(pair * PAR_COPY_WORK, 1), to_lanes_pos, &j);
        return;
    }
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
    /* head dims of 4, 12, ...: the (t, i) rows 8 at a time, each pair's two runs of 4 floats
     * out of a tile (to_lanes_groups' way back) */
    if (hd % 8 == 4)
        for (; p + 8 <= end; p += 8) {
            size_t base[8], n = (size_t)T * hd, r = 0;
            int add[8];
            for (int k = 0; k < 8; k++) {
                base[k] = row_offset(p + k, 0, H, T, hd, stride, rep);
                add[k] = (p + k) % H % rep != 0;
            }
            const float *s = src + attn_lane_offset(T, hd, p, 0, 0), *in[8];
            for (; r + 8 <= n; r += 8) {
                float tile[8][8], *tp[8];
                for (int k = 0; k < 8; k++) {
                    in[k] = s + (r + (size_t)k) * ATTN_LANES;
                    tp[k] = tile[k];
                }
                transpose8(tp, in);
                size_t a = r / hd * stride + r % hd, b = (r + 4) / hd * stride + (r + 4) % hd;
                for (int k = 0; k < 8; k++) {
                    float *o = dst + base[k];
                    for (int q = 0; q < 4; q++) {
                        o[a + q] = add[k] ? o[a + q] + tile[k][q] : tile[k][q];
                        o[b + q] = add[k] ? o[b + q] + tile[k][4 + q] : tile[k][4 + q];
                    }
                }
            }
            for (; r < n; r++) /* the last 4 rows */
                for (int k = 0; k < 8; k++) {
                    float x = s[r * ATTN_LANES + (size_t)k],
                          *o = dst + base[k] + r / hd * stride + r % hd;
                    *o = add[k] ? *o + x : x;
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

/* Position lanes: a pair's blocks back into its rows (a shared head: its rep pairs added in
 * order, all in one piece). */
static void from_lanes_pos(void *ctx, size_t p0, size_t p1, int chunk) {
    const LaneJob *lj = ctx;
    float *restrict dst = lj->dst;
    const float *restrict src = lj->src;
    int T = lj->T, H = lj->H, hd = lj->hd, rep = lj->rep, TP = attn_padded(T);
    size_t stride = lj->stride;
    (void)chunk;
    for (int p = (int)p0; p < (int)p1; p++) {
        const float *s = src + (size_t)p * TP * hd;
        float *d = dst + row_offset(p, 0, H, T, hd, stride, rep);
        int add = p % H % rep != 0;
        for (int t = 0; t < T; t++)
            for (int i = 0; i < hd; i++) {
                float x = s[pos_at(hd, t, i)], *o = d + (size_t)t * stride + i;
                *o = add ? *o + x : x;
            }
    }
}

void attn_from_lanes(float *dst, const float *src, int B, int T, int H, int hd, size_t stride,
                     int rep) {
    LaneJob j = {dst, src, B, T, H, hd, rep, stride};
    if (attn_by_position(B * H, T, hd)) {
        par_for((size_t)B * H, par_grain((size_t)T * hd * PAR_COPY_WORK, (size_t)rep),
                from_lanes_pos, &j);
        return;
    }
    /* pieces of whole 8-pair blocks, each shared head's rep pairs (consecutive, from a
     * multiple of rep) in one piece; not whole batches of H pairs: book's 32 pairs would be
     * one piece, on one thread */
    size_t block = (size_t)8 * rep;
    par_for((size_t)B * H, par_grain((size_t)T * hd * PAR_COPY_WORK, block), from_lanes_pairs, &j);
}

void attention_entropy(double *entropy, const float *att, int pairs, int H, int T, int hd) {
    int by_pos = attn_by_position(pairs, T, hd);
    for (int p = 0; p < pairs; p++) {
        double e = 0.0;
        for (int t = 0; t < T; t++)
            for (int s = 0; s <= t; s++) { /* att is a (T, T) lane tensor */
                double x = att[attn_offset(by_pos, T, T, p, t, s)];
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
