/* Single-core OpenBLAS sgemm throughput: the ceiling for a training step made of matmuls.
 *
 *   cc -O2 -Isrc -o sgemm_peak bench/sgemm_peak.c bench/gemm_timing.c src/model/gemm.c \
 *      src/model/gemm_small.c src/model/par.c -I/usr/include/x86_64-linux-gnu/openblas-pthread \
 *      -lopenblas -pthread
 *   sgemm_peak [--reps R] [--sizes 1024,1536,2048] [--shapes FILE]
 *
 * Square C = A B for each size, R timed repetitions after one warm-up call; the best
 * repetition counts. Prints JSON on one line:
 *   {"core": "Haswell", "threads": 1, "gflops": best, "sizes": [{"n":..,"gflops":..}, ...]}
 * With --shapes FILE (lines "transA transB M N K count", row-major: the products of an
 * ablate step), it also times that list as ablate runs it, as a whole, best of R, and adds
 * "shapes_seconds" (the GEMM-only time of the list) and "shapes_gflops". "As ablate runs
 * it" means through src/model/gemm.c, in the pieces it cuts, and a forward product
 * (N T) that gemm.c runs unpacked goes N N, on the transposed weight copy gpt.c keeps for it;
 * every product through OpenBLAS, none in ablate's own small-product kernel (gemm_small.h).
 *
 * OpenBLAS reads OPENBLAS_CORETYPE itself; this program never sets it. It pins OpenBLAS to
 * one thread unless OPENBLAS_NUM_THREADS is set. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_timing.h"

char *openblas_get_corename(void);
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);

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
        double gf = gemm_timing_square(n, reps);
        if (gf > best_all) best_all = gf;
        printf("%s{\"n\": %d, \"gflops\": %.2f}", first ? "" : ", ", n, gf);
        first = 0;
    }
    free(list);
    printf("], \"gflops\": %.2f", best_all);

    if (shapes_path) {
        GemmShape sh[GEMM_TIMING_MAX_SHAPES];
        int ns = gemm_timing_read_shapes(shapes_path, sh, GEMM_TIMING_MAX_SHAPES);
        if (ns < 0) {
            fprintf(stderr, "sgemm_peak: cannot open %s\n", shapes_path);
            return 1;
        }
        double best = gemm_timing_shapes(sh, ns, reps, 1, NULL);
        printf(", \"shapes_seconds\": %.6f, \"shapes_gflops\": %.2f", best,
               gemm_timing_flops(sh, ns) / best / 1e9);
    }
    printf("}\n");
    return 0;
}
