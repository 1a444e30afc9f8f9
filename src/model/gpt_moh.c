#include "gpt_internal.h"

#include <math.h>

/* ------------------------------------------------------------------ mixture of heads */

/* The head gates of the pass's rows (gpt.h, "moh") from the attention input x into s->mz,
 * s->mp, s->mg; then attg = the heads of atty times their gates. The balance loss into p->aux
 * (training) and the statistics into p->stats[l]. */
void moh_forward(const Pass *p, const LayerView *L, const LayerActs *s, int l, const float *x) {
    const ModelConfig *c = &p->m->cfg;
    int N = p->B * p->T, C = c->d_model, H = c->n_head, hs = c->moh_shared, R = H - hs;
    int Z = H + 2, K = c->moh_top_k, hd = C / H;
    router_logits(s->mz, x, L->w.moh_w, N, C, Z);
    double f[MODEL_MAX_HEADS] = {0}, P[MODEL_MAX_HEADS] = {0}, ent = 0;
    for (int t = 0; t < N; t++) {
        const float *z = s->mz + (size_t)t * Z;
        float *pp = s->mp + (size_t)t * Z, *g = s->mg + (size_t)t * H;
        softmax_exact(pp, z, hs);
        softmax_exact(pp + hs, z + hs, R);
        softmax_exact(pp + H, z + H, 2);
        int chosen[MODEL_MAX_HEADS];
        top_k_mask(chosen, z + hs, R, K);
        for (int h = 0; h < hs; h++)
            g[h] = pp[H] * pp[h];
        for (int i = 0; i < R; i++) {
            float pr = pp[hs + i];
            g[hs + i] = chosen[i] ? pp[H + 1] * pr : 0.0f;
            f[i] += chosen[i] / (double)N;
            P[i] += pr / (double)N;
            ent -= pr > 0 ? pr * log((double)pr) / N : 0;
        }
        const float *y = s->atty + (size_t)t * C;
        float *o = s->attg + (size_t)t * C;
        for (int h = 0; h < H; h++)
            for (int d = 0; d < hd; d++)
                o[h * hd + d] = g[h] * y[h * hd + d];
    }
    if (p->k) return; /* generation has no losses nor statistics */
    double bal = 0;
    for (int i = 0; i < R; i++)
        bal += f[i] * P[i];
    bal *= c->moh_balance;
    if (p->aux) *p->aux += (float)bal;
    if (!p->stats) return;
    LayerStats *st = &p->stats[l];
    for (int h = 0; h < H; h++)
        st->head_frac[h] = h < hs ? 1.0 : f[h - hs];
    st->moh_entropy = ent;
    st->moh_balance = bal;
}

/* On entry a->d_atty holds dL/d attg; on exit dL/d atty, with dL/d the router logits in
 * a->d_mz (the balance loss's included). */
void moh_backward(const Pass *p, const LayerActs *s) {
    const ModelConfig *c = &p->m->cfg;
    GptActs *a = p->a;
    int N = p->B * p->T, C = c->d_model, H = c->n_head, hs = c->moh_shared, R = H - hs;
    int Z = H + 2, K = c->moh_top_k, hd = C / H;
    double f[MODEL_MAX_HEADS] = {0};
    int chosen[MODEL_MAX_HEADS];
    for (int t = 0; t < N; t++) {
        top_k_mask(chosen, s->mz + (size_t)t * Z + hs, R, K);
        for (int i = 0; i < R; i++)
            f[i] += chosen[i] / (double)N;
    }
    for (int t = 0; t < N; t++) {
        const float *pp = s->mp + (size_t)t * Z, *g = s->mg + (size_t)t * H;
        const float *y = s->atty + (size_t)t * C;
        float *dy = a->d_atty + (size_t)t * C, dg[MODEL_MAX_HEADS];
        for (int h = 0; h < H; h++) { /* g_h y_h: d g_h = dy_h . y_h, d y_h = g_h dy_h */
            float acc = 0.0f;
            for (int d = 0; d < hd; d++) {
                acc += dy[h * hd + d] * y[h * hd + d];
                dy[h * hd + d] *= g[h];
            }
            dg[h] = acc;
        }
        top_k_mask(chosen, s->mz + (size_t)t * Z + hs, R, K);
        float dp[MODEL_MAX_HEADS + 2], da[2] = {0.0f, 0.0f};
        for (int h = 0; h < hs; h++) { /* g_h = a_0 ps_h */
            da[0] += dg[h] * pp[h];
            dp[h] = pp[H] * dg[h];
        }
        for (int i = 0; i < R; i++) { /* g = a_1 pr_i if chosen; balance: d P_i / d pr_ti = 1/N */
            int h = hs + i;
            if (chosen[i]) da[1] += dg[h] * pp[h];
            dp[h] = (chosen[i] ? pp[H + 1] * dg[h] : 0.0f) + (float)(c->moh_balance * f[i] / N);
        }
        float *dz = a->d_mz + (size_t)t * Z;
        softmax_exact_backward(dz, dp, pp, hs);
        softmax_exact_backward(dz + hs, dp + hs, pp + hs, R);
        softmax_exact_backward(dz + H, da, pp + H, 2);
    }
}
