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

/* The scratch, in floats, for a pass of N rows: each row's argmax so far (int32) and target
 * logit (forward only), the factors (N, tiles) the backward needs, and then a lane: the tile
 * (forward) or two (N, C) matrices (backward). Lanes past the first are the caller's `more`. */
typedef struct {
    int w, tiles;
    size_t arg, target, factor, tile, xs, prod, lane, total;
} Layout;

static Layout layout(int N, int C, int V) {
    Layout l = {.w = xent_tile_cols(N, V)};
    l.tiles = (V + l.w - 1) / l.w;
    size_t n = (size_t)(N > 0 ? N : 0), nc = n * (size_t)C;
    l.arg = 0;
    l.target = n;
    l.factor = 2 * n;
    l.tile = l.xs = l.factor + n * (size_t)l.tiles;
    l.prod = l.xs + nc;
    size_t tile = n * (size_t)l.w;
    l.lane = tile > 2 * nc ? tile : 2 * nc;
    l.total = l.tile + l.lane;
    return l;
}

/* The largest of every pass of N' <= N rows: w(N') is rounded, so N' w(N') and the tile
 * count are not monotone in N'. */
static size_t most_floats(int N, int C, int V, int lane_only) {
    size_t most = 0;
    for (int n = 1; n <= N; n++) {
        Layout l = layout(n, C, V);
        size_t t = lane_only ? l.lane : l.total;
        most = t > most ? t : most;
    }
    return most;
}

size_t xent_scratch_floats(int N, int C, int V) {
    return most_floats(N, C, V, 0);
}

size_t xent_lane_floats(int N, int C, int V) {
    return most_floats(N, C, V, 1);
}

/* Tiles side by side: lane 0 in the scratch, lane c > 0 the caller's (xent.h). */
typedef struct {
    float *lane0;
    XentLanes more;
} Lanes;

static Lanes lanes_of(float *lane0, XentLanes more) {
    if (more.lanes < 1 || !more.more) more.lanes = 1;
    return (Lanes){lane0, more};
}

static float *lane_at(const Lanes *l, size_t c) {
    return c ? l->more.more + (c - 1) * l->more.lane_floats : l->lane0;
}

/* Runs fn over the tiles [t0, t0 + g) of a group, tile t0 + c in lane c, side by side on the
 * model's threads, each product on one OpenBLAS thread (gemm.h); a group of one keeps
 * OpenBLAS's threads for its products. */
static void group_products(size_t g, void (*fn)(void *, size_t, size_t, int), void *job) {
    if (g < 2) {
        fn(job, 0, g, 0);
        return;
    }
    int blas = gemm_blas_threads();
    gemm_set_blas_threads(1);
    par_for(g, 1, fn, job);
    gemm_set_blas_threads(blas);
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

/* The logits of a group's tiles, each into its lane. */
typedef struct {
    const float *X, *W, *Wt;
    int N, C, V, w, t0;
    Lanes lanes;
} LogitsJob;

static void tile_logits(void *ctx, size_t c0, size_t c1, int chunk) {
    const LogitsJob *j = ctx;
    (void)chunk;
    for (size_t c = c0; c < c1; c++) {
        int v0 = (j->t0 + (int)c) * j->w, n = j->V - v0 < j->w ? j->V - v0 : j->w;
        float *tile = lane_at(&j->lanes, c);
        if (j->Wt)
            gemm(0, 0, j->N, n, j->C, 1.0f, j->X, j->C, j->Wt + v0, j->V, 0.0f, tile, n);
        else
            gemm(0, 1, j->N, n, j->C, 1.0f, j->X, j->C, j->W + (size_t)v0 * j->C, j->C, 0.0f, tile,
                 n);
    }
}

float xent_forward(float *exps, float *row_max, float *row_sum, const float *X, const float *W,
                   const float *Wt, int N, int C, int V, const int32_t *targets, long *correct,
                   float *scratch, XentLanes more) {
    Layout ly = layout(N, C, V);
    int32_t *arg = (int32_t *)(scratch + ly.arg); /* each row's first argmax so far */
    float *target = scratch + ly.target, *factor = scratch + ly.factor;
    for (int r = 0; r < N; r++) {
        row_max[r] = -INFINITY;
        row_sum[r] = 0.0f;
        arg[r] = 0;
    }
    LogitsJob lj = {.X = X,
                    .W = W,
                    .Wt = Wt,
                    .N = N,
                    .C = C,
                    .V = V,
                    .w = ly.w,
                    .lanes = lanes_of(scratch + ly.tile, more)};
    int k = lj.lanes.more.lanes;
    for (int t0 = 0; t0 < ly.tiles; t0 += k) {
        int g = ly.tiles - t0 < k ? ly.tiles - t0 : k;
        lj.t0 = t0;
        group_products((size_t)g, tile_logits, &lj);
        /* then each tile folded into each row's maximum and sum, in tile order */
        for (int c = 0; c < g; c++) {
            int t = t0 + c, v0 = t * ly.w, n = V - v0 < ly.w ? V - v0 : ly.w;
            FoldJob job = {.tile = lane_at(&lj.lanes, (size_t)c),
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

/* dX += alpha f_r (E_t W_t)[r] (the first tile overwrites), and xs[r] = alpha f_r X[r]; either
 * side skipped when NULL. */
static void scale_rows(void *ctx, size_t r0, size_t r1, int chunk) {
    const RowsJob *j = ctx;
    (void)chunk;
    for (size_t r = r0; r < r1; r++) {
        float f = j->alpha * j->factor[r * (size_t)j->tiles + (size_t)j->t];
        float *dx = j->dX + r * (size_t)j->C, *xs = j->xs + r * (size_t)j->C;
        const float *p = j->prod + r * (size_t)j->C, *x = j->X + r * (size_t)j->C;
        if (j->dX && j->xs)
            for (int k = 0; k < j->C; k++) {
                dx[k] = (j->t ? dx[k] : 0.0f) + f * p[k];
                xs[k] = f * x[k];
            }
        else if (j->dX)
            for (int k = 0; k < j->C; k++)
                dx[k] = (j->t ? dx[k] : 0.0f) + f * p[k];
        else
            for (int k = 0; k < j->C; k++)
                xs[k] = f * x[k];
    }
}

/* Tile t's gradients. The softmax of tile t is diag(f_t) E_t: dX += alpha diag(f_t) (E_t W_t)
 * and dW_t += alpha E_t^T (diag(f_t) X). In lane c: xs, then prod = E_t W_t. */
typedef struct {
    float *dX, *dW;
    const float *exps, *X, *W, *factor;
    int N, C, V, w, tiles, t0;
    float alpha;
    Lanes lanes;
} GradsJob;

static RowsJob rows_job(const GradsJob *j, int t, float *xs) {
    return (RowsJob){.xs = xs,
                     .prod = xs + (size_t)j->N * j->C,
                     .X = j->X,
                     .factor = j->factor,
                     .C = j->C,
                     .t = t,
                     .tiles = j->tiles,
                     .alpha = j->alpha};
}

/* One tile alone: its product, dX and xs in one pass over the rows, dW_t. */
static void tile_grads_alone(const GradsJob *j, int t) {
    int v0 = t * j->w, n = j->V - v0 < j->w ? j->V - v0 : j->w, C = j->C;
    float *xs = lane_at(&j->lanes, 0);
    RowsJob r = rows_job(j, t, xs);
    r.dX = j->dX;
    gemm(0, 0, j->N, C, n, 1.0f, j->exps + v0, j->V, j->W + (size_t)v0 * C, C, 0.0f,
         (float *)r.prod, C);
    par_for((size_t)j->N, par_grain((size_t)C * 3, 1), scale_rows, &r);
    gemm(1, 0, n, C, j->N, 1.0f, j->exps + v0, j->V, xs, C, 1.0f, j->dW + (size_t)v0 * C, C);
}

/* Tiles side by side: each its product, xs and dW_t (rows of dW of its own); dX after. */
static void tile_grads(void *ctx, size_t c0, size_t c1, int chunk) {
    const GradsJob *j = ctx;
    (void)chunk;
    for (size_t c = c0; c < c1; c++) {
        int t = j->t0 + (int)c, v0 = t * j->w, n = j->V - v0 < j->w ? j->V - v0 : j->w, C = j->C;
        float *xs = lane_at(&j->lanes, c);
        RowsJob r = rows_job(j, t, xs);
        gemm(0, 0, j->N, C, n, 1.0f, j->exps + v0, j->V, j->W + (size_t)v0 * C, C, 0.0f,
             (float *)r.prod, C);
        scale_rows(&r, 0, (size_t)j->N, 0);
        gemm(1, 0, n, C, j->N, 1.0f, j->exps + v0, j->V, xs, C, 1.0f, j->dW + (size_t)v0 * C, C);
    }
}

void xent_backward(float *dX, float *dW, const float *exps, const int32_t *targets, const float *X,
                   const float *W, int N, int C, int V, float alpha, float *scratch,
                   XentLanes more) {
    Layout ly = layout(N, C, V);
    GradsJob j = {.dX = dX,
                  .dW = dW,
                  .exps = exps,
                  .X = X,
                  .W = W,
                  .factor = scratch + ly.factor,
                  .N = N,
                  .C = C,
                  .V = V,
                  .w = ly.w,
                  .tiles = ly.tiles,
                  .alpha = alpha,
                  .lanes = lanes_of(scratch + ly.xs, more)};
    int k = j.lanes.more.lanes;
    for (int t0 = 0; t0 < ly.tiles; t0 += k) {
        int g = ly.tiles - t0 < k ? ly.tiles - t0 : k;
        if (g == 1) {
            tile_grads_alone(&j, t0);
            continue;
        }
        j.t0 = t0;
        group_products((size_t)g, tile_grads, &j);
        for (int c = 0; c < g; c++) { /* dX in tile order: the same sums for every K */
            RowsJob r = rows_job(&j, t0 + c, lane_at(&j.lanes, (size_t)c));
            r.dX = dX;
            r.xs = NULL;
            par_for((size_t)N, par_grain((size_t)C * 2, 1), scale_rows, &r);
        }
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
