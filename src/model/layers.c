#include "layers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fastmath.h"
#include "gemm.h"
#include "par.h"

/* ---------------------------------------------------------------- matmul (via gemm.h) */

void matmul_forward(float *out, const float *inp, const float *W, const float *Wt,
                    const float *bias, int N, int C, int OC) {
    if (Wt)
        gemm(0, 0, N, OC, C, 1.0f, inp, C, Wt, OC, 0.0f, out, OC);
    else
        gemm(0, 1, N, OC, C, 1.0f, inp, C, W, C, 0.0f, out, OC);
    if (!bias) return;
    for (int i = 0; i < N; i++) {
        float *o = out + (size_t)i * OC;
        for (int j = 0; j < OC; j++)
            o[j] += bias[j];
    }
}

/* The bias and ReLU in the product's epilogue (gemm.h). A bias alone stays a pass of its
 * own: in the epilogue it cost the product more than the pass (micro, AVX2 build: +1.2 us
 * on a 33 us product, the pass ~0.5 us). */
void matmul_forward_relu(float *out, const float *inp, const float *W, const float *Wt,
                         const float *bias, int N, int C, int OC) {
    GemmEpilogue ep = {.bias = bias, .relu = 1};
    if (Wt)
        gemm_ep(0, 0, N, OC, C, 1.0f, inp, C, Wt, OC, 0.0f, out, OC, &ep);
    else
        gemm_ep(0, 1, N, OC, C, 1.0f, inp, C, W, C, 0.0f, out, OC, &ep);
}

static void backward_ep(float *dinp, float beta, float *dW, float *dbias, const float *dout,
                        float alpha, const float *inp, const float *W, int N, int C, int OC,
                        int relu) {
    GemmEpilogue ep = {.mask = relu ? inp : NULL, .ldm = C};
    if (dinp) gemm_ep(0, 0, N, C, OC, alpha, dout, OC, W, C, beta, dinp, C, &ep);
    gemm(1, 0, OC, C, N, alpha, dout, OC, inp, C, 1.0f, dW, C);
    if (!dbias) return;
    for (int i = 0; i < N; i++) {
        const float *d = dout + (size_t)i * OC;
        for (int j = 0; j < OC; j++)
            dbias[j] += alpha * d[j];
    }
}

void matmul_backward(float *dinp, float beta, float *dW, float *dbias, const float *dout,
                     float alpha, const float *inp, const float *W, int N, int C, int OC) {
    backward_ep(dinp, beta, dW, dbias, dout, alpha, inp, W, N, C, OC, 0);
}

void matmul_backward_relu(float *dinp, float beta, float *dW, float *dbias, const float *dout,
                          float alpha, const float *inp, const float *W, int N, int C, int OC) {
    backward_ep(dinp, beta, dW, dbias, dout, alpha, inp, W, N, C, OC, 1);
}

/* ---------------------------------------------------------------- row reductions */

/* Sums over a row run in LANES independent partial sums, combined pairwise at the end: the
 * loops vectorize without -ffast-math, and every run adds in the same order. */
#define LANES 16

/* Pairwise total of LANES partial sums, plus a scalar tail. Constant indices only, so the
 * partial sums stay in one vector register (an indexed remainder loop over them made the
 * compiler keep them on the stack, and every row paid a store-forwarding stall). */
static inline float lanes_total(const float a[LANES], float tail) {
    float b[8], c[4];
    for (int k = 0; k < 8; k++)
        b[k] = a[k] + a[k + 8];
    for (int k = 0; k < 4; k++)
        c[k] = b[k] + b[k + 4];
    return ((c[0] + c[2]) + (c[1] + c[3])) + tail;
}

/* sum_j x[j] */
static inline float row_sum(const float *restrict x, int n) {
    float acc[LANES] = {0}, tail = 0.0f;
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++)
            acc[k] += x[j + k];
    for (; j < n; j++)
        tail += x[j];
    return lanes_total(acc, tail);
}

/* sum_j (x[j] - m)^2 */
static inline float row_sumsq_dev(const float *restrict x, float m, int n) {
    float acc[LANES] = {0}, tail = 0.0f;
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) {
            float d = x[j + k] - m;
            acc[k] += d * d;
        }
    for (; j < n; j++)
        tail += (x[j] - m) * (x[j] - m);
    return lanes_total(acc, tail);
}

/* sum_j d[j] w[j] (x[j] - m); w NULL counts as ones. One accumulator per loop: two in one
 * loop made the compiler spill them. */
static inline float row_dot_dev(const float *restrict d, const float *restrict w,
                                const float *restrict x, float m, int n) {
    float acc[LANES] = {0}, tail = 0.0f;
    int j = 0;
    if (w) {
        for (; j + LANES <= n; j += LANES)
            for (int k = 0; k < LANES; k++)
                acc[k] += d[j + k] * w[j + k] * (x[j + k] - m);
        for (; j < n; j++)
            tail += d[j] * w[j] * (x[j] - m);
    } else {
        for (; j + LANES <= n; j += LANES)
            for (int k = 0; k < LANES; k++)
                acc[k] += d[j + k] * (x[j + k] - m);
        for (; j < n; j++)
            tail += d[j] * (x[j] - m);
    }
    return lanes_total(acc, tail);
}

/* sum_j d[j] w[j]; w NULL counts as ones. */
static inline float row_dot(const float *restrict d, const float *restrict w, int n) {
    if (!w) return row_sum(d, n);
    float acc[LANES] = {0}, tail = 0.0f;
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++)
            acc[k] += d[j + k] * w[j + k];
    for (; j < n; j++)
        tail += d[j] * w[j];
    return lanes_total(acc, tail);
}

/* ---------------------------------------------------------------- rmsnorm / layernorm */

void norm_forward(NormType type, float *out, float *mean, float *rstd, const float *inp,
                  const float *w, const float *b, int N, int C, float eps) {
    for (int i = 0; i < N; i++) {
        const float *restrict x = inp + (size_t)i * C;
        float *restrict o = out + (size_t)i * C;
        float m = 0.0f;
        if (type == NORMTYPE_LAYER) {
            m = row_sum(x, C) / (float)C;
            mean[i] = m;
        }
        float s = 1.0f / sqrtf(row_sumsq_dev(x, m, C) / (float)C + eps);
        rstd[i] = s;
        if (w && b)
            for (int j = 0; j < C; j++)
                o[j] = (x[j] - m) * s * w[j] + b[j];
        else if (w)
            for (int j = 0; j < C; j++)
                o[j] = (x[j] - m) * s * w[j];
        else
            for (int j = 0; j < C; j++)
                o[j] = (x[j] - m) * s;
    }
}

/* xhat = (x - m) s, g = d * w: dx = s (g - mean(g) [layernorm] - xhat mean(g xhat)). */
void norm_backward(NormType type, float *dinp, float *dw, float *db, const float *dout,
                   const float *inp, const float *mean, const float *rstd, const float *w, int N,
                   int C) {
    for (int i = 0; i < N; i++) {
        const float *restrict x = inp + (size_t)i * C, *restrict d = dout + (size_t)i * C;
        float *restrict dx = dinp + (size_t)i * C;
        float m = type == NORMTYPE_LAYER ? mean[i] : 0.0f, s = rstd[i];
        float mean_g = type == NORMTYPE_LAYER ? row_dot(d, w, C) / (float)C : 0.0f;
        float mean_gxhat = row_dot_dev(d, w, x, m, C) * s / (float)C;
        if (w)
            for (int j = 0; j < C; j++)
                dx[j] += s * (d[j] * w[j] - mean_g - (x[j] - m) * s * mean_gxhat);
        else
            for (int j = 0; j < C; j++)
                dx[j] += s * (d[j] - mean_g - (x[j] - m) * s * mean_gxhat);
        if (dw)
            for (int j = 0; j < C; j++)
                dw[j] += d[j] * (x[j] - m) * s;
        if (db)
            for (int j = 0; j < C; j++)
                db[j] += d[j];
    }
}

/* ---------------------------------------------------------------- activations */

#define SQRT_2_OVER_PI 0.7978845608028654f
#define INV_SQRT_2     0.7071067811865476f
#define INV_SQRT_2PI   0.3989422804014327f

/* erf by Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7) from one exp of a
 * non-positive argument, so loops over it vectorize (libm's erff does not). GELU only sees
 * 1 + erf, where an absolute error of 1.5e-7 is below float resolution. */
static inline float erf_fast(float x) {
    float a = x < 0.0f ? -x : x, t = 1.0f / (1.0f + 0.3275911f * a);
    float poly =
        t * (0.254829592f +
             t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    float y = 1.0f - poly * exp_nonpos(-a * a);
    return x < 0.0f ? -y : y;
}
static inline float gelu(float x) {
    return 0.5f * x * (1.0f + erf_fast(x * INV_SQRT_2));
}
static inline float gelu_grad(float x) {
    return 0.5f * (1.0f + erf_fast(x * INV_SQRT_2)) + x * INV_SQRT_2PI * exp_nonpos(-0.5f * x * x);
}
/* tanh from one exp of a non-positive argument, so loops over it vectorize (libm's tanhf
 * does not): tanh|u| = (1 - e) / (1 + e), e = exp(-2|u|). The absolute error stays below
 * ~2e-7, which is all that 1 + tanh in GELU can see. */
static inline float tanh_fast(float u) {
    float a = u < 0.0f ? -u : u, e = exp_nonpos(-2.0f * a), t = (1.0f - e) / (1.0f + e);
    return u < 0.0f ? -t : t;
}
/* tanh as an activation, where small arguments need relative accuracy: below |x| = 0.3 the
 * odd Taylor series through x^13 (truncation < 1e-8 relative), above it tanh_fast, whose
 * e = exp(-2|x|) <= 0.55 there, so 1 - e cancels at most a bit. Within a few float ulps of
 * the true tanh (tests/test_activations.c), and loops over it vectorize. */
static inline float tanh_vec(float x) {
    float a = x < 0.0f ? -x : x, x2 = x * x;
    float poly =
        x + x * x2 *
                (-1.0f / 3 +
                 x2 * (2.0f / 15 + x2 * (-17.0f / 315 +
                                         x2 * (62.0f / 2835 + x2 * (-1382.0f / 155925 +
                                                                    x2 * (21844.0f / 6081075))))));
    return a < 0.3f ? poly : tanh_fast(x);
}
static inline float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanh_fast(SQRT_2_OVER_PI * (x + 0.044715f * x * x * x)));
}
static inline float gelu_tanh_grad(float x) {
    float u = SQRT_2_OVER_PI * (x + 0.044715f * x * x * x), t = tanh_fast(u);
    float du = SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}
/* sigmoid from exp(-|x|), which never overflows and vectorizes */
static inline float sigmoid(float x) {
    float e = exp_nonpos(x < 0.0f ? x : -x);
    return x < 0.0f ? e / (1.0f + e) : 1.0f / (1.0f + e);
}
static inline float silu(float x) {
    return x * sigmoid(x);
}
static inline float silu_grad(float x) {
    float s = sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
}

/* The scalar nonlinearity f and f' shared by plain and gated MLPs. */
static inline float act_f(Activation a, float x) {
    switch (a) {
    case ACT_RELU:
    case ACT_REGLU:
        return x > 0.0f ? x : 0.0f;
    case ACT_GELU:
    case ACT_GEGLU:
        return gelu(x);
    case ACT_GELU_TANH:
        return gelu_tanh(x);
    case ACT_RELU2:
        return x > 0.0f ? x * x : 0.0f;
    case ACT_TANH:
        return tanh_vec(x);
    case ACT_SILU:
    case ACT_SWIGLU:
        return silu(x);
    case ACT_COUNT: /* not an activation: model_config_validate refuses it */
        break;
    }
    abort();
}
static inline float act_df(Activation a, float x) {
    switch (a) {
    case ACT_RELU:
    case ACT_REGLU:
        return x > 0.0f ? 1.0f : 0.0f;
    case ACT_GELU:
    case ACT_GEGLU:
        return gelu_grad(x);
    case ACT_GELU_TANH:
        return gelu_tanh_grad(x);
    case ACT_RELU2:
        return x > 0.0f ? 2.0f * x : 0.0f;
    case ACT_TANH: {
        float t = tanh_vec(x);
        return 1.0f - t * t;
    }
    case ACT_SILU:
    case ACT_SWIGLU:
        return silu_grad(x);
    case ACT_COUNT:
        break;
    }
    abort();
}

static inline int is_glu(Activation a) {
    return a == ACT_SWIGLU || a == ACT_GEGLU || a == ACT_REGLU;
}

/* Each activation gets loops of its own: with the activation a constant, act_f / act_df
 * inline to straight-line math and the loops vectorize. */
#define EACH_ACTIVATION(X)                                                                         \
    X(ACT_RELU)                                                                                    \
    X(ACT_GELU)                                                                                    \
    X(ACT_GELU_TANH) X(ACT_RELU2) X(ACT_TANH) X(ACT_SILU) X(ACT_SWIGLU) X(ACT_GEGLU) X(ACT_REGLU)

static inline __attribute__((always_inline)) void
act_forward_as(const Activation act, float *restrict h, const float *restrict pre, int N, int F) {
    if (is_glu(act)) {
        for (int i = 0; i < N; i++) {
            const float *restrict g = pre + (size_t)i * 2 * F, *restrict v = g + F;
            float *restrict o = h + (size_t)i * F;
            for (int j = 0; j < F; j++)
                o[j] = act_f(act, g[j]) * v[j];
        }
        return;
    }
    size_t n = (size_t)N * F;
    for (size_t i = 0; i < n; i++)
        h[i] = act_f(act, pre[i]);
}

static inline __attribute__((always_inline)) void
act_backward_as(const Activation act, float *restrict dpre, const float *restrict dh,
                const float *restrict pre, int N, int F) {
    if (is_glu(act)) {
        for (int i = 0; i < N; i++) {
            const float *restrict g = pre + (size_t)i * 2 * F, *restrict v = g + F,
                                  *restrict d = dh + (size_t)i * F;
            float *restrict dg = dpre + (size_t)i * 2 * F, *restrict dv = dg + F;
            for (int j = 0; j < F; j++) {
                dg[j] = d[j] * v[j] * act_df(act, g[j]);
                dv[j] = d[j] * act_f(act, g[j]);
            }
        }
        return;
    }
    size_t n = (size_t)N * F;
    for (size_t i = 0; i < n; i++)
        dpre[i] = dh[i] * act_df(act, pre[i]);
}

/* Rows of a pass for par_for, a multiple of 16 at a time (par_grain), so every chunk starts
 * 64-byte aligned relative to the whole and ends on the whole's vector boundaries (the same
 * bits for every K). */
typedef struct {
    Activation act;
    float *out;
    const float *a, *b;
    int F;
} ActJob;

static void act_forward_rows(void *ctx, size_t r0, size_t r1, int chunk) {
    const ActJob *j = ctx;
    size_t F = (size_t)j->F, in = is_glu(j->act) ? 2 * F : F;
    float *h = j->out + r0 * F;
    const float *pre = j->a + r0 * in;
    int N = (int)(r1 - r0);
    (void)chunk;
    switch (j->act) {
#define FWD(A)                                                                                     \
    case A:                                                                                        \
        act_forward_as(A, h, pre, N, j->F);                                                        \
        return;
        EACH_ACTIVATION(FWD)
#undef FWD
    case ACT_COUNT:
        abort();
    }
}

static void act_backward_rows(void *ctx, size_t r0, size_t r1, int chunk) {
    const ActJob *j = ctx;
    size_t F = (size_t)j->F, in = is_glu(j->act) ? 2 * F : F;
    float *dpre = j->out + r0 * in;
    const float *dh = j->a + r0 * F, *pre = j->b + r0 * in;
    int N = (int)(r1 - r0);
    (void)chunk;
    switch (j->act) {
#define BWD(A)                                                                                     \
    case A:                                                                                        \
        act_backward_as(A, dpre, dh, pre, N, j->F);                                                \
        return;
        EACH_ACTIVATION(BWD)
#undef BWD
    case ACT_COUNT:
        abort();
    }
}

void activation_forward(Activation act, float *h, const float *pre, int N, int F) {
    ActJob j = {.act = act, .out = h, .a = pre, .F = F};
    par_for((size_t)N, par_grain((size_t)F * 8, 16), act_forward_rows, &j);
}

void activation_backward(Activation act, float *dpre, const float *dh, const float *pre, int N,
                         int F) {
    ActJob j = {.act = act, .out = dpre, .a = dh, .b = pre, .F = F};
    par_for((size_t)N, par_grain((size_t)F * 8, 16), act_backward_rows, &j);
}

int activation_in_place(Activation act) {
    return act == ACT_RELU;
}

void relu_forward_inplace(float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_backward_inplace(float *restrict d, const float *restrict h, size_t n) {
    for (size_t i = 0; i < n; i++)
        d[i] = h[i] > 0.0f ? d[i] : 0.0f;
}

/* ---------------------------------------------------------------- RoPE */

void rope_angles(float *cos_row, float *sin_row, int pos, int hd, double base) {
    for (int i = 0; i < hd / 2; i++) {
        float angle = (float)pos * (float)pow(base, -2.0 * (double)i / (double)hd);
        cos_row[i] = cosf(angle);
        sin_row[i] = sinf(angle);
    }
}

void rope_rotate(float *x, int hd, const float *cos_row, const float *sin_row, int inverse) {
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        float c = cos_row[i], s = inverse ? -sin_row[i] : sin_row[i];
        float a = x[i], b = x[i + half];
        x[i] = a * c - b * s;
        x[i + half] = a * s + b * c;
    }
}

/* ---------------------------------------------------------------- softmax, cross-entropy */

/* The largest of the lanes and the tail's maximum, in a fixed order. */
static inline float lanes_max(const float a[LANES], float tail) {
    float b[8], c[4], m = tail;
    for (int k = 0; k < 8; k++)
        b[k] = a[k] > a[k + 8] ? a[k] : a[k + 8];
    for (int k = 0; k < 4; k++)
        c[k] = b[k] > b[k + 4] ? b[k] : b[k + 4];
    for (int k = 0; k < 4; k++)
        m = c[k] > m ? c[k] : m;
    return m;
}

/* Max and exp-sum over a row with LANES independent accumulators: vectorizes without
 * -ffast-math and gives the same result on every run. */
float row_max_lanes(const float *restrict x, int n) {
    float acc[LANES], m = -INFINITY;
    for (int k = 0; k < LANES; k++)
        acc[k] = -INFINITY;
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++)
            acc[k] = x[j + k] > acc[k] ? x[j + k] : acc[k];
    for (; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return lanes_max(acc, m);
}

float exp_sum_lanes(const float *restrict x, int n, float m) {
    float acc[LANES] = {0}, tail = 0.0f;
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++)
            acc[k] += exp_nonpos(x[j + k] - m);
    for (; j < n; j++)
        tail += exp_nonpos(x[j] - m);
    return lanes_total(acc, tail);
}

float exp_store_lanes(float *e, const float *x, int n, float m) {
    /* not restrict: e may be x (softmax_row); the compiler checks the overlap once */
    float acc[LANES] = {0}, tail = 0.0f;
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) {
            float v = exp_nonpos(x[j + k] - m);
            e[j + k] = v;
            acc[k] += v;
        }
    for (; j < n; j++) {
        e[j] = exp_nonpos(x[j] - m);
        tail += e[j];
    }
    return lanes_total(acc, tail);
}

float exp_store_max_lanes(float *restrict e, const float *restrict x, int n, float m, float *max) {
    /* the same lanes and operations as exp_store_lanes and row_max_lanes, interleaved */
    float acc[LANES] = {0}, hi[LANES], tail = 0.0f, mt = -INFINITY;
    for (int k = 0; k < LANES; k++)
        hi[k] = -INFINITY;
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) {
            float xv = x[j + k], d = xv - m;
            hi[k] = xv > hi[k] ? xv : hi[k];
            float v = exp_nonpos(d < 0.0f ? d : 0.0f); /* d itself when m bounds x */
            e[j + k] = v;
            acc[k] += v;
        }
    for (; j < n; j++) {
        float d = x[j] - m;
        mt = x[j] > mt ? x[j] : mt;
        e[j] = exp_nonpos(d < 0.0f ? d : 0.0f);
        tail += e[j];
    }
    *max = lanes_max(hi, mt);
    return lanes_total(acc, tail);
}

void softmax_row(float *x, int n) {
    float m = row_max_lanes(x, n);
    float s = exp_store_lanes(x, x, n, m), inv = 1.0f / s;
    for (int j = 0; j < n; j++)
        x[j] *= inv;
}
