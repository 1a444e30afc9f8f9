/* ablate's own kernel for small row-major products (gemm.h says when gemm uses it).
 *
 * At the sizes of the micro family (512 x 32 x 96 and the like, ~1.5 MFLOP a product),
 * OpenBLAS spends a sixth of a product packing both operands into its layout and zeroing C
 * for beta = 0 (perf of micro's step: the copy routines 8.6%, memset 1.9%), and on machines
 * whose environment picks an AVX2 core it runs half the vector width the CPU has. Here the
 * operands are read where they are: a register tile of C accumulates one row of B's panel
 * per step of the reduction (op(B) transposed once into a scratch when B is transposed; the
 * last partial column tile from a zero-padded copy). No cache blocking: past
 * GEMM_SMALL_MAX_MNK OpenBLAS's packed kernels are faster at the same vector width
 * (bench/gemm_timing and docs/benchmarks.md).
 *
 * Except on AVX-512 builds. Where OpenBLAS runs an AVX2 core (the AMD machines whose
 * environment sets OPENBLAS_CORETYPE=Haswell, never overridden), the kernel's vector is
 * twice OpenBLAS's and gemm gives it every product; where OpenBLAS runs an AVX-512 core, the
 * products up to GEMM_WIDE_MAX_MNK. Those past GEMM_SMALL_MAX_MNK take a path of their own: the
 * operand each tile streams along the reduction packed once for the tiles that share it, the tiles
 * cut over --blas-threads. At book's shapes on one Zen 5 core that ran 1.4-2.2x OpenBLAS's Haswell
 * kernels (docs/benchmarks.md).
 *
 * Each element of C is one chain of fused multiply-adds over k from zero, then alpha and
 * beta, whichever tile it falls in. A product runs on the calling thread for every
 * --blas-threads K: at these sizes (~10 us) waking another thread costs more than it saves
 * (micro's step took 3.8x as long with its products cut into pieces for 2 threads), so
 * the bits are the same for every K. Large products are cut over the threads by whole
 * register tiles, each element computed as on one thread: the same bits too. */
#ifndef ABLATE_MODEL_GEMM_SMALL_H
#define ABLATE_MODEL_GEMM_SMALL_H

#if defined(__AVX2__) && defined(__FMA__)
#define GEMM_SMALL_KERNEL 1
#else
#define GEMM_SMALL_KERNEL 0 /* the build targets no AVX2 (ABLATE_NATIVE=OFF): OpenBLAS only */
#endif
#if GEMM_SMALL_KERNEL && defined(__AVX512F__)
#define GEMM_SMALL_WIDE 1 /* 16 floats a vector: twice an AVX2 core's */
#else
#define GEMM_SMALL_WIDE 0
#endif

/* The largest M*N*K gemm hands to the kernel: micro's products (<= 2.1 M) and those of its
 * study-B variants with a context of 32; OpenBLAS from d_model 64 (8.4 M) on. */
#define GEMM_SMALL_MAX_MNK (1 << 22)

/* The same on AVX-512 builds whose OpenBLAS runs one of its AVX-512 cores, as wide as the
 * kernel: the products of a d_model of 128 on 1,024 rows (<= 1024 x 512 x 128 = 2^26). On one
 * Zen 5 core with OpenBLAS's SkylakeX core (bench/engine_limit and docs/benchmarks.md),
 * those ran 1.04-1.53x OpenBLAS's on one thread and 1.08-2.55x on two, where OpenBLAS runs
 * the pieces of a split product on one thread. From d_model 256 on, OpenBLAS's blocked
 * kernels win: 0.68-1.10x, 0.89x in all. */
#define GEMM_WIDE_MAX_MNK (1 << 26)

#include "gemm.h"

/* The most floats a large product's tiles may stream along the reduction (op(B) whole, or
 * op(A) whole for a transposed B): beyond that it would come from memory once per register
 * tile (an untiled lm_head product with K = 50,257 streamed its 25.7 MB weight 128 times),
 * so gemm_small_fits says no and gemm gives the product to OpenBLAS, which blocks for the
 * caches. 8 MB, the vocabulary tiles of a batch of 256 tokens (the cross-entropy's dX
 * product, N x 128 x 2^21 / N, for N >= 128): on one Zen 5 core (32 MB L3), N x 128 x K
 * NN products with lda 50,257 ran at 206 (N 512: 2 MB streamed), 248 (256: 4 MB), 174
 * (128: 8 MB) and 72 GFLOP/s (64: 16 MB), OpenBLAS's Haswell kernels at 110, 110, 95, 93. */
#define GEMM_SMALL_STREAM_FLOATS (1 << 21)

/* Whether gemm_small runs a product of these sizes from the caches (always below
 * GEMM_SMALL_MAX_MNK). */
int gemm_small_fits(int trans_b, int M, int N, int K);

/* C (M,N) = alpha op(A) op(B) + beta C, then the epilogue ep (NULL: none), as gemm_ep(); C is
 * not read when beta = 0. 0, or -1 when its scratch cannot be allocated (the caller falls
 * back to OpenBLAS). */
int gemm_small(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc, const GemmEpilogue *ep);

#endif
