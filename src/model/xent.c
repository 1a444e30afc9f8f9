#include "xent.h"

#include <math.h>

#include "fastmath.h"
#include "gemm.h"
#include "layers.h"
#include "par.h"

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
    /* A pass of N' <= N rows takes N' w(N') floats: N' V when its tile is the whole
     * vocabulary, 16 N' when clamped to 16 columns, at most tile_floats otherwise (w is
     * rounded down). N * w(N) alone can be below a smaller pass's need. */
    size_t nv = (size_t)N * (size_t)V, t = (size_t)tile_floats, floor16 = 16 * (size_t)N;
    size_t most = t > floor16 ? t : floor16;
    return nv < most ? nv : most;
}

/* One tile's rows, for par_for: each row's work is its own (the same bits for every K). */
typedef struct {
    const float *logits;
    float *row_max, *row_sum, *scratch;
    int32_t *arg;
    const int32_t *targets;
    int V, v0, n;
} TileJob;

static void fold_rows(void *ctx, size_t r0, size_t r1, int chunk) {
    const TileJob *t = ctx;
    (void)chunk;
    for (size_t r = r0; r < r1; r++) {
        const float *l = t->logits + r * (size_t)t->V + t->v0;
        float tm = row_max_lanes(l, t->n), mo = t->row_max[r];
        if (tm > mo) {
            int j = 0;
            while (l[j] != tm)
                j++;
            t->arg[r] = t->v0 + j;
        }
        float mn = tm > mo ? tm : mo, st = exp_sum_lanes(l, t->n, mn);
        /* one tile: s = 0 + st, the untiled sum exactly */
        t->row_sum[r] = (t->row_sum[r] != 0.0f ? t->row_sum[r] * exp_nonpos(mo - mn) : 0.0f) + st;
        t->row_max[r] = mn;
    }
}

static void grad_rows(void *ctx, size_t r0, size_t r1, int chunk) {
    const TileJob *t = ctx;
    (void)chunk;
    for (size_t r = r0; r < r1; r++) {
        const float *l = t->logits + r * (size_t)t->V + t->v0;
        float *p = t->scratch + r * (size_t)t->n, m = t->row_max[r], inv = 1.0f / t->row_sum[r];
        for (int j = 0; j < t->n; j++)
            p[j] = exp_nonpos(l[j] - m) * inv;
        int y = t->targets[r];
        if (y >= t->v0 && y < t->v0 + t->n) p[y - t->v0] -= 1.0f;
    }
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
        /* the tile is fresh in cache: fold it into each row's maximum and sum */
        TileJob job = {.logits = logits,
                       .row_max = row_max,
                       .row_sum = row_sum,
                       .arg = arg,
                       .V = V,
                       .v0 = v0,
                       .n = n};
        par_for((size_t)N, par_grain((size_t)n * 4, 1), fold_rows, &job);
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
        TileJob job = {.logits = logits,
                       .row_max = (float *)row_max,
                       .row_sum = (float *)row_sum,
                       .scratch = scratch,
                       .targets = targets,
                       .V = V,
                       .v0 = v0,
                       .n = n};
        par_for((size_t)N, par_grain((size_t)n * 2, 1), grad_rows, &job);
        gemm(0, 0, N, C, n, alpha, scratch, n, W + (size_t)v0 * C, C, v0 == 0 ? 0.0f : 1.0f, dX, C);
        gemm(1, 0, n, C, N, alpha, scratch, n, X, C, 1.0f, dW + (size_t)v0 * C, C);
    }
}
