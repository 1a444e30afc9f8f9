/* Causal scaled dot-product attention, softmax(q k^T / sqrt(hd)) v, over "lanes".
 *
 * ATTN_LANES (batch, head) pairs are computed side by side: pair p = b*H + h lives in group
 * g = p / ATTN_LANES, lane j = p % ATTN_LANES, and a per-pair (T, hd) tensor X is stored as
 * X[g][t][i][j]. Every scalar operation of the textbook algorithm is then one ATTN_LANES-wide
 * vector operation, whatever T and head_dim are. At the shapes of ablation studies (T = 16,
 * head_dim = 8) a kernel per pair spends its time on loop overhead, transposes and
 * horizontal reductions instead; here nothing is reduced across lanes, and a pair's result
 * does not depend on which pairs share its group.
 *
 * Buffers are 64-byte aligned; G groups of (T, hd) "lane tiles" are G*T*hd*ATTN_LANES floats.
 * A group's lanes past the last real pair must hold finite values: they are computed and
 * ignored. */
#ifndef ABLATE_MODEL_ATTENTION_H
#define ABLATE_MODEL_ATTENTION_H

#include <stddef.h>

#define ATTN_LANES 16

/* Groups needed for `pairs` (batch, head) pairs. */
static inline int attn_groups(int pairs) {
    return (pairs + ATTN_LANES - 1) / ATTN_LANES;
}

/* Offset in floats of element (t, i) of pair p in a lane-layout (T, hd) tensor. */
static inline size_t attn_lane_offset(int T, int hd, int p, int t, int i) {
    return (((size_t)(p / ATTN_LANES) * T + t) * hd + i) * ATTN_LANES + (size_t)(p % ATTN_LANES);
}

/* Rows -> lanes: src + (b*T + t)*stride + hd*(h / rep) holds head h's (hd) vector of batch row
 * b at position t, for pair p = b*H + h < B*H; rep > 1 shares a key/value head among rep
 * query heads (GQA). Lanes past the last pair get pair 0's values: finite, never read back. */
void attn_to_lanes(float *dst, const float *src, int B, int T, int H, int hd, size_t stride,
                   int rep);
/* Lanes -> rows, the reverse (overwrites): a shared head receives the sum of its rep lanes. */
void attn_from_lanes(float *dst, const float *src, int B, int T, int H, int hd, size_t stride,
                     int rep);

/* y (G lanes of (T,hd)) = P v, att (G lanes of (T,T)) = P = causal softmax of q k^T / sqrt(hd).
 * Row t of P holds keys s <= t; entries s > t are left untouched and never read. */
void attention_forward(float *y, float *att, const float *q, const float *k, const float *v, int G,
                       int T, int hd);

/* dq, dk, dv (overwritten, same layout as q) from dy and the forward's q, k, v, att.
 * att is consumed: overwritten with the score gradients. scratch: PAR_MAX_THREADS*T*ATTN_LANES
 * floats (T*ATTN_LANES for each par_for chunk: the groups run on --blas-threads threads). */
void attention_backward(float *dq, float *dk, float *dv, const float *dy, float *att,
                        const float *q, const float *k, const float *v, int G, int T, int hd,
                        float *scratch);

/* One query row against cached keys and values (generation): for each query head h, y[h] =
 * softmax(q[h] . K[g][s] / sqrt(hd) over s < n) V[g] with g = h / (H / KV). q: (H, hd) rows,
 * K, V: (KV, cap, hd), y: (H, hd), scores: n floats of scratch. */
void attention_cached(float *y, const float *q, const float *K, const float *V, int H, int KV,
                      int cap, int n, int hd, float *scores);

/* Adds to entropy[p % H], for every pair p < pairs, the entropy (nats) of each of its
 * attention rows: summed over query positions and over the batch. */
void attention_entropy(double *entropy, const float *att, int pairs, int H, int T);

#endif
