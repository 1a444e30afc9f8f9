/* src/model/gemm.c: products cut into pieces for OpenBLAS's small-matrix kernels equal the
 * product computed directly, for every transpose combination, alpha and beta, uneven last
 * pieces and row strides wider than the matrices; the split happens exactly where gemm.h
 * says (above the limit, pieces of at least GEMM_MIN_PIECE whole-vector rows). ablate's own
 * small-product kernel (gemm_small.c): the same against the direct product, every element
 * the exact bits of its documented arithmetic whatever tile, tail or thread it falls in, C
 * unread for beta = 0. And src/model/transpose.c, which makes the forward's transposed
 * weight copies. */
#include <math.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>

#include "model/gemm.h"
#include "model/gemm_small.h"
#include "model/layers.h"
#include "model/par.h"
#include "model/transpose.h"
#include "test_util.h"

char *openblas_get_corename(void);

/* C = alpha op(A) op(B) + beta C in double, with the error bound's scale sum |a b|. */
static void naive(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, const float *C0, double *C, double *scale,
                  int ldc) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, abs_s = 0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += a * b;
                abs_s += fabs(a * b);
            }
            C[(size_t)i * ldc + j] = alpha * s + beta * (double)C0[(size_t)i * ldc + j];
            scale[(size_t)i * ldc + j] = fabs(alpha) * abs_s + fabs(beta * C0[(size_t)i * ldc + j]);
        }
}

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f - 0.5f;
}

static void frand_fill(float *x, size_t n, unsigned *seed) {
    for (size_t i = 0; i < n; i++)
        x[i] = frand(seed);
}

/* What gemm_ep's epilogue does, as passes over C (M, N) after the product: the bias,
 * ReLU, the mask (NULL, 0, NULL: none of them). */
static void epilogue_passes(float *c, int M, int N, const float *bias, int relu,
                            const float *mask) {
    for (int i = 0; i < M; i++) {
        float *w = c + (size_t)i * N;
        if (bias)
            for (int j = 0; j < N; j++)
                w[j] += bias[j];
        if (relu) relu_forward_inplace(w, N);
        if (mask) relu_backward_inplace(w, mask + (size_t)i * N, N);
    }
}

/* gemm against the double product under the current limit; returns the worst error in units
 * of the bound's scale. */
static double worst_error(int ta, int tb, int M, int N, int K, float alpha, float beta) {
    int pad = 3, lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
    float *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B), *C = malloc(nc * sizeof *C);
    float *C0 = malloc(nc * sizeof *C0);
    double *R = malloc(nc * sizeof *R), *S = malloc(nc * sizeof *S);
    unsigned seed = (unsigned)(M * 131 + N * 17 + K);
    frand_fill(A, na, &seed);
    frand_fill(B, nb, &seed);
    for (size_t i = 0; i < nc; i++)
        C[i] = C0[i] = frand(&seed);
    naive(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C0, R, S, ldc);
    gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    double worst = 0;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            size_t at = (size_t)i * ldc + j;
            double e = fabs(C[at] - R[at]) / (S[at] + 1e-30);
            worst = e > worst ? e : worst;
        }
        for (int j = N; j < ldc; j++) /* the padding between rows is never written */
            if (C[(size_t)i * ldc + j] != C0[(size_t)i * ldc + j]) worst = INFINITY;
    }
    free(A), free(B), free(C), free(C0), free(R), free(S);
    return worst;
}

/* transpose (the forward's weight copies): 8x8 register blocks plus row and column edges */
TEST(transpose) {
    static const int shapes[][2] = {{1, 1}, {8, 8}, {13, 21}, {37, 16}, {96, 32}, {5, 40}};
    for (int s = 0; s < 6; s++) {
        int rows = shapes[s][0], cols = shapes[s][1], bad = 0;
        float in[96 * 40], out[96 * 40];
        for (int i = 0; i < rows * cols; i++)
            in[i] = (float)i;
        transpose(out, in, rows, cols);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++)
                bad += out[c * rows + r] != in[r * cols + c];
        CHECK_MSG(bad == 0, "transpose %dx%d: %d entries wrong", rows, cols, bad);
    }
}

/* Every transpose combination, alpha and beta against a naive product, whole and split. */
TEST(products) {
    /* (M, N, K) with an uneven last piece in both split directions */
    static const int shapes[][3] = {{37, 13, 29}, {100, 24, 16}, {24, 7, 90}, {64, 48, 16}};
    static const float alphas[] = {1.0f, 0.25f}, betas[] = {0.0f, 1.0f, 0.5f};
    int split_seen[2] = {0, 0};
    gemm_set_own_limit(0.0); /* the OpenBLAS paths; own_kernel below tests the other */
    for (int s = 0; s < 4; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        for (int forced = 0; forced < 2; forced++) {
            /* pieces of 16 rows: NN splits M at N*K per row, A^T splits K at M*N */
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++) {
                    gemm_set_small_limit(forced ? 16.0 * (ta ? (double)M * N : (double)N * K)
                                                : 0.0);
                    int splits = gemm_splits(ta, M, N, K);
                    CHECK_MSG(splits == (forced && (ta ? K : M) > 16),
                              "splits %d for %s%s %dx%dx%d", splits, ta ? "T" : "N", tb ? "T" : "N",
                              M, N, K);
                    if (splits && !tb) split_seen[ta] = 1;
                    for (int a = 0; a < 2; a++)
                        for (int b = 0; b < 3; b++) {
                            double e = worst_error(ta, tb, M, N, K, alphas[a], betas[b]);
                            CHECK_MSG(e < 1e-6, "%s%s %dx%dx%d alpha %g beta %g limit %g: error %g",
                                      ta ? "T" : "N", tb ? "T" : "N", M, N, K, alphas[a], betas[b],
                                      gemm_small_limit(), e);
                        }
                }
        }
    }
    CHECK(split_seen[0] && split_seen[1]);
    gemm_set_small_limit(-1.0);
    gemm_set_own_limit(-1.0);
}

/* The own kernel's arithmetic for one element (gemm_small.h): one chain of fused
 * multiply-adds over k from zero, times alpha unless it is 1, plus beta C by one more fused
 * multiply-add unless beta is 0 (then C is not read). */
static float own_element(int ta, int tb, int i, int j, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float c) {
    float acc = 0.0f;
    for (int k = 0; k < K; k++) {
        float a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
        float b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
        acc = fmaf(a, b, acc);
    }
    float v = alpha == 1.0f ? acc : alpha * acc;
    return beta != 0.0f ? fmaf(beta, c, v) : v;
}

/* gemm under the own kernel's limit against own_element, bit for bit, with rows `pad`
 * floats wider than the matrices (0: contiguous, where a transposed B is copied in 8x8
 * blocks); C starts as NaN where beta = 0. Elements that differ. */
static long own_mismatches(int ta, int tb, int M, int N, int K, float alpha, float beta, int pad) {
    int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
    float *A = malloc(na * sizeof *A + 4), *B = malloc(nb * sizeof *B + 4);
    float *C = malloc(nc * sizeof *C), *C0 = malloc(nc * sizeof *C0);
    unsigned seed = (unsigned)(M * 7 + N * 131 + K * 3 + ta * 2 + tb);
    frand_fill(A, na, &seed);
    frand_fill(B, nb, &seed);
    for (size_t i = 0; i < nc; i++)
        C[i] = C0[i] = beta == 0.0f && i % (size_t)ldc < (size_t)N ? NAN : frand(&seed);
    gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    long bad = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < ldc; j++) {
            size_t at = (size_t)i * ldc + j;
            float want =
                j < N ? own_element(ta, tb, i, j, K, alpha, A, lda, B, ldb, beta, C0[at]) : C0[at];
            bad += memcmp(&C[at], &want, sizeof want) != 0;
        }
    free(A), free(B), free(C), free(C0);
    return bad;
}

/* The own kernel's limit when nobody set it: every product on AVX-512 builds whose OpenBLAS
 * core is an AVX2 one (it runs twice the vector width), else the small products only. */
static double own_default(void) {
    if (!GEMM_SMALL_KERNEL) return 0.0;
    const char *core = openblas_get_corename();
    int core512 = core && (!strcasecmp(core, "SkylakeX") || !strcasecmp(core, "Cooperlake") ||
                           !strcasecmp(core, "SapphireRapids"));
    return !GEMM_SMALL_WIDE ? GEMM_SMALL_MAX_MNK : core512 ? GEMM_WIDE_MAX_MNK : HUGE_VAL;
}

/* Shapes that take every path of the kernel: whole tiles, the last rows (M not a multiple
 * of the 8 or 6 rows of a tile), the last columns (N not a multiple of 32 or 16, and N
 * below one panel), K of 0 and 1, and micro's own products. */
static const int own_shapes[][3] = {
    {512, 96, 32}, {96, 32, 512}, {512, 65, 32}, {65, 32, 512}, {37, 13, 29}, {100, 24, 16},
    {24, 7, 90},   {64, 48, 16},  {1, 1, 1},     {7, 33, 5},    {13, 16, 0},  {9, 40, 1},
};
#define N_OWN_SHAPES ((int)(sizeof own_shapes / sizeof *own_shapes))

TEST(own_kernel) {
    if (!GEMM_SMALL_KERNEL) {
        CHECK(gemm_own_limit() == 0.0); /* OpenBLAS for every product */
        return;
    }
    CHECK(gemm_own_limit() == own_default());
    static const float alphas[] = {1.0f, 0.25f, -1.5f}, betas[] = {0.0f, 1.0f, 0.5f};
    for (int s = 0; s < N_OWN_SHAPES; s++) {
        int M = own_shapes[s][0], N = own_shapes[s][1], K = own_shapes[s][2];
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                if (ta && tb) continue; /* the engine never asks for A^T B^T */
                for (int a = 0; a < 3; a++)
                    for (int b = 0; b < 3; b++) {
                        long bad = own_mismatches(ta, tb, M, N, K, alphas[a], betas[b], 5) +
                                   own_mismatches(ta, tb, M, N, K, alphas[a], betas[b], 0);
                        CHECK_MSG(bad == 0, "%s%s %dx%dx%d alpha %g beta %g: %ld elements differ",
                                  ta ? "T" : "N", tb ? "T" : "N", M, N, K, alphas[a], betas[b],
                                  bad);
                        if (K > 0) {
                            double e = worst_error(ta, tb, M, N, K, alphas[a], betas[b]);
                            CHECK_MSG(e < 1e-6, "%s%s %dx%dx%d: error %g", ta ? "T" : "N",
                                      tb ? "T" : "N", M, N, K, e);
                        }
                    }
            }
    }
}

/* --blas-threads K: the rows cut into pieces on other threads, the same bits. */
TEST(own_threads) {
    if (!GEMM_SMALL_KERNEL) return;
    par_set_threads(2);
    par_set_min_work(64); /* pieces of a few rows even at these sizes */
    for (int s = 0; s < N_OWN_SHAPES; s++)
        for (int ta = 0; ta < 2; ta++) {
            int M = own_shapes[s][0], N = own_shapes[s][1], K = own_shapes[s][2];
            long bad = own_mismatches(ta, !ta, M, N, K, 0.5f, 1.0f, 0);
            CHECK_MSG(bad == 0, "%dx%dx%d on 2 threads: %ld elements differ", M, N, K, bad);
        }
    par_set_min_work(0);
    par_set_threads(1);
}

/* Products past GEMM_SMALL_MAX_MNK take the kernel's large path (packed panels of a
 * transposed B, packed columns of a transposed A, row tiles cut over the threads) where the
 * build's default gives them to it; forced here on every machine. The same bits as the
 * small path's chain per element, on 1 and 2 threads, with and without padded rows, tails
 * of rows and columns, and the epilogue; a product whose reduction would stream more than
 * GEMM_SMALL_STREAM_FLOATS goes to OpenBLAS and is still right. */
static const int large_shapes[][3] = {
    {203, 77, 300}, {1029, 45, 97}, {40, 1100, 97}, {130, 35, 1000}, {77, 300, 203}};

TEST(own_large) {
    if (!GEMM_SMALL_KERNEL) return;
    gemm_set_own_limit(HUGE_VAL);
    for (int threads = 1; threads <= 2; threads++) {
        par_set_threads(threads);
        par_set_min_work(threads > 1 ? 1 << 16 : 0); /* several pieces a product */
        for (size_t s = 0; s < sizeof large_shapes / sizeof *large_shapes; s++) {
            int M = large_shapes[s][0], N = large_shapes[s][1], K = large_shapes[s][2];
            CHECK((double)M * N * K > GEMM_SMALL_MAX_MNK);
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++) {
                    if (ta && tb) continue;
                    CHECK(gemm_small_fits(tb, M, N, K));
                    long bad = own_mismatches(ta, tb, M, N, K, 1.0f, 0.0f, threads == 1 ? 0 : 3) +
                               own_mismatches(ta, tb, M, N, K, -0.5f, 1.0f, 5);
                    CHECK_MSG(bad == 0, "%s%s %dx%dx%d on %d thread(s): %ld elements differ",
                              ta ? "T" : "N", tb ? "T" : "N", M, N, K, threads, bad);
                }
        }
        /* the epilogue on a large product: the bits of the plain product and its passes */
        enum { M = 203, N = 77, K = 300 };
        float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N),
              *bias = malloc(sizeof(float) * N), *mask = malloc(sizeof(float) * M * N),
              *want = malloc(sizeof(float) * M * N), *got = malloc(sizeof(float) * M * N);
        unsigned seed = 11;
        frand_fill(A, (size_t)M * K, &seed);
        frand_fill(B, (size_t)K * N, &seed);
        frand_fill(bias, N, &seed);
        frand_fill(mask, (size_t)M * N, &seed);
        for (int tb = 0; tb < 2; tb++) {
            const float *b = B;
            int ldb = tb ? K : N; /* the same array read as (N, K) when transposed */
            gemm(0, tb, M, N, K, 1.0f, A, K, b, ldb, 0.0f, want, N);
            epilogue_passes(want, M, N, bias, 1, mask);
            GemmEpilogue ep = {.bias = bias, .relu = 1, .mask = mask, .ldm = N};
            gemm_ep(0, tb, M, N, K, 1.0f, A, K, b, ldb, 0.0f, got, N, &ep);
            CHECK_MSG(memcmp(want, got, sizeof(float) * M * N) == 0,
                      "large product with its epilogue (%s), %d thread(s): bits differ",
                      tb ? "NT" : "NN", threads);
        }
        free(A), free(B), free(bias), free(mask), free(want), free(got);
    }
    par_set_min_work(0);
    par_set_threads(1);
    /* streaming more than GEMM_SMALL_STREAM_FLOATS along the reduction: OpenBLAS's */
    CHECK(!gemm_small_fits(0, 16, 128, GEMM_SMALL_STREAM_FLOATS / 64));
    CHECK(!gemm_small_fits(1, 128, 16, GEMM_SMALL_STREAM_FLOATS / 64));
    CHECK(gemm_small_fits(1, 64, 128, GEMM_SMALL_STREAM_FLOATS / 64));
    CHECK(worst_error(0, 0, 16, 128, GEMM_SMALL_STREAM_FLOATS / 64, 1.0f, 0.0f) < 1e-5);
    gemm_set_own_limit(-1.0);
}

/* gemm_ep: the bias, ReLU and mask epilogue, fused in the own kernel and in passes after
 * OpenBLAS, gives the bits of the product followed by the passes it replaces (layers.c's
 * bias loop, relu_forward_inplace, relu_backward_inplace), for whole tiles, the last rows and
 * the last columns, with negative zeros, NaNs and positive and negative values. */
TEST(epilogue) {
    enum { M = 13, N = 70, K = 9 };
    static float A[M * K], B[K * N], bias[N], mask[M * N], C0[M * N], want[M * N], got[M * N];
    unsigned seed = 3;
    frand_fill(A, M * K, &seed);
    frand_fill(B, K * N, &seed);
    frand_fill(bias, N, &seed);
    frand_fill(mask, M * N, &seed);
    frand_fill(C0, M * N, &seed);
    mask[0] = -0.0f;
    mask[1] = 0.0f;
    mask[2] = NAN;
    for (int own = 0; own < 2; own++) {
        gemm_set_own_limit(own ? -1.0 : 0.0);
        for (int e = 0; e < 8; e++) {
            int has_bias = e & 1, relu = e & 2, has_mask = e & 4;
            for (int b = 0; b < 2; b++) {
                float beta = b ? 0.5f : 0.0f;
                memcpy(want, C0, sizeof want);
                memcpy(got, C0, sizeof got);
                gemm(0, 0, M, N, K, 1.0f, A, K, B, N, beta, want, N);
                epilogue_passes(want, M, N, has_bias ? bias : NULL, relu != 0,
                                has_mask ? mask : NULL);
                GemmEpilogue ep = {.bias = has_bias ? bias : NULL,
                                   .relu = relu != 0,
                                   .mask = has_mask ? mask : NULL,
                                   .ldm = N};
                gemm_ep(0, 0, M, N, K, 1.0f, A, K, B, N, beta, got, N, &ep);
                long bad = 0;
                for (int i = 0; i < M * N; i++)
                    bad += memcmp(&want[i], &got[i], sizeof(float)) != 0;
                CHECK_MSG(bad == 0, "%s, bias %d relu %d mask %d beta %g: %ld elements differ",
                          own ? "own kernel" : "OpenBLAS", has_bias, relu != 0, has_mask != 0,
                          (double)beta, bad);
            }
        }
    }
    gemm_set_own_limit(-1.0);
}

/* Past the limit, OpenBLAS: the own kernel's bits are not required there, but nothing is
 * lost (the product is right). */
TEST(own_limit) {
    gemm_set_own_limit(100.0);
    CHECK(worst_error(0, 1, 37, 13, 29, 1.0f, 0.0f) < 1e-6);
    gemm_set_own_limit(-1.0);
    CHECK(gemm_own_limit() == own_default());
}

TEST(split_limits) {
    /* where the split applies at the studies' sizes, with the AVX-512 cores' limit */
    gemm_set_small_limit(1e6);
    CHECK(gemm_splits(0, 512, 128, 32));    /* micro MLP: 3 pieces of 160 rows */
    CHECK(gemm_splits(1, 96, 32, 512));     /* micro qkv weight gradient: pieces of 320 tokens */
    CHECK(!gemm_splits(0, 32, 96, 32));     /* below the limit: one call */
    CHECK(!gemm_splits(0, 1024, 768, 768)); /* book: a piece would be one row */
    CHECK(!gemm_splits(1, 768, 768, 1024));
    /* what the own kernel takes needs no transposed weight (gpt.c keeps one where this says
     * so): book's products on an AVX-512 build, micro's on every build with the kernel */
    gemm_set_own_limit(GEMM_SMALL_KERNEL ? GEMM_SMALL_MAX_MNK : 0.0);
    CHECK(gemm_unpacked(0, 512, 128, 32) == !GEMM_SMALL_KERNEL);
    gemm_set_own_limit(GEMM_SMALL_WIDE ? GEMM_WIDE_MAX_MNK : 0.0);
    CHECK(gemm_unpacked(0, 1024, 384, 128) == !GEMM_SMALL_WIDE);
    gemm_set_own_limit(0.0);
    CHECK(gemm_unpacked(0, 512, 128, 32)); /* OpenBLAS's pieces */
    gemm_set_own_limit(-1.0);
    gemm_set_small_limit(0.0);
    CHECK(!gemm_splits(0, 512, 128, 32)); /* cores without the kernels: never */
    CHECK(!gemm_unpacked(0, 32, 96, 32));
    gemm_set_small_limit(-1.0); /* detect again */
    CHECK(gemm_small_limit() == 0.0 || gemm_small_limit() == 1e6);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_gemm");
}
