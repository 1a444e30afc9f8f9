/* The tiled lm_head and cross-entropy (src/model/xent.h): many tiles (with a partial last
 * one) against one tile and against the textbook computation in double; argmax ties across
 * tiles; the model's loss and gradients with many tiles against one. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/gemm.h"
#include "model/gemm_small.h"
#include "model/gpt.h"
#include "model/layers.h"
#include "model/transpose.h"
#include "model/xent.h"
#include "test_util.h"

enum { N = 24, C = 20, V = 203 };

static float frand(uint64_t *s) {
    return (float)((int64_t)(test_splitmix64(s) % 2001) - 1000) * 1e-3f;
}

static double max_rel(const float *a, const float *b, size_t n) {
    double d = 0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / m;
}

typedef struct {
    float exps[N * V], mx[N], sum[N], dX[N * C], dW[V * C], loss;
    long correct;
} Out;

static void run(Out *o, const float *X, const float *W, const float *Wt, const int32_t *y,
                long tile) {
    xent_set_tile_floats(tile);
    float *scratch = malloc(xent_scratch_floats(N, C, V) * sizeof(float));
    memset(o->dW, 0, sizeof o->dW);
    o->loss = xent_forward(o->exps, o->mx, o->sum, X, W, Wt, N, C, V, y, &o->correct, scratch);
    xent_backward(o->dX, o->dW, o->exps, y, X, W, N, C, V, 1.0f / N, scratch);
    xent_set_tile_floats(0);
    free(scratch);
}

TEST(tiles) {
    static float X[N * C], W[V * C], Wt[C * V];
    int32_t y[N];
    uint64_t s = 5;
    for (int i = 0; i < N * C; i++)
        X[i] = frand(&s);
    for (int i = 0; i < V * C; i++)
        W[i] = 3.0f * frand(&s);
    for (int r = 0; r < N; r++)
        y[r] = (int32_t)(test_splitmix64(&s) % V);
    /* ties across tiles: rows 17 and 150 of W equal and far ahead for X rows 0 and 1; the
     * argmax is the lower id, so both rows (target 17) are hits; with the later id both
     * would miss */
    for (int k = 0; k < C; k++)
        W[17 * C + k] = W[150 * C + k] = 40.0f * X[k];
    for (int k = 0; k < C; k++)
        X[C + k] = X[k];
    y[0] = 17;
    y[1] = 17;
    transpose(Wt, W, V, C);

    static Out one, many, many_t;
    run(&one, X, W, NULL, y, 1L << 30);  /* one tile */
    run(&many, X, W, NULL, y, 16L * N);  /* 16 columns: 13 tiles, the last of 11 */
    run(&many_t, X, W, Wt, y, 32L * N);  /* transposed weight, 32 columns */
    CHECK(xent_tile_cols(N, C, V) == V); /* the default: one tile at this size */
    xent_set_tile_floats(16L * N);
    CHECK(xent_tile_cols(N, C, V) == 16);
    xent_set_tile_floats(0);

    /* the textbook computation in double */
    double loss = 0;
    long hits = 0;
    static double dX[N * C], dW[V * C];
    memset(dX, 0, sizeof dX);
    memset(dW, 0, sizeof dW);
    for (int r = 0; r < N; r++) {
        double l[V], mx = -INFINITY, z = 0;
        int arg = 0;
        for (int v = 0; v < V; v++) {
            l[v] = 0;
            for (int k = 0; k < C; k++)
                l[v] += (double)X[r * C + k] * W[v * C + k];
            if (l[v] > mx) mx = l[v], arg = v;
        }
        for (int v = 0; v < V; v++)
            z += exp(l[v] - mx);
        loss += log(z) + mx - l[y[r]];
        hits += arg == y[r];
        for (int v = 0; v < V; v++) {
            double g = (exp(l[v] - mx) / z - (v == y[r])) / N;
            for (int k = 0; k < C; k++) {
                dX[r * C + k] += g * W[v * C + k];
                dW[v * C + k] += g * X[r * C + k];
            }
        }
    }
    loss /= N;
    static float fX[N * C], fW[V * C];
    for (int i = 0; i < N * C; i++)
        fX[i] = (float)dX[i];
    for (int i = 0; i < V * C; i++)
        fW[i] = (float)dW[i];
    const Out *outs[3] = {&one, &many, &many_t};
    for (int k = 0; k < 3; k++) {
        const Out *o = outs[k];
        CHECK_MSG(fabs(o->loss - loss) < 1e-6 * fabs(loss), "case %d: loss %.9g, textbook %.9g", k,
                  (double)o->loss, loss);
        CHECK_MSG(o->correct == hits && hits >= 2, "case %d: %ld hits, textbook %ld", k, o->correct,
                  hits);
        CHECK_MSG(max_rel(o->dX, fX, N * C) < 2e-6, "case %d: dX off by %g", k,
                  max_rel(o->dX, fX, N * C));
        CHECK_MSG(max_rel(o->dW, fW, V * C) < 2e-6, "case %d: dW off by %g", k,
                  max_rel(o->dW, fW, V * C));
        CHECK_MSG(max_rel(o->mx, one.mx, N) < 1e-6, "case %d: row maxima differ", k);
    }
    CHECK(one.correct == many.correct);
}

/* The one-pass fold (exp_store_max_lanes, under a running maximum) against the two passes
 * it replaces where that maximum stands (row_max_lanes, exp_store_lanes): the same bits for
 * rows of every length (full lanes, a tail, shorter than a lane), and the row's maximum
 * whatever m is. */
TEST(one_pass_fold) {
    enum { L = 203 };
    static float x[L], e1[L], e2[L];
    uint64_t s = 11;
    for (int i = 0; i < L; i++)
        x[i] = 20.0f * frand(&s);
    const int lens[] = {1, 7, 16, 17, 64, 100, L};
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
        int n = lens[k];
        float mx = row_max_lanes(x, n), got;
        const float ms[] = {mx, mx + 0.5f, mx + 30.0f}; /* the running maximum >= this row's */
        for (int i = 0; i < 3; i++) {
            float want = exp_store_lanes(e1, x, n, ms[i]);
            float sum = exp_store_max_lanes(e2, x, n, ms[i], &got);
            CHECK_MSG(got == mx, "n %d: max %.9g, row_max_lanes %.9g", n, (double)got, (double)mx);
            CHECK_MSG(memcmp(&sum, &want, sizeof sum) == 0 && memcmp(e1, e2, n * sizeof *e1) == 0,
                      "n %d, m %.9g: not the two passes' bits (sum %.9g against %.9g)", n,
                      (double)ms[i], (double)sum, (double)want);
        }
        exp_store_max_lanes(e2, x, n, mx - 5.0f, &got); /* the maximum rises in this row */
        CHECK_MSG(got == mx, "n %d: max %.9g under a lower m, row_max_lanes %.9g", n, (double)got,
                  (double)mx);
    }
}

/* The scratch sized for N rows holds what every smaller pass needs (an evaluation batch
 * smaller than the training batch): N' w(N') can exceed N w(N) when w is rounded down. */
TEST(scratch) {
    const int vs[] = {65, 2000, 50257}, cs[] = {32, 128};
    for (int k = 0; k < 3; k++)
        for (int c = 0; c < 2; c++) {
            size_t need = 0;
            for (int n = 1; n <= 3000; n += 7) {
                int w = xent_tile_cols(n, cs[c], vs[k]), tiles = (vs[k] + w - 1) / w;
                size_t tile = (size_t)n * w, sides = 2 * (size_t)n * cs[c];
                size_t own = 2 * (size_t)n + (size_t)n * tiles + (tile > sides ? tile : sides);
                need = own > need ? own : need;
                if (xent_scratch_floats(n, cs[c], vs[k]) < need) {
                    CHECK_MSG(0,
                              "V %d, C %d: scratch for %d rows %zu floats, a pass of at most "
                              "%d rows needs %zu",
                              vs[k], cs[c], n, xent_scratch_floats(n, cs[c], vs[k]), n, need);
                    break;
                }
            }
        }
}

/* Past tile_floats / 16 rows the scratch is computed from N alone (not a loop up to N: a
 * batch of 10^8 rows took 7 s of CPU in `ablate plan`); it must still equal the largest need
 * of every pass of up to N rows, exactly. A small tile makes that point 257 rows. */
TEST(scratch_bounded) {
    const int vs[] = {65, 2000, 50257}, cs[] = {32, 128};
    xent_set_tile_floats(4096);
    for (int k = 0; k < 3; k++)
        for (int c = 0; c < 2; c++) {
            size_t need = 0;
            for (int n = 1; n <= 3000; n++) {
                int w = xent_tile_cols(n, cs[c], vs[k]), tiles = (vs[k] + w - 1) / w;
                size_t tile = (size_t)n * w, sides = 2 * (size_t)n * cs[c];
                size_t own = 2 * (size_t)n + (size_t)n * tiles + (tile > sides ? tile : sides);
                need = own > need ? own : need;
                size_t got = xent_scratch_floats(n, cs[c], vs[k]);
                if (got != need) {
                    CHECK_MSG(0, "V %d, C %d, %d rows: scratch %zu floats, the largest need %zu",
                              vs[k], cs[c], n, got, need);
                    break;
                }
            }
        }
    xent_set_tile_floats(0);
}

/* The model with many tiles against one: the same loss and gradients up to rounding. */
TEST(model) {
    ModelConfig mc;
    model_config_default(&mc);
    model_config_preset(&mc, "micro");
    mc.vocab_size = V;
    char err[ABL_ERR_MAX];
    GPT m;
    CHECK_MSG(gpt_alloc(&m, &mc, 2, 12, err) == 0, "%s", err);
    gpt_init_weights(&m, 3);
    int32_t x[24], y[24];
    uint64_t s = 9;
    for (int i = 0; i < 24; i++) {
        x[i] = (int32_t)(test_splitmix64(&s) % V);
        y[i] = (int32_t)(test_splitmix64(&s) % V);
    }
    size_t n = m.n_params;
    float *g1 = malloc(n * sizeof(float));
    gpt_zero_grad(&m);
    float l1 = gpt_forward(&m, x, y, 2, 12);
    long c1 = m.correct;
    gpt_backward(&m);
    memcpy(g1, m.grads, n * sizeof(float));
    xent_set_tile_floats(16L * 24); /* smaller than at allocation: the scratch suffices */
    gpt_zero_grad(&m);
    float l2 = gpt_forward(&m, x, y, 2, 12);
    gpt_backward(&m);
    xent_set_tile_floats(0);
    CHECK_MSG(fabsf(l1 - l2) <= 1e-6f * fabsf(l1), "loss %.9g with one tile, %.9g with many",
              (double)l1, (double)l2);
    CHECK(c1 == m.correct);
    CHECK_MSG(max_rel(m.grads, g1, n) < 1e-5, "gradients differ by %g", max_rel(m.grads, g1, n));
    free(g1);
    gpt_free(&m);
}

/* One training pass's loss and gradients under gemm's limits (small, own). */
static float pass_under(GPT *m, double small, double own, const int32_t *x, const int32_t *y, int B,
                        int T, float *grads) {
    gemm_set_small_limit(small);
    gemm_set_own_limit(own);
    gpt_zero_grad(m);
    float loss = gpt_forward(m, x, y, B, T);
    gpt_backward(m);
    memcpy(grads, m->grads, m->n_params * sizeof(float));
    gemm_set_small_limit(-1.0);
    gemm_set_own_limit(-1.0);
    return loss;
}

/* On an AVX-512 build, a d_model of 128 on 256 rows runs every product in the own kernel
 * whichever core OpenBLAS runs (gemm.h): the lm_head's tiles too, so the bits are those of
 * an AVX2 core. The AVX-512 core is played by its limits: OpenBLAS's small-matrix pieces up
 * to 1e6 and the own kernel up to GEMM_WIDE_MAX_MNK. An untiled lm_head (256 x 5,000 x 128)
 * would go to OpenBLAS there. */
TEST(same_bits_on_every_core) {
    if (!GEMM_SMALL_WIDE) {
        printf("test_xent: same_bits_on_every_core: not an AVX-512 build, nothing to compare\n");
        return;
    }
    enum { B = 2, T = 128, VB = 5000 };
    ModelConfig mc;
    model_config_default(&mc);
    model_config_preset(&mc, "book");
    mc.vocab_size = VB;
    mc.n_layer = 1;
    char err[ABL_ERR_MAX];
    GPT m;
    CHECK_MSG(gpt_alloc(&m, &mc, B, T, err) == 0, "%s", err);
    gpt_init_weights(&m, 5);
    static int32_t x[B * T], y[B * T];
    uint64_t s = 11;
    for (int i = 0; i < B * T; i++) {
        x[i] = (int32_t)(test_splitmix64(&s) % VB);
        y[i] = (int32_t)(test_splitmix64(&s) % VB);
    }
    CHECK(xent_tile_cols(B * T, mc.d_model, VB) < VB); /* tiled */
    float *g_avx2 = malloc(m.n_params * sizeof(float)), *g_512 = malloc(m.n_params * sizeof(float));
    float l_avx2 = pass_under(&m, 0.0, HUGE_VAL, x, y, B, T, g_avx2);
    float l_512 = pass_under(&m, 1e6, GEMM_WIDE_MAX_MNK, x, y, B, T, g_512);
    size_t bad = 0;
    for (size_t i = 0; i < m.n_params; i++)
        bad += memcmp(&g_avx2[i], &g_512[i], sizeof(float)) != 0;
    CHECK_MSG(memcmp(&l_avx2, &l_512, sizeof(float)) == 0 && bad == 0,
              "loss %.9g and %.9g, %zu of %zu gradients differ", (double)l_avx2, (double)l_512, bad,
              m.n_params);
    free(g_avx2);
    free(g_512);
    gpt_free(&m);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_xent");
}
