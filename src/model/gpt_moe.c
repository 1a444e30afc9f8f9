#include "gpt_internal.h"

#include <math.h>
#include <string.h>

#include "gemm.h"
#include "layers.h"

/* ------------------------------------------------------------------ routers */

/* The router in plain loops, every expert's entries computed in the same order (double
 * sums): a BLAS kernel or a vectorized exp rounds by lane position, so two experts with equal
 * router rows could get different logits, probabilities or gradients; the tie would then not
 * go to the lower index, and the rows would drift apart by round-off (k-th and (k+1)-th
 * choices then decided by noise). Small: N E C multiply-adds against the experts' N k 8 C^2. */
void router_logits(float *z, const float *x, const float *w, int N, int C, int E) {
    for (int t = 0; t < N; t++) {
        const float *xt = x + (size_t)t * C;
        for (int e = 0; e < E; e++) {
            const float *we = w + (size_t)e * C;
            double acc = 0;
            for (int i = 0; i < C; i++)
                acc += (double)xt[i] * we[i];
            z[(size_t)t * E + e] = (float)acc;
        }
    }
}

/* p (n) = softmax(z (n)) in double: equal logits give equal probabilities. */
void softmax_exact(float *p, const float *z, int n) {
    double mx = z[0], sum = 0;
    for (int e = 1; e < n; e++)
        mx = z[e] > mx ? z[e] : mx;
    for (int e = 0; e < n; e++)
        sum += exp((double)z[e] - mx);
    for (int e = 0; e < n; e++)
        p[e] = (float)(exp((double)z[e] - mx) / sum);
}

/* dz (n) = d/dz of softmax given dp (n) and the probabilities p. */
void softmax_exact_backward(float *dz, const float *dp, const float *p, int n) {
    double pdp = 0;
    for (int e = 0; e < n; e++)
        pdp += (double)p[e] * dp[e];
    for (int e = 0; e < n; e++)
        dz[e] = (float)(p[e] * (dp[e] - pdp));
}

/* chosen[i] (n) = whether i is among the k largest z (ties: the lower index). */
void top_k_mask(int *chosen, const float *z, int n, int k) {
    for (int i = 0; i < n; i++)
        chosen[i] = 0;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!chosen[i] && (best < 0 || z[i] > z[best])) best = i;
        chosen[best] = 1;
    }
}

/* dW (E,C) += dz^T x, each entry summed over the tokens in order (see router_logits), in
 * acc (E C doubles of scratch) so that the rows are read in memory order. */
void router_weight_backward(float *dw, double *acc, const float *dz, const float *x, int N, int C,
                            int E) {
    memset(acc, 0, (size_t)E * C * sizeof *acc);
    for (int t = 0; t < N; t++) {
        const float *xt = x + (size_t)t * C;
        for (int e = 0; e < E; e++) {
            double g = dz[(size_t)t * E + e], *ae = acc + (size_t)e * C;
            for (int i = 0; i < C; i++)
                ae[i] += g * xt[i];
        }
    }
    for (size_t i = 0; i < (size_t)E * C; i++)
        dw[i] += (float)acc[i];
}

/* ------------------------------------------------------------------ mixture of experts */

/* The router's decisions for the pass's N tokens (gpt.h, "moe"): s->sel and s->gate per
 * token, the packed rows (s->row, s->asg, s->eoff) expert by expert, each expert's rows in
 * the order (choice j, token). Returns the number of packed rows. */
static int moe_route(const Pass *p, const LayerActs *s, int N) {
    const ModelConfig *c = &p->m->cfg;
    int E = c->moe_experts, K = c->moe_top_k;
    for (int t = 0; t < N; t++) {
        const float *pr = s->rprob + (size_t)t * E, *z = s->rlog + (size_t)t * E;
        int32_t *sel = s->sel + (size_t)t * K;
        float *g = s->gate + (size_t)t * K, sum = 0.0f;
        for (int j = 0; j < K; j++) {
            /* by the logits, the order of p: a vectorized exp may round equal logits to
             * unequal probabilities; strict >: ties go to the lower index */
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++)
                    taken |= sel[i] == e;
                if (!taken && (best < 0 || z[e] > z[best])) best = e;
            }
            sel[j] = best;
            g[j] = pr[best];
            sum += pr[best];
        }
        if (K > 1)
            for (int j = 0; j < K; j++)
                g[j] /= sum;
    }
    /* counting sort by expert; the capacity keeps each expert's first assignments */
    int count[MODEL_MAX_EXPERTS] = {0}, fill[MODEL_MAX_EXPERTS] = {0};
    for (int i = 0; i < N * K; i++)
        count[s->sel[i]]++;
    int cap = model_moe_capacity(c, N);
    s->eoff[0] = 0;
    for (int e = 0; e < E; e++)
        s->eoff[e + 1] = s->eoff[e] + (count[e] < cap ? count[e] : cap);
    for (int j = 0; j < K; j++)
        for (int t = 0; t < N; t++) {
            int i = t * K + j, e = s->sel[i];
            if (fill[e] < s->eoff[e + 1] - s->eoff[e]) {
                s->row[i] = s->eoff[e] + fill[e]++;
                s->asg[s->row[i]] = i;
            } else {
                s->row[i] = -1;
            }
        }
    return s->eoff[E];
}

/* Router statistics and the auxiliary losses of block l (weights applied): into p->aux
 * (training) and p->stats[l] (when collected). */
static void moe_aux(const Pass *p, const LayerActs *s, int l, int N) {
    const ModelConfig *c = &p->m->cfg;
    int E = c->moe_experts, K = c->moe_top_k;
    double f[MODEL_MAX_EXPERTS] = {0}, P[MODEL_MAX_EXPERTS] = {0}, z2 = 0, ent = 0;
    for (int i = 0; i < N * K; i++)
        f[s->sel[i]] += 1.0 / ((double)N * K);
    for (int t = 0; t < N; t++) {
        const float *pr = s->rprob + (size_t)t * E, *z = s->rlog + (size_t)t * E;
        double mx = z[0], se = 0;
        for (int e = 1; e < E; e++)
            mx = z[e] > mx ? z[e] : mx;
        for (int e = 0; e < E; e++) {
            P[e] += pr[e] / (double)N;
            se += exp((double)z[e] - mx);
            ent -= pr[e] > 0 ? pr[e] * log((double)pr[e]) / N : 0;
        }
        double lse = mx + log(se);
        z2 += lse * lse / N;
    }
    double bal = 0;
    for (int e = 0; e < E; e++)
        bal += f[e] * P[e];
    bal *= c->moe_balance * E;
    double zl = c->moe_zloss * z2;
    if (p->aux) *p->aux += (float)(bal + zl);
    if (!p->stats) return;
    LayerStats *st = &p->stats[l];
    for (int e = 0; e < E; e++)
        st->expert_frac[e] = f[e];
    st->router_entropy = ent;
    st->moe_balance = bal;
    st->moe_zloss = zl;
    st->moe_dropped = 1.0 - (double)s->eoff[E] / ((double)N * K);
}

/* y (B,T,C) = the MoE MLP of x: route, gather each expert's tokens, run the experts on their
 * rows only, scatter back weighted by the gates. */
void moe_forward(const Pass *p, const LayerView *L, const LayerActs *s, int l, const float *x,
                 float *y) {
    const ModelConfig *c = &p->m->cfg;
    const Dims *d = &p->a->d;
    int N = p->B * p->T, C = d->C, E = d->E, K = d->K, FFE = d->FFE, UPE = d->UPE;
    router_logits(s->rlog, x, L->w.router_w, N, C, E);
    for (int t = 0; t < N; t++)
        softmax_exact(s->rprob + (size_t)t * E, s->rlog + (size_t)t * E, E);
    int rows = moe_route(p, s, N);
    if (!p->k) moe_aux(p, s, l, N); /* generation has no losses nor statistics */
    for (int r = 0; r < rows; r++)
        memcpy(s->xg + (size_t)r * C, x + (size_t)(s->asg[r] / K) * C, (size_t)C * sizeof(float));
    for (int e = 0; e < E; e++) {
        int r0 = s->eoff[e], n = s->eoff[e + 1] - r0;
        if (n == 0) continue; /* an expert no token chose */
        matmul_forward(s->fch + (size_t)r0 * UPE, s->xg + (size_t)r0 * C,
                       L->w.exp_fc_w + (size_t)e * UPE * C, NULL,
                       L->w.exp_fc_b ? L->w.exp_fc_b + (size_t)e * UPE : NULL, n, C, UPE);
    }
    if (p->stats && rows > 0) pre_stats(&p->stats[l], s->fch, rows, FFE, model_is_glu(c));
    if (p->a->z.in_place)
        relu_forward_inplace(s->h, (size_t)rows * FFE);
    else if (rows > 0)
        activation_forward(c->activation, s->h, s->fch, rows, FFE);
    if (p->stats && rows > 0) mlp_stats(&p->stats[l], s->h, (size_t)rows * FFE);
    for (int e = 0; e < E; e++) {
        int r0 = s->eoff[e], n = s->eoff[e + 1] - r0;
        if (n == 0) continue;
        matmul_forward(s->eo + (size_t)r0 * C, s->h + (size_t)r0 * FFE,
                       L->w.exp_proj_w + (size_t)e * C * FFE, NULL,
                       L->w.exp_proj_b ? L->w.exp_proj_b + (size_t)e * C : NULL, n, FFE, C);
    }
    for (int t = 0; t < N; t++) { /* each token's experts in order j: a fixed summation order */
        float *o = y + (size_t)t * C;
        memset(o, 0, (size_t)C * sizeof(float));
        for (int j = 0; j < K; j++) {
            int r = s->row[t * K + j];
            if (r < 0) continue; /* dropped */
            float g = s->gate[t * K + j];
            const float *eo = s->eo + (size_t)r * C;
            for (int i = 0; i < C; i++)
                o[i] += g * eo[i];
        }
    }
}

/* dx = beta dx + d/dx of the MoE MLP given dy, plus the auxiliary losses' gradients. */
void moe_backward(const Pass *p, const LayerView *L, const LayerActs *s, const float *x,
                  const float *dy, float *dx, float beta) {
    const ModelConfig *c = &p->m->cfg;
    GptActs *a = p->a;
    const Dims *d = &a->d;
    int N = p->B * p->T, C = d->C, E = d->E, K = d->K, FFE = d->FFE, UPE = d->UPE;
    int rows = s->eoff[E];
    /* through the gates: d eo = g dy, d g = dy . eo (a dropped assignment's gate is unused) */
    for (int i = 0; i < N * K; i++) {
        int r = s->row[i];
        const float *dyt = dy + (size_t)(i / K) * C;
        a->d_gate[i] = 0.0f;
        if (r < 0) continue;
        float g = s->gate[i], dg = 0.0f, *de = a->d_eo + (size_t)r * C;
        const float *eo = s->eo + (size_t)r * C;
        for (int k = 0; k < C; k++) {
            de[k] = g * dyt[k];
            dg += dyt[k] * eo[k];
        }
        a->d_gate[i] = dg;
    }
    /* each expert on its rows */
    for (int e = 0; e < E; e++) {
        int r0 = s->eoff[e], n = s->eoff[e + 1] - r0;
        if (n == 0) continue;
        matmul_backward(a->d_h + (size_t)r0 * FFE, 0.0f, L->g.exp_proj_w + (size_t)e * C * FFE,
                        L->g.exp_proj_b ? L->g.exp_proj_b + (size_t)e * C : NULL,
                        a->d_eo + (size_t)r0 * C, 1.0f, s->h + (size_t)r0 * FFE,
                        L->w.exp_proj_w + (size_t)e * C * FFE, n, FFE, C);
    }
    float *d_fch = a->d_fch;
    if (a->z.in_place) {
        relu_backward_inplace(a->d_h, s->h, (size_t)rows * FFE);
        d_fch = a->d_h;
    } else if (rows > 0) {
        activation_backward(c->activation, d_fch, a->d_h, s->fch, rows, FFE);
    }
    for (int e = 0; e < E; e++) {
        int r0 = s->eoff[e], n = s->eoff[e + 1] - r0;
        if (n == 0) continue;
        matmul_backward(a->d_xg + (size_t)r0 * C, 0.0f, L->g.exp_fc_w + (size_t)e * UPE * C,
                        L->g.exp_fc_b ? L->g.exp_fc_b + (size_t)e * UPE : NULL,
                        d_fch + (size_t)r0 * UPE, 1.0f, s->xg + (size_t)r0 * C,
                        L->w.exp_fc_w + (size_t)e * UPE * C, n, C, UPE);
    }
    /* scatter back: each token's rows in order j */
    for (int t = 0; t < N; t++) {
        float *o = dx + (size_t)t * C;
        if (beta == 0.0f)
            memset(o, 0, (size_t)C * sizeof(float));
        else if (beta != 1.0f)
            for (int i = 0; i < C; i++)
                o[i] *= beta;
        for (int j = 0; j < K; j++) {
            int r = s->row[t * K + j];
            if (r < 0) continue;
            const float *dg = a->d_xg + (size_t)r * C;
            for (int i = 0; i < C; i++)
                o[i] += dg[i];
        }
    }
    /* the router: d p from the gates, the balance loss (f_i fixed, d P_i / d p_ti = 1 / N),
     * then the softmax; the z-loss adds 2 beta lse_t p_ti / N to d z_ti */
    double f[MODEL_MAX_EXPERTS] = {0};
    for (int i = 0; i < N * K; i++)
        f[s->sel[i]] += 1.0 / ((double)N * K);
    for (int t = 0; t < N; t++) {
        const float *pr = s->rprob + (size_t)t * E, *z = s->rlog + (size_t)t * E;
        const float *dg = a->d_gate + (size_t)t * K, *g = s->gate + (size_t)t * K;
        const int32_t *sel = s->sel + (size_t)t * K;
        float dp[MODEL_MAX_EXPERTS] = {0};
        for (int e = 0; e < E; e++)
            dp[e] = (float)(c->moe_balance * E * f[e] / N);
        if (K == 1) {
            dp[sel[0]] += dg[0];
        } else { /* g_j = p_j / S: d p_j = (d g_j - sum_m d g_m g_m) / S */
            float S = 0.0f, dot = 0.0f;
            for (int j = 0; j < K; j++) {
                S += pr[sel[j]];
                dot += dg[j] * g[j];
            }
            for (int j = 0; j < K; j++)
                dp[sel[j]] += (dg[j] - dot) / S;
        }
        float pdp = 0.0f;
        for (int e = 0; e < E; e++)
            pdp += pr[e] * dp[e];
        double lse = 0;
        if (c->moe_zloss > 0) {
            double mx = z[0], se = 0;
            for (int e = 1; e < E; e++)
                mx = z[e] > mx ? z[e] : mx;
            for (int e = 0; e < E; e++)
                se += exp((double)z[e] - mx);
            lse = mx + log(se);
        }
        float zc = (float)(2.0 * c->moe_zloss * lse / N);
        float *dz = a->d_rlog + (size_t)t * E;
        for (int e = 0; e < E; e++)
            dz[e] = pr[e] * (dp[e] - pdp) + zc * pr[e];
    }
    router_weight_backward(L->g.router_w, (double *)(void *)a->d_router, a->d_rlog, x, N, C, E);
    gemm(0, 0, N, C, E, 1.0f, a->d_rlog, E, L->w.router_w, C, 1.0f, dx, C); /* dx += dz W_r */
}
