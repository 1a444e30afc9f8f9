/* Causal scaled dot-product attention, softmax(q k^T / sqrt(hd)) v, over "lanes".
 *
 * Every scalar operation of the textbook algorithm is one ATTN_LANES-wide vector operation,
 * whatever T and head_dim are, in one of two layouts of a per-pair (T, hd) tensor X (pair
 * p = b*H + h, one (batch row, head)); attn_by_position(pairs, T, hd) picks it for a pass:
 *
 *  - pair lanes: ATTN_LANES pairs side by side: pair p lives in group g = p / ATTN_LANES,
 *    lane j = p % ATTN_LANES, X[g][t][i][j]. At the shapes of ablation studies (T = 16,
 *    head_dim = 8) a kernel per pair spends its time on loop overhead, transposes and
 *    horizontal reductions instead; here nothing is reduced across lanes. A group costs the
 *    same whether its lanes hold pairs or padding.
 *  - position lanes, when pairs are too few to fill the groups (study A's book GPT at batch 2
 *    and 1 head: 2 of 16 lanes, 11x the attention time of 8 heads), or the context is long
 *    enough for a pair's keys in L1 to pay for the diagonal blocks: ATTN_LANES consecutive
 *    positions of one pair side by side, X[p][t / ATTN_LANES][i][t % ATTN_LANES] with T
 *    rounded up to whole blocks (attn_padded). Query rows are lanes (scores, softmax, y, dq);
 *    keys and values are read one scalar at a time (broadcast); dk and dv have key positions
 *    as lanes, from the score matrix transposed a column block at a time. Its only waste is
 *    the masked upper half of each diagonal (16 x 16) block.
 *
 * Both layouts compute every float with the same chain of operations (a masked entry adds
 * an exact zero), so a pair's results do not depend on the layout nor on which pairs share
 * its group. Buffers are 64-byte aligned and sized by attn_tile_floats (width T: scores).
 * Lanes past the last real pair or position must hold finite values: they are computed and
 * ignored. */
#ifndef ABLATE_MODEL_ATTENTION_H
#define ABLATE_MODEL_ATTENTION_H

#include <stddef.h>

#define ATTN_LANES 16

/* Groups needed for `pairs` (batch, head) pairs in pair lanes. */
static inline int attn_groups(int pairs) {
    return (pairs + ATTN_LANES - 1) / ATTN_LANES;
}

/* T rounded up to whole position blocks. */
static inline int attn_padded(int T) {
    return (T + ATTN_LANES - 1) / ATTN_LANES * ATTN_LANES;
}

/* 1 if a pass of `pairs` pairs over T positions, heads of hd, uses position lanes. Pair-lane
 * groups compute G * ATTN_LANES pairs' T (T + 1) / 2 lane-steps (a query row against a key,
 * in one lane), position lanes every block's ATTN_LANES rows against the keys up to the
 * block's end. Position lanes when they compute fewer; and, from a head dim of 16, up to 1.25x
 * as many: a pair's keys and values (T hd floats) stay in the L1 cache, where a group's
 * (ATTN_LANES T hd) stream from L2 for every query row (at context 128, full groups ran at
 * 50 GFLOP/s and position lanes at 75-106 on an AVX-512 core; at context 64 and head dim 8,
 * pair lanes 61, position lanes 51: the softmax's cost per score weighs more there). */
static inline int attn_by_position(int pairs, int T, int hd) {
    double by_pair = (double)attn_groups(pairs) * ATTN_LANES * T * (T + 1) / 2, by_pos = 0;
    for (int t0 = 0; t0 < T; t0 += ATTN_LANES)
        by_pos += (double)pairs * ATTN_LANES * (t0 + ATTN_LANES < T ? t0 + ATTN_LANES : T);
    return by_pos < by_pair || (hd >= 16 && by_pos < 1.25 * by_pair);
}

/* Floats of a (T, hd) lane tensor for any pass of up to `pairs` pairs over up to T positions,
 * whichever layout it uses (a (T, T) score tensor: hd = T). */
static inline size_t attn_tile_floats(int pairs, int T, int hd) {
    size_t by_pair = (size_t)attn_groups(pairs) * ATTN_LANES * T * hd;
    size_t by_pos = (size_t)pairs * attn_padded(T) * hd;
    return by_pair > by_pos ? by_pair : by_pos;
}

/* Offset in floats of element (t, i) of pair p in a pair-lane (T, hd) tensor. */
static inline size_t attn_lane_offset(int T, int hd, int p, int t, int i) {
    return (((size_t)(p / ATTN_LANES) * T + t) * hd + i) * ATTN_LANES + (size_t)(p % ATTN_LANES);
}

/* Offset in floats of element (t, i) of pair p in a (T, width) lane tensor in the layout
 * by_pos (attn_by_position of the pass): width = hd for q, k, v, y and their gradients,
 * width = T for the scores, element (t, s). */
static inline size_t attn_offset(int by_pos, int T, int width, int p, int t, int i) {
    if (!by_pos) return attn_lane_offset(T, width, p, t, i);
    return (((size_t)p * attn_padded(T) / ATTN_LANES + (size_t)(t / ATTN_LANES)) * width + i) *
               ATTN_LANES +
           (size_t)(t % ATTN_LANES);
}

/* Rows -> lanes: src + (b*T + t)*stride + hd*(h / rep) holds head h's (hd) vector of batch row
 * b at position t, for pair p = b*H + h < B*H; rep > 1 shares a key/value head among rep
 * query heads (GQA). Lanes past the last pair get pair 0's values, lanes past the last
 * position position 0's: finite, never read back. */
void attn_to_lanes(float *dst, const float *src, int B, int T, int H, int hd, size_t stride,
                   int rep);
/* Lanes -> rows, the reverse (overwrites): a shared head receives the sum of its rep lanes. */
void attn_from_lanes(float *dst, const float *src, int B, int T, int H, int hd, size_t stride,
                     int rep);

/* y (lanes of (T,hd)) = P v, att (lanes of (T,T)) = P = causal softmax of q k^T / sqrt(hd),
 * for `pairs` pairs. Row t of P holds keys s <= t; entries s > t are never read (pair lanes
 * leave them untouched, position lanes write zeros in the diagonal blocks). */
void attention_forward(float *y, float *att, const float *q, const float *k, const float *v,
                       int pairs, int T, int hd);

/* dq, dk, dv (overwritten, same layout as q) from dy and the forward's q, k, v, att.
 * att is consumed: overwritten with the score gradients. scratch: PAR_MAX_THREADS*T*ATTN_LANES
 * floats (T*ATTN_LANES for each par_for chunk: the groups or pairs run on --blas-threads
 * threads). */
void attention_backward(float *dq, float *dk, float *dv, const float *dy, float *att,
                        const float *q, const float *k, const float *v, int pairs, int T, int hd,
                        float *scratch);

/* One query row against cached keys and values (generation): for each query head h, y[h] =
 * softmax(q[h] . K[g][s] / sqrt(hd) over s < n) V[g] with g = h / (H / KV). q: (H, hd) rows,
 * K, V: (KV, cap, hd), y: (H, hd), scores: n floats of scratch. */
void attention_cached(float *y, const float *q, const float *K, const float *V, int H, int KV,
                      int cap, int n, int hd, float *scores);

/* Adds to entropy[p % H], for every pair p < pairs, the entropy (nats) of each of its
 * attention rows: summed over query positions and over the batch. att: the forward's, heads
 * of hd. */
void attention_entropy(double *entropy, const float *att, int pairs, int H, int T, int hd);

#endif
