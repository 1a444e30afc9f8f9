#include "xent.h"

#include <math.h>

#include "fastmath.h"
#include "gemm.h"
#include "layers.h"

static long tile_floats = XENT_TILE_FLOATS;

void xent_set_tile_floats(long n) {
    tile_floats = n > 0 ? n : XENT_TILE_FLOATS;
}

int xent_tile_cols(int N, int V) {
    long w = tile_floats / (N > 0 ? N : 1);
    w -= w % 16;
    if (w < 16) w = 16;
    return w >= V ? V : (int)w;
}

size_t xent_scratch_floats(int N, int V) {
    return (size_t)N * (size_t)xent_tile_cols(N, V);
}

float xent_forward(float *logits, float *row_max, float *row_sum, const float *X, const float *W,
                   const float *Wt, int N, int C, int V, const int32_t *targets, long *correct,
                   float *scratch) {
    int32_t *arg = (int32_t *)scratch; /* each row's first argmax so far */
    int w = xent_tile_cols(N, V);
    for (int r = 0; r < N; r++) {
        row_max[r] = -INFINITY;
        row_sum[r] = 0.0f;
        arg[r] = 0;
    }
    for (int v0 = 0; v0 < V; v0 += w) {
        int n = V - v0 < w ? V - v0 : w;
        if (Wt)
            gemm(0, 0, N, n, C, 1.0f, X, C, Wt + v0, V, 0.0f, logits + v0, V);
        else
            gemm(0, 1, N, n, C, 1.0f, X, C, W + (size_t)v0 * C, C, 0.0f, logits + v0, V);
        /* the tile is in cache: fold it into each row's maximum and sum */
        for (int r = 0; r < N; r++) {
            const float *l = logits + (size_t)r * V + v0;
            float tm = row_max_lanes(l, n), mo = row_max[r];
            if (tm > mo) {
                int j = 0;
                while (l[j] != tm)
                    j++;
                arg[r] = v0 + j;
            }
            float mn = tm > mo ? tm : mo, st = exp_sum_lanes(l, n, mn);
            /* one tile: s = 0 + st, the untiled sum exactly */
            row_sum[r] = (row_sum[r] != 0.0f ? row_sum[r] * exp_nonpos(mo - mn) : 0.0f) + st;
            row_max[r] = mn;
        }
    }
    double loss = 0.0;
    long hits = 0;
    for (int r = 0; r < N; r++) {
        int y = targets[r];
        float ly = logits[(size_t)r * V + y];
        hits += arg[r] == y;
        loss += (double)logf(row_sum[r]) - (double)(ly - row_max[r]);
    }
    if (correct) *correct = hits;
    return (float)(loss / N);
}

void xent_backward(float *dX, float *dW, const float *logits, const float *row_max,
                   const float *row_sum, const int32_t *targets, const float *X, const float *W,
                   int N, int C, int V, float alpha, float *scratch) {
    int w = xent_tile_cols(N, V);
    for (int v0 = 0; v0 < V; v0 += w) {
        int n = V - v0 < w ? V - v0 : w;
        for (int r = 0; r < N; r++) {
            const float *l = logits + (size_t)r * V + v0;
            float *p = scratch + (size_t)r * n, m = row_max[r], inv = 1.0f / row_sum[r];
            for (int j = 0; j < n; j++)
                p[j] = exp_nonpos(l[j] - m) * inv;
            int y = targets[r];
            if (y >= v0 && y < v0 + n) p[y - v0] -= 1.0f;
        }
        gemm(0, 0, N, C, n, alpha, scratch, n, W + (size_t)v0 * C, C, v0 == 0 ? 0.0f : 1.0f, dX, C);
        gemm(1, 0, n, C, N, alpha, scratch, n, X, C, 1.0f, dW + (size_t)v0 * C, C);
    }
}
