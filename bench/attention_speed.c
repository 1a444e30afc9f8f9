/* attention_speed: the engine's attention (src/model/attention.c) timed alone, forward and
 * backward, at one model width and context for several head counts and batches (at a fixed
 * time, study A's heads 1 / 4 / 8 process different numbers of tokens although their
 * attention FLOPs are equal; this says how much of that is the attention kernel).
 *
 *   attention_speed [--width 128] [--context 128] [--layers 4] [--batches 2,8]
 *                   [--heads 1,4,8] [--reps 20] [--target 1.5]
 *
 * Per (batch, heads) it prints the layout the kernel picks (attention.h: pair lanes, and how
 * many of their lanes hold pairs, or position lanes), the time of one layer's attention
 * (forward + backward, best of R in this thread's CPU time, interleaved), all layers' time,
 * the useful FLOP rate (12 B H hd T (T + 1) / 2: six causal products of multiply-adds) and
 * the time per FLOP against the best configuration of this run, a ratio measured in the same
 * run. The last line checks the worst ratio against --target (the engine must not decide a
 * fixed-time comparison: every configuration within 1.5x of the best per FLOP). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/attention.h"
#include "model/par.h"

#define MAXV 8

/* this thread's CPU time: the kernel runs on one thread (par_for inline), and on a shared
 * machine a 100 ms call is preempted in wall time whatever the best of R */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *randoms(size_t n, unsigned seed) {
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "attention_speed: out of memory\n");
        exit(1);
    }
    unsigned long long s = seed * 6364136223846793005ULL + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
    return p;
}

static int parse_list(const char *v, int *out) {
    int n = 0;
    char *copy = strdup(v);
    for (char *t = strtok(copy, ","); t && n < MAXV; t = strtok(NULL, ","))
        if ((out[n++] = atoi(t)) < 1) n = -1000;
    free(copy);
    return n;
}

int main(int argc, char **argv) {
    int C = 128, T = 128, L = 4, reps = 20, batches[MAXV] = {2, 8}, nb = 2, heads[MAXV] = {1, 4, 8},
        nh = 3;
    double target = 1.5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[++i] : NULL;
        int ok = v != NULL;
        if (ok && !strcmp(a, "--width"))
            ok = (C = atoi(v)) > 0;
        else if (ok && !strcmp(a, "--context"))
            ok = (T = atoi(v)) > 0;
        else if (ok && !strcmp(a, "--layers"))
            ok = (L = atoi(v)) > 0;
        else if (ok && !strcmp(a, "--reps"))
            ok = (reps = atoi(v)) > 0;
        else if (ok && !strcmp(a, "--batches"))
            ok = (nb = parse_list(v, batches)) > 0;
        else if (ok && !strcmp(a, "--heads"))
            ok = (nh = parse_list(v, heads)) > 0;
        else if (ok && !strcmp(a, "--target"))
            ok = (target = atof(v)) >= 1.0;
        else
            ok = 0;
        for (int h = 0; ok && h < nh; h++)
            ok = C % heads[h] == 0;
        if (!ok) {
            fprintf(stderr,
                    "usage: attention_speed [--width 128] [--context 128] [--layers 4] "
                    "[--batches 2,8] [--heads 1,4,8] [--reps 20] [--target 1.5] (heads divide "
                    "width)\n");
            return 2;
        }
    }
    double best[MAXV][MAXV];
    for (int b = 0; b < nb; b++)
        for (int h = 0; h < nh; h++)
            best[b][h] = INFINITY;
    /* buffers for the largest shape, allocated and touched once: every timing then runs on
     * warm memory (a fresh allocation per timing measured page faults, not attention) */
    size_t max_tile = 0, max_att = 0;
    for (int b = 0; b < nb; b++)
        for (int h = 0; h < nh; h++) {
            int pairs = batches[b] * heads[h];
            size_t tile = attn_tile_floats(pairs, T, C / heads[h]),
                   att = attn_tile_floats(pairs, T, T);
            if (tile > max_tile) max_tile = tile;
            if (att > max_att) max_att = att;
        }
    float *q = randoms(max_tile, 1), *k = randoms(max_tile, 2), *v = randoms(max_tile, 3),
          *y = randoms(max_tile, 4), *P = randoms(max_att, 5), *dq = randoms(max_tile, 6),
          *dk = randoms(max_tile, 7), *dv = randoms(max_tile, 8),
          *scr = randoms((size_t)T * ATTN_LANES * PAR_MAX_THREADS, 9);
    for (int r = 0; r < reps; r++) /* interleaved: a passing load hits every shape alike */
        for (int b = 0; b < nb; b++)
            for (int h = 0; h < nh; h++) {
                int B = batches[b], H = heads[h], hd = C / H;
                double t0 = now_s();
                attention_forward(y, P, q, k, v, B * H, T, hd);
                attention_backward(dq, dk, dv, y, P, q, k, v, B * H, T, hd, scr);
                double t = now_s() - t0;
                if (t < best[b][h]) best[b][h] = t;
            }
    float *bufs[] = {q, k, v, y, P, dq, dk, dv, scr};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]);
    printf("attention_speed: width %d, context %d, %d layers, %d lanes, best of %d\n", C, T, L,
           ATTN_LANES, reps);
    printf("%6s %6s %9s %16s %10s %14s %9s %12s\n", "batch", "heads", "head dim", "layout",
           "layer ms", "all layers ms", "GFLOP/s", "x best/FLOP");
    double per_flop[MAXV][MAXV], lo = INFINITY, worst = 0;
    int wb = 0, wh = 0;
    for (int b = 0; b < nb; b++)
        for (int h = 0; h < nh; h++) {
            /* useful work: the same at one width for every head count (B H hd = B C) */
            double flops = 12.0 * batches[b] * C * ((double)T * (T + 1) / 2);
            per_flop[b][h] = best[b][h] / flops;
            if (per_flop[b][h] < lo) lo = per_flop[b][h];
        }
    for (int b = 0; b < nb; b++)
        for (int h = 0; h < nh; h++) {
            int B = batches[b], H = heads[h], pairs = B * H;
            double ratio = per_flop[b][h] / lo;
            if (ratio > worst) {
                worst = ratio;
                wb = b;
                wh = h;
            }
            char layout[32];
            if (attn_by_position(pairs, T, C / H))
                snprintf(layout, sizeof layout, "positions");
            else
                snprintf(layout, sizeof layout, "pairs %d/%d", pairs,
                         attn_groups(pairs) * ATTN_LANES);
            printf("%6d %6d %9d %16s %10.3f %14.2f %9.2f %12.2f\n", B, H, C / H, layout,
                   1e3 * best[b][h], 1e3 * best[b][h] * L, 1e-9 / per_flop[b][h], ratio);
            printf("ATTENTION_SPEED width=%d context=%d batch=%d heads=%d position_lanes=%d "
                   "layer_ms=%.4f step_ms=%.3f gflops=%.3f per_flop_ratio=%.3f\n",
                   C, T, B, H, attn_by_position(pairs, T, C / H), 1e3 * best[b][h],
                   1e3 * best[b][h] * L, 1e-9 / per_flop[b][h], ratio);
        }
    printf("ATTENTION_TARGET width=%d context=%d worst=%.3f batch=%d heads=%d target=%.2f %s\n", C,
           T, worst, batches[wb], heads[wh], target, worst <= target ? "met" : "MISSED");
    return 0;
}
