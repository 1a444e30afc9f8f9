/* activation_speed: the MLP activations of src/model/layers.c timed alone, forward and
 * backward, at an MLP's shape ("Tanh is the slowest", a claim of study A's write-up
 * about its PyTorch runs). Each activation runs on the same inputs (a normal spread like a
 * pre-activation's, plus exact zeros and negatives), best of R repetitions of a batch of
 * calls, interleaved so a load that comes and goes hits every activation alike.
 *
 *   activation_speed [--tokens 256] [--hidden 512] [--layers 4] [--reps 200]
 *
 * Prints per activation: the forward and backward time of one layer, ns per element, and
 * the time for all layers of a step (forward + backward x layers), ranked, and the
 * relative speed against the fastest. --tokens x --hidden: study A's book GPT trains on
 * batch 2 x 128 tokens with an MLP of 4 x 128 = 512. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/config.h"
#include "model/layers.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *xmalloc(size_t n) {
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "activation_speed: out of memory\n");
        exit(1);
    }
    return p;
}

/* normal(0, 1.5) by Box-Muller from a fixed LCG; every 16th value an exact zero */
static void fill(float *x, size_t n, unsigned seed) {
    unsigned long long s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (size_t i = 0; i < n; i += 2) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u1 = ((s >> 11) + 1.0) / 9007199254740993.0;
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u2 = (s >> 11) / 9007199254740992.0, r = sqrt(-2.0 * log(u1));
        x[i] = (float)(1.5 * r * cos(6.283185307179586 * u2));
        if (i + 1 < n) x[i + 1] = (float)(1.5 * r * sin(6.283185307179586 * u2));
    }
    for (size_t i = 0; i < n; i += 16)
        x[i] = 0.0f;
}

static const Activation ACTS[] = {ACT_GELU_TANH, ACT_GELU, ACT_RELU, ACT_RELU2, ACT_TANH, ACT_SILU};
#define NA    ((int)(sizeof ACTS / sizeof ACTS[0]))
#define CALLS 10 /* calls per timed batch */

int main(int argc, char **argv) {
    int N = 256, F = 512, L = 4, reps = 200;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[++i] : NULL;
        int *dst = !strcmp(a, "--tokens")   ? &N
                   : !strcmp(a, "--hidden") ? &F
                   : !strcmp(a, "--layers") ? &L
                   : !strcmp(a, "--reps")   ? &reps
                                            : NULL;
        if (!dst || !v || (*dst = atoi(v)) < 1) {
            fprintf(stderr, "usage: activation_speed [--tokens 256] [--hidden 512] [--layers 4] "
                            "[--reps 200]\n");
            return 2;
        }
    }
    size_t n = (size_t)N * F;
    float *pre = xmalloc(n), *h = xmalloc(n), *dh = xmalloc(n), *dpre = xmalloc(n);
    fill(pre, n, 1);
    fill(dh, n, 2);
    double fwd[NA], bwd[NA];
    for (int a = 0; a < NA; a++)
        fwd[a] = bwd[a] = INFINITY;
    volatile float sink = 0;
    for (int r = 0; r < reps; r++) { /* interleaved: each activation once per repetition */
        for (int a = 0; a < NA; a++) {
            double t0 = now_s();
            for (int c = 0; c < CALLS; c++)
                activation_forward(ACTS[a], h, pre, N, F);
            double t1 = now_s();
            for (int c = 0; c < CALLS; c++)
                activation_backward(ACTS[a], dpre, dh, pre, N, F);
            double t2 = now_s();
            sink += h[n / 2] + dpre[n / 3];
            if ((t1 - t0) / CALLS < fwd[a]) fwd[a] = (t1 - t0) / CALLS;
            if ((t2 - t1) / CALLS < bwd[a]) bwd[a] = (t2 - t1) / CALLS;
        }
    }
    (void)sink;
    int order[NA];
    for (int a = 0; a < NA; a++)
        order[a] = a;
    for (int i = 1; i < NA; i++) /* fastest first */
        for (int j = i;
             j > 0 && fwd[order[j]] + bwd[order[j]] < fwd[order[j - 1]] + bwd[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    double best = fwd[order[0]] + bwd[order[0]];
    printf("activation_speed: %d tokens x %d hidden (%zu elements), %d layers, best of %d x %d "
           "calls\n",
           N, F, n, L, reps, CALLS);
    printf("%-10s %12s %12s %12s %14s %10s\n", "activation", "forward us", "backward us",
           "ns/element", "all layers us", "x fastest");
    for (int i = 0; i < NA; i++) {
        int a = order[i];
        double t = fwd[a] + bwd[a];
        printf("%-10s %12.1f %12.1f %12.3f %14.1f %10.2f\n", activation_names[ACTS[a]],
               1e6 * fwd[a], 1e6 * bwd[a], 1e9 * t / (double)n, 1e6 * t * L, t / best);
    }
    for (int a = 0; a < NA; a++)
        printf("ACTIVATION_SPEED activation=%s forward_us=%.2f backward_us=%.2f step_us=%.1f\n",
               activation_names[ACTS[a]], 1e6 * fwd[a], 1e6 * bwd[a], 1e6 * (fwd[a] + bwd[a]) * L);
    free(pre);
    free(h);
    free(dh);
    free(dpre);
    return 0;
}
