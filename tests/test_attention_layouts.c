/* The attention kernel (src/model/attention.h) in its two layouts: position lanes, which a
 * pass of too few (batch, head) pairs to fill the pair lanes uses, against
 *  - pair lanes on the same pairs (repeated to fill whole groups): the same bits, as the
 *    header promises (the goldens of tests/test_train_bits.c rest on it),
 *  - a double-precision textbook attention, forward and backward (both layouts),
 *  - central differences of that attention's forward (a gradient check of the backward),
 *  - itself on more threads (each piece's own scratch).
 * Rows in, rows out (attn_to_lanes / attn_from_lanes), over shapes with one or a few blocks of
 * positions, a last partial block, head dims under and over a vector, and shared key/value
 * heads. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/attention.h"
#include "model/par.h"
#include "test_util.h"

typedef struct {
    int B, T, H, hd, rep;
} Shape;

/* few pairs: every one takes position lanes (checked) */
static const Shape few[] = {
    {2, 40, 1, 8, 1},  /* two pairs, a last partial block */
    {1, 33, 4, 16, 2}, /* shared key/value heads, one position past two blocks */
    {3, 24, 2, 12, 1}, /* a head dim that is not a multiple of 8 */
    {1, 16, 1, 4, 1},  /* one pair, one whole block */
    {2, 48, 1, 32, 1}, /* study A's shape, smaller: 2 pairs, wide heads */
};

typedef struct {
    float *q, *k, *v, *dy;   /* rows: (B, T, H hd) for q and dy, (B, T, KV hd) for k and v */
    float *y, *dq, *dk, *dv; /* the kernel's results, rows */
} Io;

static size_t q_floats(const Shape *s) {
    return (size_t)s->B * s->T * s->H * s->hd;
}
static size_t kv_floats(const Shape *s) {
    return (size_t)s->B * s->T * (s->H / s->rep) * s->hd;
}

static float *lane_buf(size_t n) { /* NaN: a kernel reading a float it did not write shows */
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

static float *random_rows(size_t n, uint64_t seed) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)(test_splitmix64(&seed) % 20001) / 10000.0 - 1.0);
    return x;
}

static void io_inputs(Io *io, const Shape *s, uint64_t seed) {
    memset(io, 0, sizeof *io);
    io->q = random_rows(q_floats(s), seed);
    io->k = random_rows(kv_floats(s), seed + 1);
    io->v = random_rows(kv_floats(s), seed + 2);
    io->dy = random_rows(q_floats(s), seed + 3);
}

static void io_free(Io *io) {
    float *p[] = {io->q, io->k, io->v, io->dy, io->y, io->dq, io->dk, io->dv};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++)
        free(p[i]);
}

/* The kernel on io's rows, as the model runs it: into lanes, forward, backward, out. */
static void run_kernel(Io *io, const Shape *s) {
    int B = s->B, T = s->T, H = s->H, hd = s->hd, rep = s->rep, pairs = B * H;
    size_t tile = attn_tile_floats(pairs, T, hd), qs = (size_t)H * hd, ks = (size_t)H / rep * hd;
    float *q = lane_buf(tile), *k = lane_buf(tile), *v = lane_buf(tile), *dy = lane_buf(tile);
    float *y = lane_buf(tile), *dq = lane_buf(tile), *dk = lane_buf(tile), *dv = lane_buf(tile);
    float *att = lane_buf(attn_tile_floats(pairs, T, T));
    float *scratch = lane_buf((size_t)PAR_MAX_THREADS * T * ATTN_LANES);
    attn_to_lanes(q, io->q, B, T, H, hd, qs, 1);
    attn_to_lanes(k, io->k, B, T, H, hd, ks, rep);
    attn_to_lanes(v, io->v, B, T, H, hd, ks, rep);
    attn_to_lanes(dy, io->dy, B, T, H, hd, qs, 1);
    attention_forward(y, att, q, k, v, pairs, T, hd);
    attention_backward(dq, dk, dv, dy, att, q, k, v, pairs, T, hd, scratch);
    io->y = malloc(q_floats(s) * sizeof(float));
    io->dq = malloc(q_floats(s) * sizeof(float));
    io->dk = malloc(kv_floats(s) * sizeof(float));
    io->dv = malloc(kv_floats(s) * sizeof(float));
    attn_from_lanes(io->y, y, B, T, H, hd, qs, 1);
    attn_from_lanes(io->dq, dq, B, T, H, hd, qs, 1);
    attn_from_lanes(io->dk, dk, B, T, H, hd, ks, rep);
    attn_from_lanes(io->dv, dv, B, T, H, hd, ks, rep);
    float *p[] = {q, k, v, dy, y, dq, dk, dv, att, scratch};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++)
        free(p[i]);
}

/* The textbook attention in double: y, and (when dq is not NULL) dq, dk, dv of sum(y * dy). */
static void reference(const Shape *s, const float *qf, const float *kf, const float *vf,
                      const float *dyf, double *y, double *dq, double *dk, double *dv) {
    int T = s->T, H = s->H, hd = s->hd, KV = H / s->rep;
    double scale = 1.0 / sqrt((double)hd);
    double *P = malloc((size_t)T * T * sizeof(double)),
           *dS = malloc((size_t)T * T * sizeof(double));
    if (dq) {
        memset(dq, 0, q_floats(s) * sizeof(double));
        memset(dk, 0, kv_floats(s) * sizeof(double));
        memset(dv, 0, kv_floats(s) * sizeof(double));
    }
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < H; h++) {
            int g = h / s->rep;
#define QA(t, i) (((size_t)b * T + (t)) * H * hd + (size_t)h * hd + (i))
#define KA(t, i) (((size_t)b * T + (t)) * KV * hd + (size_t)g * hd + (i))
            for (int t = 0; t < T; t++) {
                double m = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    double d = 0;
                    for (int i = 0; i < hd; i++)
                        d += (double)qf[QA(t, i)] * kf[KA(u, i)];
                    P[t * T + u] = d * scale;
                    m = fmax(m, d * scale);
                }
                for (int u = 0; u <= t; u++)
                    sum += P[t * T + u] = exp(P[t * T + u] - m);
                for (int u = 0; u <= t; u++)
                    P[t * T + u] /= sum;
                for (int i = 0; i < hd; i++) {
                    double a = 0;
                    for (int u = 0; u <= t; u++)
                        a += P[t * T + u] * vf[KA(u, i)];
                    y[QA(t, i)] = a;
                }
            }
            if (!dq) continue;
            for (int t = 0; t < T; t++) {
                double dot = 0;
                for (int u = 0; u <= t; u++) {
                    double dp = 0;
                    for (int i = 0; i < hd; i++)
                        dp += (double)dyf[QA(t, i)] * vf[KA(u, i)];
                    dS[t * T + u] = dp;
                    dot += P[t * T + u] * dp;
                }
                for (int u = 0; u <= t; u++) {
                    dS[t * T + u] = P[t * T + u] * (dS[t * T + u] - dot) * scale;
                    for (int i = 0; i < hd; i++) {
                        dq[QA(t, i)] += dS[t * T + u] * kf[KA(u, i)];
                        dk[KA(u, i)] += dS[t * T + u] * qf[QA(t, i)];
                        dv[KA(u, i)] += P[t * T + u] * dyf[QA(t, i)];
                    }
                }
            }
#undef QA
#undef KA
        }
    free(P);
    free(dS);
}

/* how many of n floats differ from the reference by more than tol (1 + |ref|) */
static int far(const float *x, const double *ref, size_t n, double tol) {
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !(fabs((double)x[i] - ref[i]) <= tol * (1.0 + fabs(ref[i])));
    return bad;
}

TEST(shapes_take_position_lanes) {
    for (size_t c = 0; c < sizeof few / sizeof *few; c++)
        CHECK_MSG(attn_by_position(few[c].B * few[c].H, few[c].T, few[c].hd),
                  "shape %zu: pair lanes", c);
    /* full groups at short contexts never do (micro: context 16; context 32) */
    CHECK(!attn_by_position(16, 16, 8) && !attn_by_position(128, 16, 8));
    CHECK(!attn_by_position(32, 32, 32) && !attn_by_position(64, 64, 8));
    /* study A's book (context 128, width 128) at batch 2: heads 1, 2, 4 for their few pairs,
     * 8 (16 pairs, hd 16) for the locality; hd 8 at 16 pairs stays in pair lanes */
    CHECK(attn_by_position(2, 128, 128) && attn_by_position(4, 128, 64));
    CHECK(attn_by_position(8, 128, 32) && attn_by_position(16, 128, 16));
    CHECK(!attn_by_position(16, 128, 8) && attn_by_position(18, 128, 8));
}

/* Each pair's results do not depend on the layout: the shape's pairs in position lanes, and
 * the same pairs repeated 16 times over the batch (whole groups: pair lanes). */
TEST(position_lanes_equal_pair_lanes) {
    for (size_t c = 0; c < sizeof few / sizeof *few; c++) {
        const Shape *s = &few[c];
        Shape big = *s;
        big.B = s->B * ATTN_LANES;
        CHECK(!attn_by_position(big.B * big.H, big.T, big.hd));
        Io a, z;
        io_inputs(&a, s, 100 + c);
        memset(&z, 0, sizeof z);
        float **in_a[] = {&a.q, &a.k, &a.v, &a.dy}, **in_z[] = {&z.q, &z.k, &z.v, &z.dy};
        for (int x = 0; x < 4; x++) { /* batch row b of big is row b % B of the shape */
            size_t n = x == 1 || x == 2 ? kv_floats(s) : q_floats(s);
            *in_z[x] = malloc(n * ATTN_LANES * sizeof(float));
            for (int r = 0; r < ATTN_LANES; r++)
                memcpy(*in_z[x] + n * r, *in_a[x], n * sizeof(float));
        }
        run_kernel(&a, s);
        run_kernel(&z, &big);
        /* the shape's own rows: big's first B batch rows */
        CHECK_MSG(memcmp(a.y, z.y, q_floats(s) * sizeof(float)) == 0, "shape %zu: y differs", c);
        CHECK_MSG(memcmp(a.dq, z.dq, q_floats(s) * sizeof(float)) == 0, "shape %zu: dq differs", c);
        CHECK_MSG(memcmp(a.dk, z.dk, kv_floats(s) * sizeof(float)) == 0, "shape %zu: dk differs",
                  c);
        CHECK_MSG(memcmp(a.dv, z.dv, kv_floats(s) * sizeof(float)) == 0, "shape %zu: dv differs",
                  c);
        io_free(&a);
        io_free(&z);
    }
}

/* Both layouts against the double-precision attention, forward and backward. */
TEST(against_reference) {
    for (int layout = 0; layout < 2; layout++)
        for (size_t c = 0; c < sizeof few / sizeof *few; c++) {
            Shape s = few[c];
            if (layout) s.B *= ATTN_LANES; /* pair lanes */
            Io io;
            io_inputs(&io, &s, 200 + c);
            run_kernel(&io, &s);
            size_t nq = q_floats(&s), nk = kv_floats(&s);
            double *y = malloc(nq * sizeof(double)), *dq = malloc(nq * sizeof(double));
            double *dk = malloc(nk * sizeof(double)), *dv = malloc(nk * sizeof(double));
            reference(&s, io.q, io.k, io.v, io.dy, y, dq, dk, dv);
            int by = far(io.y, y, nq, 1e-5), bq = far(io.dq, dq, nq, 1e-5);
            int bk = far(io.dk, dk, nk, 1e-5), bv = far(io.dv, dv, nk, 1e-5);
            CHECK_MSG(by + bq + bk + bv == 0,
                      "%s lanes, shape %zu: y %d, dq %d, dk %d, dv %d values off the reference",
                      layout ? "pair" : "position", c, by, bq, bk, bv);
            free(y);
            free(dq);
            free(dk);
            free(dv);
            io_free(&io);
        }
}

/* The position-lane backward against central differences of the double forward's
 * sum(y * dy), at every tenth input float of q, k and v. */
TEST(gradient_check) {
    for (size_t c = 0; c < sizeof few / sizeof *few; c++) {
        const Shape *s = &few[c];
        Io io;
        io_inputs(&io, s, 300 + c);
        run_kernel(&io, s);
        size_t nq = q_floats(s), nk = kv_floats(s);
        double *y = malloc(nq * sizeof(double));
        float *in[] = {io.q, io.k, io.v}, *grad[] = {io.dq, io.dk, io.dv};
        size_t n[] = {nq, nk, nk};
        int bad = 0, checked = 0;
        for (int x = 0; x < 3; x++)
            for (size_t i = c % 10; i < n[x]; i += 10) {
                const float h = 1.0f / 64, x0 = in[x][i]; /* exact in float: x0 +- h */
                double f[2];
                for (int side = 0; side < 2; side++) {
                    in[x][i] = x0 + (side ? -h : h);
                    reference(s, io.q, io.k, io.v, io.dy, y, NULL, NULL, NULL);
                    f[side] = 0;
                    for (size_t r = 0; r < nq; r++)
                        f[side] += y[r] * io.dy[r];
                }
                in[x][i] = x0;
                double num = (f[0] - f[1]) / (2.0 * h);
                bad += !(fabs(num - grad[x][i]) <= 2e-3 * (1.0 + fabs(num)));
                checked++;
            }
        CHECK_MSG(bad == 0, "shape %zu: %d of %d gradients off their central differences", c, bad,
                  checked);
        free(y);
        io_free(&io);
    }
}

/* Pairs cut into pieces on 2 and 3 threads, each with its own scratch: the same bytes. */
TEST(threads) {
    const Shape *s = &few[2];
    Io one;
    io_inputs(&one, s, 400);
    run_kernel(&one, s);
    par_set_min_work(1);
    for (int k = 2; k <= 3; k++) {
        par_set_threads(k);
        Io many;
        io_inputs(&many, s, 400);
        run_kernel(&many, s);
        CHECK_MSG(memcmp(one.y, many.y, q_floats(s) * sizeof(float)) == 0 &&
                      memcmp(one.dq, many.dq, q_floats(s) * sizeof(float)) == 0 &&
                      memcmp(one.dk, many.dk, kv_floats(s) * sizeof(float)) == 0 &&
                      memcmp(one.dv, many.dv, kv_floats(s) * sizeof(float)) == 0,
                  "%d threads differ", k);
        io_free(&many);
    }
    par_set_threads(1);
    io_free(&one);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_attention_layouts");
}
