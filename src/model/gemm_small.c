#include "gemm_small.h"

#include <stdlib.h>
#include <string.h>

#include "par.h"
#include "transpose.h"

#if GEMM_SMALL_KERNEL
#include <immintrin.h>

/* A register tile is MR rows of C by NR = 2 vectors of columns: MR x 2 accumulators, two
 * vectors of B and one broadcast of A live per step of the reduction. AVX-512 has 32
 * registers (8 x 2 + 3), AVX2 16 (6 x 2 + 3), the shape of OpenBLAS's own Haswell kernel. */
#if defined(__AVX512F__)
#define VF 16
#define MR 8
typedef __m512 vec;
#define V_LOAD  _mm512_loadu_ps
#define V_STORE _mm512_storeu_ps
#define V_SET1  _mm512_set1_ps
#define V_FMA   _mm512_fmadd_ps
#define V_MUL   _mm512_mul_ps
#define V_ZERO  _mm512_setzero_ps
#define V_ADD   _mm512_add_ps
#define V_MAX   _mm512_max_ps
/* 0 where m <= 0 (or NaN), v elsewhere */
#define V_KEEP_POS(v, m) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask((m), V_ZERO(), _CMP_GT_OQ), (v))
#else
#define VF               8
#define MR               6
typedef __m256 vec;
#define V_LOAD           _mm256_loadu_ps
#define V_STORE          _mm256_storeu_ps
#define V_SET1           _mm256_set1_ps
#define V_FMA            _mm256_fmadd_ps
#define V_MUL            _mm256_mul_ps
#define V_ZERO           _mm256_setzero_ps
#define V_ADD            _mm256_add_ps
#define V_MAX            _mm256_max_ps
#define V_KEEP_POS(v, m) _mm256_and_ps(_mm256_cmp_ps((m), V_ZERO(), _CMP_GT_OQ), (v))
#endif
#define NR (2 * VF)

/* What one product needs. */
typedef struct {
    int N, K, tail;         /* tail: columns of the last, partial column tile (0: none) */
    const float *A, *B, *P; /* B: (K, N) row-major, ldb; P: (K, NR), the tail's columns */
    size_t sr, sk, ldb, ldc;
    float alpha, beta;
    float *C;
    const float *bias, *mask; /* the epilogue (gemm.h); NULL: none */
    size_t ldm;
    int relu;
} Product;

/* C (mr, nr) [= or +=] the product of mr rows of op(A) (element (r, k) at a[r sr + k sk])
 * and a (K, NR) panel b of op(B). Each element of C is one chain of fused multiply-adds
 * over k from zero, then alpha and beta, then the epilogue (bias from the tile's column,
 * ReLU, the mask from its element: NULL when the product has none), the same operations
 * whichever tile it falls in (a whole one, the last rows or the last columns). mr and nr
 * are constants after inlining for whole tiles. */
static inline __attribute__((always_inline)) void tile(const Product *p, int mr, int nr,
                                                       const float *a, const float *b, size_t ldb,
                                                       float *c, const int ep, const float *bias,
                                                       const float *mask) {
    vec acc[MR][2];
    for (int r = 0; r < MR; r++)
        acc[r][0] = acc[r][1] = V_ZERO();
    for (int k = 0; k < p->K; k++) {
        vec b0 = V_LOAD(b + (size_t)k * ldb), b1 = V_LOAD(b + (size_t)k * ldb + VF);
        const float *ak = a + (size_t)k * p->sk;
        for (int r = 0; r < mr; r++) {
            vec x = V_SET1(ak[(size_t)r * p->sr]);
            acc[r][0] = V_FMA(x, b0, acc[r][0]);
            acc[r][1] = V_FMA(x, b1, acc[r][1]);
        }
    }
    /* alpha and beta in locals: read through p, every store to C could have changed them */
    const float alpha = p->alpha, beta = p->beta;
    const int relu = ep && p->relu;
    if (!ep) bias = mask = NULL; /* constants: the plain kernel has no epilogue code at all */
    const vec va = V_SET1(alpha), vb = V_SET1(beta);
    float part[NR]; /* a partial tile goes through here: the same operations per element */
    /* unrolled, so that the accumulators stay in registers (a loop over them with the
     * epilogue's tests went through the stack: 12% of a K = 32 product) */
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        float *cr = c + (size_t)r * p->ldc;
        const float *mrow = mask ? mask + (size_t)r * p->ldm : NULL;
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            vec v = alpha == 1.0f ? acc[r][h] : V_MUL(va, acc[r][h]);
            if (nr == NR) {
                if (beta != 0.0f) v = V_FMA(vb, V_LOAD(cr + h * VF), v);
                if (bias) v = V_ADD(v, V_LOAD(bias + h * VF));
                if (relu) v = V_MAX(v, V_ZERO());
                if (mrow) v = V_KEEP_POS(v, V_LOAD(mrow + h * VF));
                V_STORE(cr + h * VF, v);
            } else {
                V_STORE(part + h * VF, v);
            }
        }
        if (nr < NR)
            for (int j = 0; j < nr; j++) {
                float x = beta != 0.0f ? __builtin_fmaf(beta, cr[j], part[j]) : part[j];
                if (bias) x += bias[j];
                if (relu) x = x > 0.0f ? x : 0.0f;
                if (mrow) x = mrow[j] > 0.0f ? x : 0.0f;
                cr[j] = x;
            }
    }
}

/* Rows [i0, i1) of C: whole tiles of MR rows, then the rest. */
static inline __attribute__((always_inline)) void rows(const Product *p, size_t i0, size_t i1,
                                                       int mr, const int ep) {
    int full = p->N - p->tail;
    for (size_t i = i0; i < i1; i += (size_t)mr) {
        const float *a = p->A + i * p->sr, *m = p->mask ? p->mask + i * p->ldm : NULL;
        float *c = p->C + i * p->ldc;
        for (int j = 0; j < full; j += NR)
            tile(p, mr, NR, a, p->B + j, p->ldb, c + j, ep, p->bias ? p->bias + j : NULL,
                 m ? m + j : NULL);
        if (p->tail)
            tile(p, mr, p->tail, a, p->P, NR, c + full, ep, p->bias ? p->bias + full : NULL,
                 m ? m + full : NULL);
    }
}

/* Out of line: inlined into gemm_small with the operand set-up, GCC's registers for the
 * tile loop got worse (own products at 105 instead of 240 GFLOP/s in bench/engine_limit).
 * At -O3 whatever the build: the Sanitize build's -O1 kept the accumulators in memory, each
 * access checked by ASan (8 GFLOP/s, the sanitizer pass's sweeps twice as long as with
 * OpenBLAS's uninstrumented products); at -O3, still instrumented, 26 GFLOP/s. Products
 * with an epilogue have a copy of their own: its code in the plain kernel cost the products
 * with a short reduction (K = 32) 14% on AVX2, even with none to apply. */
static __attribute__((noinline, optimize("O3"))) void all_rows(const Product *p, size_t M) {
    size_t whole = M / MR * MR;
    rows(p, 0, whole, MR, 0);
    if (whole < M) rows(p, whole, M, (int)(M - whole), 0);
}

static __attribute__((noinline, optimize("O3"))) void all_rows_ep(const Product *p, size_t M) {
    size_t whole = M / MR * MR;
    rows(p, 0, whole, MR, 1);
    if (whole < M) rows(p, whole, M, (int)(M - whole), 1);
}

static void run_rows(const Product *p, size_t M) {
    if (p->bias || p->mask || p->relu)
        all_rows_ep(p, M);
    else
        all_rows(p, M);
}

/* The per-thread scratch of the calling thread: op(B) when B is transposed, the tail's
 * panel, and a large product's packed operands. Grown when a larger product comes (the
 * first steps), never in a steady step. */
static _Thread_local float *scratch;
static _Thread_local size_t scratch_cap;

static float *scratch_for(size_t n) {
    if (n <= scratch_cap) return scratch;
    float *s = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!s) return NULL;
    free(scratch);
    scratch = s;
    scratch_cap = n;
    return s;
}

/* panel (K, NR) = nr columns of the (K, .) rows b (row stride ldb), zero-padded to NR: the
 * small path's last columns, and a large product's panels of an untransposed B. */
static void pack_panel(float *panel, const float *b, size_t ldb, int K, int nr) {
    for (int k = 0; k < K; k++) {
        memcpy(panel + (size_t)k * NR, b + (size_t)k * ldb, (size_t)nr * sizeof(float));
        memset(panel + (size_t)k * NR + nr, 0, (size_t)(NR - nr) * sizeof(float));
    }
}

/* Large products (gemm_small.h: past GEMM_SMALL_MAX_MNK, on builds whose vector is wider
 * than OpenBLAS's core). Unblocked, the small path streams a whole B, or every strided
 * column of a transposed A, from L2 or memory once per register tile: the book's lm_head
 * products ran at 150-230 GFLOP/s there, the transposed ones lowest. Here the operand a
 * tile reads along its reduction is packed contiguous first, once for all the tiles that
 * share it, and the tiles are cut over --blas-threads:
 *   - a transposed B (C = A B^T), or a B wider than A is tall: by panels of NR columns,
 *     each packed (K, NR) and then run down every row of A (A, at most the (1024, 128)
 *     rows of a step's activations, stays in L2 across panels);
 *   - otherwise by row tiles of MR rows; with a transposed A (the weight gradients, A^T B
 *     with A a (K, M) activation or a (K, V) tile of exponentials) each tile's MR columns of
 *     A are first packed (K, MR), two tiles at a time, then run across every panel of B.
 * Each element of C is still the one chain of multiply-adds from k = 0 that the small path
 * computes, then alpha, beta and the epilogue: the bits do not depend on the path, the
 * order, the pieces or the thread count. */
typedef struct {
    const Product *p;
    size_t M;
    float *pack; /* par_threads() areas of `per` floats, one per piece */
    size_t per;
    int trans_a, trans_b;
} Large;

/* Panels [j0, j1) of NR columns: op(B)'s panel packed (K, NR), zero-padded past N. */
static void large_panels(void *ctx, size_t j0, size_t j1, int chunk) {
    const Large *L = ctx;
    const Product *p = L->p;
    float *panel = L->pack + (size_t)chunk * L->per;
    for (size_t pj = j0; pj < j1; pj++) {
        int col = (int)pj * NR, nr = p->N - col < NR ? p->N - col : NR;
        if (!L->trans_b) {
            pack_panel(panel, p->B + col, p->ldb, p->K, nr);
        } else { /* B is (N, K): row j is op(B)'s column j */
            const float *src = p->B + (size_t)col * p->ldb;
            int k = 0;
#if FAST_TRANSPOSE
            for (; nr == NR && k + 8 <= p->K; k += 8)
                for (int jb = 0; jb < NR; jb += 8) {
                    const float *in[8];
                    float *out[8];
                    for (int r = 0; r < 8; r++) {
                        in[r] = src + (size_t)(jb + r) * p->ldb + k;
                        out[r] = panel + (size_t)(k + r) * NR + jb;
                    }
                    transpose8(out, in);
                }
#endif
            for (; k < p->K; k++) {
                float *row = panel + (size_t)k * NR;
                for (int j = 0; j < nr; j++)
                    row[j] = src[(size_t)j * p->ldb + k];
                for (int j = nr; j < NR; j++)
                    row[j] = 0.0f;
            }
        }
        Product q = *p;
        q.N = nr;
        q.tail = nr < NR ? nr : 0;
        q.B = q.P = panel;
        q.ldb = NR;
        q.C = p->C + col;
        q.bias = p->bias ? p->bias + col : NULL;
        q.mask = p->mask ? p->mask + col : NULL;
        run_rows(&q, L->M);
    }
}

/* Columns of a transposed A packed at once: two row tiles, so that each cache line of A
 * fetched (16 floats) is used whole, with the line PACK_AHEAD rows on prefetched (rows of A
 * lie a page or more apart: the hardware prefetchers do not follow them). Packing one tile's
 * 8 columns at a time took 15% of a 2048 x 128 x 1024 product. */
#define PACK_COLS  (2 * MR)
#define PACK_AHEAD 16

/* Row tiles [t0, t1) of MR rows; with a transposed A, PACK_COLS columns of A at a time
 * packed (K, PACK_COLS) first. */
static void large_rows(void *ctx, size_t t0, size_t t1, int chunk) {
    const Large *L = ctx;
    const Product *p = L->p;
    size_t i1 = t1 * MR < L->M ? t1 * MR : L->M;
    for (size_t i = t0 * MR; i < i1;) {
        size_t n = L->trans_a ? (i1 - i < PACK_COLS ? i1 - i : PACK_COLS) : i1 - i;
        Product q = *p;
        q.A = p->A + i * p->sr;
        q.C = p->C + i * p->ldc;
        q.mask = p->mask ? p->mask + i * p->ldm : NULL;
        if (L->trans_a) { /* A (r, k) at A[k lda + r]: n floats of each row k */
            float *strip = L->pack + (size_t)chunk * L->per;
            const float *a = q.A;
            size_t sk = p->sk;
            if (n == PACK_COLS) /* a constant size: vector moves, not a call */
                for (int k = 0; k < p->K; k++) {
                    if (k + PACK_AHEAD < p->K) /* a pointer within A */
                        __builtin_prefetch(a + (size_t)(k + PACK_AHEAD) * sk);
                    memcpy(strip + (size_t)k * PACK_COLS, a + (size_t)k * sk,
                           PACK_COLS * sizeof(float));
                }
            else
                for (int k = 0; k < p->K; k++)
                    memcpy(strip + (size_t)k * PACK_COLS, a + (size_t)k * sk, n * sizeof(float));
            q.A = strip;
            q.sr = 1;
            q.sk = PACK_COLS;
        }
        run_rows(&q, n);
        i += n;
    }
}

/* Whether a large product runs by panels of B: B transposed, or B (K, N) wider than A is
 * tall. A weight gradient A^T B with N > M (128 x 512 x 1024 in book's MLP) by row tiles
 * streamed its 2 MB B from L3 once per 16-column strip of A: 181 GFLOP/s on one Zen 5 core
 * (AVX-512), 78 with AVX2; by panels 233 and 116. */
static int by_panels(int trans_b, size_t M, int N) {
    return trans_b || (size_t)N > M;
}

/* Floats of packed operands each piece of a large product needs (0: none). */
static size_t large_pack(int trans_a, int panels, int K) {
    return panels ? (size_t)K * NR : trans_a ? (size_t)K * PACK_COLS : 0;
}

static void large_product(const Product *p, int trans_a, int trans_b, size_t M, float *pack) {
    int panels = by_panels(trans_b, M, p->N);
    Large L = {.p = p,
               .M = M,
               .trans_a = trans_a,
               .trans_b = trans_b,
               .pack = pack,
               .per = large_pack(trans_a, panels, p->K)};
    size_t units = panels ? ((size_t)p->N + NR - 1) / NR : (M + MR - 1) / MR;
    size_t unit_work = (panels ? (size_t)NR * M : (size_t)MR * p->N) * (size_t)p->K;
    par_for(units, par_grain(unit_work, 1), panels ? large_panels : large_rows, &L);
}

int gemm_small_fits(int trans_b, int M, int N, int K) {
    return (double)M * N * K <= GEMM_SMALL_MAX_MNK ||
           (double)(trans_b ? M : N) * K <= GEMM_SMALL_STREAM_FLOATS;
}

int gemm_small(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc, const GemmEpilogue *ep) {
    int large = (double)M * N * K > GEMM_SMALL_MAX_MNK;
    int panels = large && by_panels(trans_b, (size_t)M, N);
    int tail = N % NR;
    /* scratch: op(B) (small, transposed B), the tail's panel (not for a large product by
     * panels: they are packed piece by piece), a large product's packed operands */
    size_t kn = trans_b && !large ? (size_t)K * N : 0, kp = tail && !panels ? (size_t)K * NR : 0,
           need = kn + kp + (large ? (size_t)par_threads() * large_pack(trans_a, panels, K) : 0);
    float *s = need ? scratch_for(need) : NULL;
    if (need && !s) return -1;
    if (trans_b && !large) { /* op(B)[k][j] = B[j][k]: (K, N) */
        if (ldb == K)
            transpose(s, B, N, K); /* in 8x8 register blocks */
        else
            for (int j = 0; j < N; j++)
                for (int k = 0; k < K; k++)
                    s[(size_t)k * N + j] = B[(size_t)j * ldb + k];
        B = s;
        ldb = N;
    }
    float *P = NULL;
    if (kp) { /* the last columns, zero-padded to a whole panel */
        P = s + kn;
        pack_panel(P, B + (N - tail), (size_t)ldb, K, tail);
    }
    Product p = {.N = N,
                 .K = K,
                 .tail = tail,
                 .A = A,
                 .B = B,
                 .P = P,
                 .sr = trans_a ? 1 : (size_t)lda,
                 .sk = trans_a ? (size_t)lda : 1,
                 .ldb = (size_t)ldb,
                 .ldc = (size_t)ldc,
                 .alpha = alpha,
                 .beta = beta,
                 .C = C,
                 .bias = ep ? ep->bias : NULL,
                 .mask = ep ? ep->mask : NULL,
                 .ldm = ep ? (size_t)ep->ldm : 0,
                 .relu = ep ? ep->relu : 0};
    if (large)
        large_product(&p, trans_a, trans_b, (size_t)M, s ? s + kn + kp : NULL);
    else
        run_rows(&p, (size_t)M);
    return 0;
}

#else /* no AVX2 and FMA: gemm.c never calls it (gemm_own_limit() is 0) */

int gemm_small_fits(int trans_b, int M, int N, int K) {
    (void)trans_b, (void)M, (void)N, (void)K;
    return 0;
}

int gemm_small(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc, const GemmEpilogue *ep) {
    (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda;
    (void)B, (void)ldb, (void)beta, (void)C, (void)ldc, (void)ep;
    return -1;
}

#endif
