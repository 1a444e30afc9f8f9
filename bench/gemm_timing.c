#define _POSIX_C_SOURCE 200809L
#include "gemm_timing.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/gemm.h"

double gemm_timing_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *filled(size_t n, unsigned seed) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    if (!p) {
        fprintf(stderr, "gemm_timing: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 9) & 0xffff) / 65536.0f - 0.5f;
    }
    return p;
}

double gemm_timing_square(int n, int reps) {
    size_t nn = (size_t)n * n;
    float *A = filled(nn, 1), *B = filled(nn, 2), *C = filled(nn, 3);
    double best = 1e30;
    for (int r = 0; r <= reps; r++) { /* r = 0 is the warm-up */
        double t0 = gemm_timing_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A, n, B, n, 0.0f, C,
                    n);
        double dt = gemm_timing_now() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    free(A);
    free(B);
    free(C);
    return 2.0 * (double)n * n * n / best / 1e9;
}

int gemm_timing_read_shapes(const char *path, GemmShape *sh, int max) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    int ns = 0;
    while (ns < max && fgets(line, sizeof line, f)) {
        char ta, tb;
        GemmShape s;
        if (line[0] == '#') continue;
        if (sscanf(line, " %c %c %d %d %d %d", &ta, &tb, &s.M, &s.N, &s.K, &s.count) != 6) continue;
        s.ta = ta == 'T';
        s.tb = tb == 'T';
        sh[ns++] = s;
    }
    fclose(f);
    return ns;
}

double gemm_timing_flops(const GemmShape *sh, int ns) {
    double flops = 0.0;
    for (int i = 0; i < ns; i++)
        flops += 2.0 * (double)sh[i].M * sh[i].N * sh[i].K * sh[i].count;
    return flops;
}

static void run_shape(const GemmShape *q, const float *A, const float *B, float *C) {
    int tb = q->tb && !(q->ta == 0 && gemm_unpacked(0, q->M, q->N, q->K));
    int lda = q->ta ? q->M : q->K, ldb = tb ? q->K : q->N;
    for (int k = 0; k < q->count; k++)
        gemm(q->ta, tb, q->M, q->N, q->K, 1.0f, A, lda, B, ldb, q->ta ? 1.0f : 0.0f, C, q->N);
}

static void run_plain(const GemmShape *q, const float *A, const float *B, float *C) {
    int lda = q->ta ? q->M : q->K, ldb = q->tb ? q->K : q->N;
    for (int k = 0; k < q->count; k++)
        cblas_sgemm(CblasRowMajor, q->ta ? CblasTrans : CblasNoTrans,
                    q->tb ? CblasTrans : CblasNoTrans, q->M, q->N, q->K, 1.0f, A, lda, B, ldb,
                    q->ta ? 1.0f : 0.0f, C, q->N);
}

/* Best time of the list with run (after a warm-up), on one set of buffers big enough for
 * every call; each line's best in per_shape when asked. */
static double time_list(const GemmShape *sh, int ns, int reps, double *per_shape,
                        void (*run)(const GemmShape *, const float *, const float *, float *)) {
    size_t amax = 0, bmax = 0, cmax = 0;
    for (int i = 0; i < ns; i++) {
        size_t a = (size_t)sh[i].M * sh[i].K, b = (size_t)sh[i].K * sh[i].N,
               c = (size_t)sh[i].M * sh[i].N;
        amax = a > amax ? a : amax;
        bmax = b > bmax ? b : bmax;
        cmax = c > cmax ? c : cmax;
    }
    float *A = filled(amax, 4), *B = filled(bmax, 5), *C = filled(cmax, 6);
    double best = 1e30;
    for (int i = 0; per_shape && i < ns; i++)
        per_shape[i] = 1e30;
    for (int r = 0; r <= reps; r++) { /* r = 0 is the warm-up */
        double t0 = gemm_timing_now();
        for (int i = 0; i < ns; i++) {
            double s0 = gemm_timing_now();
            run(&sh[i], A, B, C);
            double ds = gemm_timing_now() - s0;
            if (per_shape && r > 0 && ds < per_shape[i]) per_shape[i] = ds;
        }
        double dt = gemm_timing_now() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    free(A);
    free(B);
    free(C);
    return best;
}

double gemm_timing_shapes(const GemmShape *sh, int ns, int reps, int blas_only, double *per_shape) {
    double own = gemm_own_limit();
    if (blas_only) gemm_set_own_limit(0.0);
    double best = time_list(sh, ns, reps, per_shape, run_shape);
    gemm_set_own_limit(own);
    return best;
}

double gemm_timing_shapes_plain(const GemmShape *sh, int ns, int reps) {
    return time_list(sh, ns, reps, NULL, run_plain);
}
