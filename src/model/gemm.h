/* Row-major sgemm: small products in ablate's own kernel (gemm_small.h), the others through
 * OpenBLAS, cut into pieces its small-matrix kernels take.
 *
 * Products with M*N*K <= gemm_own_limit() (GEMM_SMALL_MAX_MNK, 4.2 M, on builds with AVX2 and
 * FMA; on AVX-512 builds GEMM_WIDE_MAX_MNK, 67 M, when OpenBLAS's core is an AVX-512 one and
 * every product when it is not) run in gemm_small.c: it reads the operands where they are and runs
 * the CPU's whole vector width whatever core OpenBLAS picked. What follows is about the others.
 *
 * OpenBLAS 0.3.x has "small matrix" kernels on its AVX-512 cores (SkylakeX, Cooperlake,
 * SapphireRapids) that read the operands where they are, for products with M*N*K <= 1e6
 * (kernel/x86_64/sgemm_small_kernel_permit_skylakex.c). Above that it packs both operands
 * into its own layout first, and at the sizes of ablation studies the packing (and zeroing C
 * for beta = 0) costs more than the arithmetic saves: a (512 x 32) x (32 x 128) product runs
 * at ~93 GFLOP/s packed and ~112 GFLOP/s as three small products on one Zen 4 core.
 *
 * So a product is split into row pieces (C's rows; for a transposed A, pieces of the
 * reduction, accumulated) small enough for those kernels, as long as a piece keeps at least
 * GEMM_MIN_PIECE rows: below that the pieces are matrix-vector products. The kernels are
 * used for NN and for transposed-A products; a transposed B runs packed, so callers that
 * can keep a transposed copy of B use the NN form (gemm_unpacked says when that pays).
 *
 * The split depends only on the shapes and the limit, so results are the same on every
 * run and every rank of one machine; different limits round differently. */
#ifndef ABLATE_MODEL_GEMM_H
#define ABLATE_MODEL_GEMM_H

#define GEMM_MIN_PIECE 16

/* C (M,N) = alpha op(A) op(B) + beta C; op(A) is (M,K), op(B) (K,N); lda, ldb, ldc are row
 * strides of A, B, C as stored. */
void gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
          const float *B, int ldb, float beta, float *C, int ldc);

/* What gemm_ep does to each element C[i][j] after alpha and beta, in this order: adds
 * bias[j], takes max(0, .) (relu), and zeroes it where mask[i ldm + j] <= 0 (ReLU's backward,
 * the mask being the layer's output). Products in ablate's own kernel do it while the tile
 * is in registers; the others in passes after the product, with the same operations, so
 * the bits do not depend on where it runs. */
typedef struct {
    const float *bias;
    int relu;
    const float *mask;
    int ldm;
} GemmEpilogue;

/* gemm, then the epilogue ep (NULL: none). */
void gemm_ep(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc, const GemmEpilogue *ep);

/* Whether gemm splits an NN (or transposed-A) product of these sizes. */
int gemm_splits(int trans_a, int M, int N, int K);
/* Whether such a product runs through the small-matrix kernels, whole or in pieces (not in
 * the own kernel, which reads a transposed B where it is); for a product of a weight
 * transpose, the caller's cue to keep the weight transposed. */
int gemm_unpacked(int trans_a, int M, int N, int K);

/* The largest M*N*K the BLAS runs unpacked: 1e6 on OpenBLAS's AVX-512 cores, 0 (never
 * split) on the others. Detected from openblas_get_corename() on first use; a test may set
 * it (negative: detect again). */
double gemm_small_limit(void);
void gemm_set_small_limit(double mnk);

/* The largest M*N*K gemm runs in its own kernel (gemm_small.h): GEMM_SMALL_MAX_MNK; on
 * AVX-512 builds GEMM_WIDE_MAX_MNK when OpenBLAS's core is an AVX-512 one and infinity when it
 * is not (detected on first use); 0 on builds without AVX2 and FMA. Tests and benches may set it
 * (0: OpenBLAS for every product; negative: the default again). */
double gemm_own_limit(void);
void gemm_set_own_limit(double mnk);

#endif
