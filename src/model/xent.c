#include "xent.h"

#include <math.h>

#include "fastmath.h"
#include "gemm.h"
#include "gemm_small.h"
#include "layers.h"
#include "par.h"

static long tile_floats = XENT_TILE_FLOATS;

void xent_set_tile_floats(long n) {
    tile_floats = n > 0 ? n : XENT_TILE_FLOATS;
}

int xent_tile_cols(int N, int C, int V) {
    double n = N > 0 ? N : 1;
    long w = (long)(tile_floats / n);
#if GEMM_SMALL_WIDE
    /* the widest tile whose products the own kernel takes on every OpenBLAS core, if that is
     * not too narrow (xent.h) */
    long own = (long)(GEMM_WIDE_MAX_MNK / (n * (C > 0 ? C : 1)));
    if (own >= XENT_OWN_MIN_COLS && own < w) w = own;
#else
    (void)C;
#endif
    w -= w % 16;
    if (w < 16) w = 16;
    return w >= V ? V : (int)w;
}

/* The scratch, in floats, for a pass of N rows: each row's argmax so far (int32) and target
 * logit (forward only), the factors (N, tiles) the backward needs, and then the tile
 * (forward) or two (N, C) matrices (backward). */
typedef struct {
    int w, tiles;
    size_t arg, target, factor, tile, xs, prod, total;
} Layout;

static Layout layout(int N, int C, int V) {
    Layout l = {.w = xent_tile_cols(N, C, V)};
    l.tiles = (V + l.w - 1) / l.w;
    size_t n = (size_t)(N > 0 ? N : 0), nc = n * (size_t)C;
    l.arg = 0;
    l.target = n;
    l.factor = 2 * n;
    l.tile = l.xs = l.factor + n * (size_t)l.tiles;
    l.prod = l.xs + nc;
    size_t tile = n * (size_t)l.w;
    l.total = l.tile + (tile > 2 * nc ? tile : 2 * nc);
    return l;
}

size_t xent_scratch_floats(int N, int C, int V) {
    /* the largest of every pass of N' <= N rows: w(N') is rounded, so N' w(N') and the
     * tile count are not monotone in N'. Past tile_floats / 16 rows a tile is 16 columns
     * (tile_floats / N' < 16, and the own kernel's width is never below XENT_OWN_MIN_COLS),
     * so from there on every term grows with N': the rows beyond need only N itself (a
     * batch of 10^8 rows looped for 7 s of CPU before `ablate plan` could refuse it). */
    long flat = tile_floats / 16 + 1;
    int last = N < flat ? N : (int)flat;
    size_t most = 0;
    for (int n = 1; n <= last; n++) {
        size_t t = layout(n, C, V).total;
        most = t > most ? t : most;
    }
    size_t t = N > last ? layout(N, C, V).total : 0;
    return t > most ? t : most;
}

/* One tile's rows, for par_for: each row's work is its own (the same bits for every K). */
typedef struct {
    const float *tile; /* (N, n) the tile's logits */
    float *exps, *row_max, *row_sum, *target, *factor;
    int32_t *arg;
    const int32_t *targets;
    int V, v0, n, t, tiles;
} FoldJob;

static void fold_rows(void *ctx, size_t r0, size_t r1, int chunk) {
    const FoldJob *t = ctx;
    (void)chunk;
    for (size_t r = r0; r < r1; r++) {
        const float *l = t->tile + r * (size_t)t->n;
        float *e = t->exps + r * (size_t)t->V + t->v0, mo = t->row_max[r], tm, st;
        /* Under the running maximum in one pass; where this tile raises it (the first
         * tile, and a few later ones: a row's largest logits are mostly among the first
         * ids) once more under the new one, as two passes (max, then exp) did: the same
         * bits either way, one read of the tile instead of two for most tiles. */
        if (mo == -INFINITY) {
            tm = row_max_lanes(l, t->n);
            st = exp_store_lanes(e, l, t->n, tm);
        } else {
            st = exp_store_max_lanes(e, l, t->n, mo, &tm);
            if (tm > mo) st = exp_store_lanes(e, l, t->n, tm);
        }
        if (tm > mo) {
            int j = 0;
            while (l[j] != tm)
                j++;
            t->arg[r] = t->v0 + j;
        }
        int y = t->targets[r];
        if (y >= t->v0 && y < t->v0 + t->n) t->target[r] = l[y - t->v0];
        float mn = tm > mo ? tm : mo;
        /* one tile: s = 0 + st, the untiled sum exactly */
        t->row_sum[r] = (t->row_sum[r] != 0.0f ? t->row_sum[r] * exp_nonpos(mo - mn) : 0.0f) + st;
        t->row_max[r] = mn;
        t->factor[r * (size_t)t->tiles + (size_t)t->t] = mn; /* the maximum this tile is under */
    }
}

float xent_forward(float *exps, float *row_max, float *row_sum, const float *X, const float *W,
                   const float *Wt, int N, int C, int V, const int32_t *targets, long *correct,
                   float *scratch) {
    Layout ly = layout(N, C, V);
    int32_t *arg = (int32_t *)(scratch + ly.arg); /* each row's first argmax so far */
    float *target = scratch + ly.target, *factor = scratch + ly.factor, *tile = scratch + ly.tile;
    for (int r = 0; r < N; r++) {
        row_max[r] = -INFINITY;
        row_sum[r] = 0.0f;
        arg[r] = 0;
    }
    for (int t = 0, v0 = 0; v0 < V; t++, v0 += ly.w) {
        int n = V - v0 < ly.w ? V - v0 : ly.w;
        if (Wt)
            gemm(0, 0, N, n, C, 1.0f, X, C, Wt + v0, V, 0.0f, tile, n);
        else
            gemm(0, 1, N, n, C, 1.0f, X, C, W + (size_t)v0 * C, C, 0.0f, tile, n);
        /* the tile is fresh in cache: fold it into each row's maximum and sum */
        FoldJob job = {.tile = tile,
                       .exps = exps,
                       .row_max = row_max,
                       .row_sum = row_sum,
                       .target = target,
                       .factor = factor,
                       .arg = arg,
                       .targets = targets,
                       .V = V,
                       .v0 = v0,
                       .n = n,
                       .t = t,
                       .tiles = ly.tiles};
        par_for((size_t)N, par_grain((size_t)n * 4, 1), fold_rows, &job);
    }
    double loss = 0.0;
    long hits = 0;
    for (int r = 0; r < N; r++) {
        hits += arg[r] == targets[r];
        loss += (double)logf(row_sum[r]) - (double)(target[r] - row_max[r]);
        /* a tile's exps are under the maximum of the tiles up to it: the factor turns them
         * into probabilities (one tile: 1 / sum, the untiled normalization) */
        float inv = 1.0f / row_sum[r], *f = factor + (size_t)r * ly.tiles;
        for (int t = 0; t < ly.tiles; t++)
            f[t] = exp_nonpos(f[t] - row_max[r]) * inv;
    }
    if (correct) *correct = hits;
    return (float)(loss / N);
}

/* Rows of the backward's N x C sides, for par_for. */
typedef struct {
    float *dX, *xs;
    const float *prod, *X, *factor;
    int C, t, tiles;
    float alpha;
} RowsJob;

/* dX += alpha f_r (E_t W_t)[r] (the first tile overwrites), and xs[r] = alpha f_r X[r]. */
static void scale_rows(void *ctx, size_t r0, size_t r1, int chunk) {
    const RowsJob *j = ctx;
    (void)chunk;
    for (size_t r = r0; r < r1; r++) {
        float f = j->alpha * j->factor[r * (size_t)j->tiles + (size_t)j->t];
        float *dx = j->dX + r * (size_t)j->C, *xs = j->xs + r * (size_t)j->C;
        const float *p = j->prod + r * (size_t)j->C, *x = j->X + r * (size_t)j->C;
        for (int k = 0; k < j->C; k++) {
            dx[k] = (j->t ? dx[k] : 0.0f) + f * p[k];
            xs[k] = f * x[k];
        }
    }
}

void xent_backward(float *dX, float *dW, const float *exps, const int32_t *targets, const float *X,
                   const float *W, int N, int C, int V, float alpha, float *scratch) {
    Layout ly = layout(N, C, V);
    const float *factor = scratch + ly.factor;
    float *xs = scratch + ly.xs, *prod = scratch + ly.prod;
    for (int t = 0, v0 = 0; v0 < V; t++, v0 += ly.w) {
        int n = V - v0 < ly.w ? V - v0 : ly.w;
        /* the softmax of tile t is diag(f_t) E_t: dX += alpha diag(f_t) (E_t W_t), dW_t +=
         * alpha E_t^T (diag(f_t) X) */
        gemm(0, 0, N, C, n, 1.0f, exps + v0, V, W + (size_t)v0 * C, C, 0.0f, prod, C);
        RowsJob job = {.dX = dX,
                       .xs = xs,
                       .prod = prod,
                       .X = X,
                       .factor = factor,
                       .C = C,
                       .t = t,
                       .tiles = ly.tiles,
                       .alpha = alpha};
        /* a row moves 5 C floats: dX read and written, the product and X read, xs written */
        par_for((size_t)N, par_grain((size_t)C * 5 * PAR_COPY_WORK, 1), scale_rows, &job);
        gemm(1, 0, n, C, N, 1.0f, exps + v0, V, xs, C, 1.0f, dW + (size_t)v0 * C, C);
    }
    /* minus the one-hot target: dX[r] -= alpha W[y_r], dW[y_r] -= alpha X[r], rows in order */
    for (int r = 0; r < N; r++) {
        const float *wy = W + (size_t)targets[r] * C, *x = X + (size_t)r * C;
        float *dx = dX + (size_t)r * C, *dwy = dW + (size_t)targets[r] * C;
        for (int k = 0; k < C; k++) {
            dx[k] -= alpha * wy[k];
            dwy[k] -= alpha * x[k];
        }
    }
}
