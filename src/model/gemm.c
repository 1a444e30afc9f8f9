#include "gemm.h"

#include <cblas.h>
#include <math.h>
#include <strings.h>

#include "gemm_small.h"
#include "layers.h"
#include "par.h"

char *openblas_get_corename(void);

/* Whether OpenBLAS picked one of its AVX-512 cores (the environment's OPENBLAS_CORETYPE,
 * or its own detection). */
static int core_avx512(void) {
    static const char *cores[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    const char *core = openblas_get_corename();
    for (size_t i = 0; core && i < sizeof cores / sizeof *cores; i++)
        if (strcasecmp(core, cores[i]) == 0) return 1;
    return 0;
}

static double small_limit = -1.0; /* < 0: not yet detected */

double gemm_small_limit(void) {
    if (small_limit < 0.0) small_limit = core_avx512() ? 1e6 : 0.0;
    return small_limit;
}

void gemm_set_small_limit(double mnk) {
    small_limit = mnk;
}

static double own_limit = -1.0; /* < 0: not yet detected */

double gemm_own_limit(void) {
    if (own_limit < 0.0)
        own_limit = !GEMM_SMALL_KERNEL ? 0.0
                    : !GEMM_SMALL_WIDE ? GEMM_SMALL_MAX_MNK
                    : core_avx512()    ? GEMM_WIDE_MAX_MNK
                                       : HUGE_VAL;
    return own_limit;
}

void gemm_set_own_limit(double mnk) {
    own_limit = !GEMM_SMALL_KERNEL ? 0.0 : mnk < 0.0 ? -1.0 : mnk;
}

/* Length of a piece of the split dimension when the other two multiply to `other`; 0 when
 * the product is not split. */
static int piece_len(int len, double other) {
    double limit = gemm_small_limit();
    if (limit <= 0.0 || (double)len * other <= limit) return 0;
    int piece = (int)(limit / other);
    if (piece < GEMM_MIN_PIECE) return 0;
    return piece - piece % GEMM_MIN_PIECE; /* whole vectors of rows */
}

/* The piece gemm cuts an NN or transposed-A product into: rows of C, or of the reduction. */
static int product_piece(int trans_a, int M, int N, int K) {
    return trans_a ? piece_len(K, (double)M * N) : piece_len(M, (double)N * K);
}

int gemm_splits(int trans_a, int M, int N, int K) {
    return product_piece(trans_a, M, N, K) > 0;
}

/* The own kernel reads a transposed B where it is (gemm_small.h), so a product it takes
 * needs no transposed copy. */
static int own_takes(int trans_b, int M, int N, int K) {
    double own = gemm_own_limit();
    return own > 0.0 && (double)M * N * K <= own && gemm_small_fits(trans_b, M, N, K);
}

int gemm_unpacked(int trans_a, int M, int N, int K) {
    double limit = gemm_small_limit();
    return limit > 0.0 && !own_takes(1, M, N, K) &&
           ((double)M * N * K <= limit || gemm_splits(trans_a, M, N, K));
}

/* The OpenBLAS path's epilogue (gemm.h): the passes the kernel's fused one replaces. */
static void epilogue(int M, int N, float *C, int ldc, const GemmEpilogue *ep) {
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        const float *m = ep->mask ? ep->mask + (size_t)i * ep->ldm : NULL;
        if (ep->bias)
            for (int j = 0; j < N; j++)
                c[j] += ep->bias[j];
        if (ep->relu) relu_forward_inplace(c, (size_t)N);
        if (m) relu_backward_inplace(c, m, (size_t)N);
    }
}

static void blas_product(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                         int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
    if (par_threads() > 1) par_idle(); /* OpenBLAS's threads take the cores */
    int piece = trans_b ? 0 : product_piece(trans_a, M, N, K);
    if (piece == 0) {
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (!trans_a) { /* rows of A and C */
        for (int r = 0; r < M; r += piece) {
            int n = M - r < piece ? M - r : piece;
            cblas_sgemm(CblasRowMajor, ta, tb, n, N, K, alpha, A + (size_t)r * lda, lda, B, ldb,
                        beta, C + (size_t)r * ldc, ldc);
        }
        return;
    }
    /* A^T: pieces of the reduction (rows of A and B), summed into C in order */
    for (int k = 0; k < K; k += piece) {
        int n = K - k < piece ? K - k : piece;
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, n, alpha, A + (size_t)k * lda, lda,
                    B + (size_t)k * ldb, ldb, k == 0 ? beta : 1.0f, C, ldc);
    }
}

void gemm_ep(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc, const GemmEpilogue *ep) {
    if (M <= 0 || N <= 0) return;
    if (ep && !ep->bias && !ep->relu && !ep->mask) ep = NULL;
    if (own_takes(trans_b, M, N, K) &&
        gemm_small(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep) == 0)
        return;
    blas_product(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (ep) epilogue(M, N, C, ldc, ep);
}

void gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
          const float *B, int ldb, float beta, float *C, int ldc) {
    gemm_ep(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
}
