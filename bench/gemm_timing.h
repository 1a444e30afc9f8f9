/* GEMM timing shared by bench/sgemm_peak.c and bench/engine_limit.c: square sgemm
 * throughput, and a list of products ("transA transB M N K count", row-major) run the way
 * src/model/gemm.c runs them or as plain cblas_sgemm calls. One warm-up, then the best of R
 * repetitions. */
#ifndef ABLATE_BENCH_GEMM_TIMING_H
#define ABLATE_BENCH_GEMM_TIMING_H

typedef struct {
    int ta, tb, M, N, K, count;
} GemmShape;

#define GEMM_TIMING_MAX_SHAPES 256

double gemm_timing_now(void);
/* Best GFLOP/s of R square n x n x n products (beta = 0). */
double gemm_timing_square(int n, int reps);
/* Reads a shapes file ('#' starts a comment line); returns the count, -1 if unreadable. */
int gemm_timing_read_shapes(const char *path, GemmShape *sh, int max);
/* 2 M N K count summed over the list. */
double gemm_timing_flops(const GemmShape *sh, int ns);
/* Best time of the whole list, as ablate runs it: through gemm() (src/model/gemm.c), a
 * forward product (N T) that gemm.c runs unpacked goes N N (on the transposed weight copy
 * gpt.c keeps for it), weight gradients (T N) accumulate (beta 1), the rest overwrite
 * (beta 0). blas_only: every product through OpenBLAS (gemm_set_own_limit(0)), as the
 * engine ran them before its own small-product kernel: the shape limit. With
 * per_shape non-NULL, also each line's best time (all its count calls). */
double gemm_timing_shapes(const GemmShape *sh, int ns, int reps, int blas_only, double *per_shape);
/* Best time of the whole list as plain OpenBLAS calls: each product one cblas_sgemm with the
 * listed transposes (no pieces, no transposed copies), betas as above. */
double gemm_timing_shapes_plain(const GemmShape *sh, int ns, int reps);

#endif
