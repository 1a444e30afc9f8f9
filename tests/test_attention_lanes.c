/* The attention's lane layouts (src/model/attention.h): attn_to_lanes and attn_from_lanes
 * against the layouts' definition (attn_offset), element by element, over shapes that take
 * every path (pair lanes: 8-pair transposed blocks and single lanes, head dims that are and
 * are not multiples of 8, a last group with pad lanes; position lanes: a last partial block
 * of positions; both: shared key/value heads, rows wider than the heads). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/attention.h"
#include "test_util.h"

typedef struct {
    int B, T, H, hd, rep, extra; /* extra: floats of a row past the heads (qkv rows) */
} Shape;

static const Shape shapes[] = {
    {32, 16, 4, 8, 1, 64}, /* micro's q of a qkv row */
    {2, 5, 4, 8, 1, 0},
    {3, 4, 3, 16, 1, 5},
    {5, 3, 4, 12, 1, 0},
    {1, 7, 8, 8, 2, 3},
    {3, 2, 8, 16, 4, 0},
    {2, 3, 6, 4, 3, 0},
    {9, 2, 2, 24, 1, 8},
    /* head dims of 4, 12, 20: runs of 4 floats (T hd a multiple of 8, or not: the tail) */
    {32, 16, 8, 4, 1, 64}, /* micro at 8 heads */
    {4, 5, 8, 4, 2, 0},
    {16, 3, 2, 20, 1, 7},
    {8, 7, 4, 12, 4, 0},
    {1, 1, 1, 8, 1, 0},
#define FIRST_BY_POSITION 13
    /* position lanes (few pairs), from shapes[FIRST_BY_POSITION] on */
    {2, 40, 1, 8, 1, 64},
    {1, 33, 4, 16, 2, 3},
    {3, 24, 2, 12, 1, 0},
};

static size_t row_floats(const Shape *s) {
    return (size_t)(s->H / s->rep) * s->hd + (size_t)s->extra;
}

/* floats of the rows tensor, and of the lane tensor (whole groups) */
static size_t rows_total(const Shape *s) {
    return (size_t)s->B * s->T * row_floats(s);
}
static size_t lanes_total(const Shape *s) {
    return attn_tile_floats(s->B * s->H, s->T, s->hd);
}

/* where pair p's vector at position t starts in the rows */
static size_t row_at(const Shape *s, int p, int t) {
    return ((size_t)(p / s->H) * s->T + t) * row_floats(s) + (size_t)(p % s->H / s->rep) * s->hd;
}

static float *filled(size_t n, uint64_t seed) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(test_splitmix64(&seed) % 100003) - 50000.0f;
    return x;
}

TEST(to_lanes) {
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
        const Shape *s = &shapes[c];
        int pairs = s->B * s->H, by_pos = attn_by_position(pairs, s->T, s->hd);
        /* lanes past the last pair hold pair 0, past the last position position 0 */
        int lanes = by_pos ? pairs : attn_groups(pairs) * ATTN_LANES;
        int T = by_pos ? attn_padded(s->T) : s->T;
        CHECK(by_pos == (c >= FIRST_BY_POSITION)); /* the shapes are in the right list */
        float *src = filled(rows_total(s), c + 1), *dst = filled(lanes_total(s), 99);
        attn_to_lanes(dst, src, s->B, s->T, s->H, s->hd, row_floats(s), s->rep);
        int bad = 0;
        for (int p = 0; p < lanes; p++)
            for (int t = 0; t < T; t++)
                for (int i = 0; i < s->hd; i++) {
                    float want = src[row_at(s, p < pairs ? p : 0, t < s->T ? t : 0) + i];
                    bad += dst[attn_offset(by_pos, s->T, s->hd, p, t, i)] != want;
                }
        CHECK_MSG(bad == 0, "shape %zu: %d lane values differ", c, bad);
        free(src);
        free(dst);
    }
}

TEST(from_lanes) {
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
        const Shape *s = &shapes[c];
        int pairs = s->B * s->H, by_pos = attn_by_position(pairs, s->T, s->hd);
        size_t nrows = rows_total(s);
        float *lanes = filled(lanes_total(s), c + 7), *dst = filled(nrows, 5);
        float *want = malloc(nrows * sizeof(float));
        memcpy(want, dst, nrows * sizeof(float)); /* floats past the heads stay */
        for (int p = 0; p < pairs; p++) /* a shared head: the sum of its pairs, in order */
            for (int t = 0; t < s->T; t++)
                for (int i = 0; i < s->hd; i++) {
                    float x = lanes[attn_offset(by_pos, s->T, s->hd, p, t, i)];
                    float *w = &want[row_at(s, p, t) + i];
                    *w = p % s->H % s->rep == 0 ? x : *w + x;
                }
        attn_from_lanes(dst, lanes, s->B, s->T, s->H, s->hd, row_floats(s), s->rep);
        CHECK_MSG(memcmp(dst, want, nrows * sizeof(float)) == 0, "shape %zu differs", c);
        free(lanes);
        free(dst);
        free(want);
    }
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_attention_lanes");
}
