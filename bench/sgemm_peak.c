/* Single-core OpenBLAS sgemm throughput: the ceiling for a training step made of matmuls.
 *
 *   cc -O2 -Isrc -o sgemm_peak bench/sgemm_peak.c src/model/gemm.c \
 *      -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas
 *   sgemm_peak [--reps R] [--sizes 1024,1536,2048] [--shapes FILE]
 *
 * Square C = A B for each size, R timed repetitions after one warm-up call; the best
 * repetition counts. Prints JSON on one line:
 *   {"core": "Haswell", "threads": 1, "gflops": best, "sizes": [{"n":..,"gflops":..}, ...]}
 * With --shapes FILE (lines "transA transB M N K count", row-major: the products of an
 * ablate step), it also times that list as ablate runs it, as a whole, best of R, and adds
 * "shapes_seconds" (the GEMM-only time of the list) and "shapes_gflops". "As ablate runs
 * it" means through src/model/gemm.c, in the pieces it cuts, and a forward product
 * (N T) that gemm.c runs unpacked goes N N, on the transposed weight copy gpt.c keeps for it.
 *
 * OpenBLAS reads OPENBLAS_CORETYPE itself; this program never sets it. It pins OpenBLAS to
 * one thread unless OPENBLAS_NUM_THREADS is set. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/gemm.h"

char *openblas_get_corename(void);
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *filled(size_t n, unsigned seed) {
    float *p = malloc(n * sizeof(float));
    if (!p) {
        fprintf(stderr, "sgemm_peak: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 9) & 0xffff) / 65536.0f - 0.5f;
    }
    return p;
}

typedef struct {
    int ta, tb, M, N, K, count;
} Shape;

int main(int argc, char **argv) {
    int reps = 5;
    const char *sizes = "1024,1536,2048", *shapes_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
            sizes = argv[++i];
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc)
            shapes_path = argv[++i];
        else {
            fprintf(stderr, "usage: sgemm_peak [--reps R] [--sizes 1024,2048] [--shapes FILE]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (!getenv("OPENBLAS_NUM_THREADS")) openblas_set_num_threads(1);

    printf("{\"core\": \"%s\", \"threads\": %d, ", openblas_get_corename(),
           openblas_get_num_threads());
    double best_all = 0.0;
    printf("\"sizes\": [");
    char *list = strdup(sizes);
    int first = 1;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int n = atoi(tok);
        if (n < 1) continue;
        size_t nn = (size_t)n * n;
        float *A = filled(nn, 1), *B = filled(nn, 2), *C = filled(nn, 3);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A, n, B, n, 0.0f, C,
                    n);
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A, n, B, n, 0.0f,
                        C, n);
            double dt = now() - t0;
            if (dt < best) best = dt;
        }
        double gf = 2.0 * (double)n * n * n / best / 1e9;
        if (gf > best_all) best_all = gf;
        printf("%s{\"n\": %d, \"gflops\": %.2f}", first ? "" : ", ", n, gf);
        first = 0;
        free(A);
        free(B);
        free(C);
    }
    free(list);
    printf("], \"gflops\": %.2f", best_all);

    if (shapes_path) {
        FILE *f = fopen(shapes_path, "r");
        if (!f) {
            fprintf(stderr, "sgemm_peak: cannot open %s\n", shapes_path);
            return 1;
        }
        Shape sh[256];
        int ns = 0;
        char ta, tb;
        Shape s;
        while (ns < 256 &&
               fscanf(f, " %c %c %d %d %d %d", &ta, &tb, &s.M, &s.N, &s.K, &s.count) == 6) {
            s.ta = ta == 'T';
            s.tb = tb == 'T';
            sh[ns++] = s;
        }
        fclose(f);
        /* one set of buffers big enough for every call */
        size_t amax = 0, bmax = 0, cmax = 0;
        double flops = 0.0;
        for (int i = 0; i < ns; i++) {
            size_t a = (size_t)sh[i].M * sh[i].K, b = (size_t)sh[i].K * sh[i].N,
                   c = (size_t)sh[i].M * sh[i].N;
            amax = a > amax ? a : amax;
            bmax = b > bmax ? b : bmax;
            cmax = c > cmax ? c : cmax;
            flops += 2.0 * (double)sh[i].M * sh[i].N * sh[i].K * sh[i].count;
        }
        float *A = filled(amax, 4), *B = filled(bmax, 5), *C = filled(cmax, 6);
        double best = 1e30;
        for (int r = 0; r <= reps; r++) { /* r = 0 is the warm-up */
            double t0 = now();
            for (int i = 0; i < ns; i++)
                for (int k = 0; k < sh[i].count; k++) {
                    const Shape *q = &sh[i];
                    int tb = q->tb && !(q->ta == 0 && gemm_unpacked(0, q->M, q->N, q->K));
                    int lda = q->ta ? q->M : q->K, ldb = tb ? q->K : q->N;
                    /* weight gradients accumulate, the rest overwrite */
                    gemm(q->ta, tb, q->M, q->N, q->K, 1.0f, A, lda, B, ldb, q->ta ? 1.0f : 0.0f, C,
                         q->N);
                }
            double dt = now() - t0;
            if (r > 0 && dt < best) best = dt;
        }
        printf(", \"shapes_seconds\": %.6f, \"shapes_gflops\": %.2f", best, flops / best / 1e9);
        free(A);
        free(B);
        free(C);
    }
    printf("}\n");
    return 0;
}
