/* Finite-difference gradient checks of gpt_forward / gpt_backward on tiny models
 * (d_model 8, T 4, B 2, vocab 11), in float32. See tests/reference/README.md.
 *
 * For every present tensor of every config:
 *   - entries: up to 8 per tensor (the 4 with the largest analytic gradient, so that a wrong
 *     scale cannot hide under the absolute tolerance, and 4 pseudo-random ones, so that a
 *     gradient wrongly left at 0 is caught);
 *   - one directional derivative over the whole tensor (random +-1 direction), which checks
 *     every entry at once: fd of L(p + h d) against <grad, d>.
 * The finite difference is the Richardson-extrapolated central difference
 * (4 D(h/2) - D(h)) / 3 with h = EPS (DIR_EPS for directions): a plain central difference at
 * h = 1e-2 is off by up to 2% in the strongly curved peri/swiglu model, the extrapolation
 * removes the h^2 term. Accept |fd - an| <= RTOL * max(|fd|, |an|) + ATOL. In float32 the loss
 * (~3) carries round-off of a few 1e-7, so the difference has noise of at most ~1e-4; ATOL is
 * 5x that, and the worst measured |fd - an| / tolerance is about 0.2.
 *
 * Kinks: relu and reglu are not differentiable at 0 (relu2's second derivative jumps). When a
 * perturbation moves a pre-activation across 0 the finite difference is wrong, not the
 * gradient. For configs with these activations only, each check computes the estimate at h
 * and h/2: a smooth loss gives the same value, a kink inside [-h, h] does not. If the two
 * disagree by more than KINK_AGREE of the tolerance the check is retried at h/4, and skipped
 * when they still disagree. Whether a check is skipped does not depend on the analytic
 * gradient, so skipping cannot hide a wrong backward; it only thins the sample. Skips are
 * counted and reported, and at most a quarter of a config's checks may be skipped.
 *
 * Also checked: backward accumulates (two backward passes give twice the gradient), the
 * probabilities left by gpt_forward(x, y) are the softmax of gpt_forward(x, NULL)'s logits,
 * and forward on a smaller (B', T') gives the leading logits of the full batch (causality and
 * the capacity contract). All of it runs at (B, T) = (2, 4) inside a capacity of (3, 6). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "model/gpt.h"
#include "test_util.h"
#include "worker/knobs.h"

#define B          2
#define T          4
#define V          11
#define EPS        1e-2f
#define DIR_EPS    3e-3f
#define RTOL       2e-2
#define ATOL       5e-4
#define KINK_AGREE 0.25
#define PER_TENSOR 8

/* A config: knob assignments over the base (src/worker/knobs.c names, as in a spec). Each
 * states every knob the backward's paths depend on, so the list reads as a table. */
typedef struct {
    const char *name;
    const char *sets[17];
} Case;

static const Case cases[] = {
    {"gelu-pre-rms-learned",
     {"model.activation=gelu", "model.norm=pre", "model.norm_type=rmsnorm",
      "model.norm_affine=true", "model.input_norm=true", "model.final_norm=true",
      "model.qk_norm=false", "model.position=learned", "model.n_head=2", "model.n_kv_head=0",
      "model.n_layer=2", "model.qkv_bias=true", "model.out_bias=true", "model.mlp_bias=true",
      "model.tie_embeddings=false", "model.mlp_ratio=2.0", NULL}},
    {"gelu_tanh-post-ln-rope-qk-mqa-tied",
     {"model.activation=gelu_tanh", "model.norm=post", "model.norm_type=layernorm",
      "model.norm_affine=true", "model.input_norm=false", "model.final_norm=true",
      "model.qk_norm=true", "model.position=rope", "model.n_head=2", "model.n_kv_head=1",
      "model.n_layer=2", "model.qkv_bias=true", "model.out_bias=false", "model.mlp_bias=false",
      "model.tie_embeddings=true", "model.mlp_ratio=2.0", NULL}},
    {"swiglu-peri-rms-rope-qk",
     {"model.activation=swiglu", "model.norm=peri", "model.norm_type=rmsnorm",
      "model.norm_affine=true", "model.input_norm=true", "model.final_norm=false",
      "model.qk_norm=true", "model.position=rope", "model.n_head=2", "model.n_kv_head=0",
      "model.n_layer=2", "model.qkv_bias=false", "model.out_bias=true", "model.mlp_bias=true",
      "model.tie_embeddings=false", "model.mlp_ratio=1.5", NULL}},
    {"geglu-peri-ln-gqa2-learned-qk",
     {"model.activation=geglu", "model.norm=peri", "model.norm_type=layernorm",
      "model.norm_affine=true", "model.input_norm=true", "model.final_norm=true",
      "model.qk_norm=true", "model.position=learned", "model.n_head=4", "model.n_kv_head=2",
      "model.n_layer=1", "model.qkv_bias=true", "model.out_bias=true", "model.mlp_bias=true",
      "model.tie_embeddings=true", "model.mlp_ratio=2.0", NULL}},
    {"tanh-none-posnone",
     {"model.activation=tanh", "model.norm=none", "model.norm_type=rmsnorm",
      "model.norm_affine=false", "model.input_norm=true", "model.final_norm=true",
      "model.qk_norm=false", "model.position=none", "model.n_head=2", "model.n_kv_head=0",
      "model.n_layer=2", "model.qkv_bias=true", "model.out_bias=true", "model.mlp_bias=true",
      "model.tie_embeddings=false", "model.mlp_ratio=2.0", NULL}},
    {"silu-pre-ln-noaffine-rope",
     {"model.activation=silu", "model.norm=pre", "model.norm_type=layernorm",
      "model.norm_affine=false", "model.input_norm=true", "model.final_norm=true",
      "model.qk_norm=true", "model.position=rope", "model.n_head=2", "model.n_kv_head=1",
      "model.n_layer=2", "model.qkv_bias=false", "model.out_bias=false", "model.mlp_bias=true",
      "model.tie_embeddings=false", "model.mlp_ratio=2.5", NULL}},
    {"relu-post-rms-learned",
     {"model.activation=relu", "model.norm=post", "model.norm_type=rmsnorm",
      "model.norm_affine=true", "model.input_norm=false", "model.final_norm=false",
      "model.qk_norm=false", "model.position=learned", "model.n_head=2", "model.n_kv_head=0",
      "model.n_layer=2", "model.qkv_bias=true", "model.out_bias=true", "model.mlp_bias=true",
      "model.tie_embeddings=true", "model.mlp_ratio=2.0", NULL}},
    {"relu2-pre-rms-rope",
     {"model.activation=relu2", "model.norm=pre", "model.norm_type=rmsnorm",
      "model.norm_affine=true", "model.input_norm=true", "model.final_norm=true",
      "model.qk_norm=false", "model.position=rope", "model.n_head=2", "model.n_kv_head=1",
      "model.n_layer=1", "model.qkv_bias=false", "model.out_bias=true", "model.mlp_bias=false",
      "model.tie_embeddings=false", "model.mlp_ratio=2.0", NULL}},
    {"reglu-none-ln-final",
     {"model.activation=reglu", "model.norm=none", "model.norm_type=layernorm",
      "model.norm_affine=true", "model.input_norm=true", "model.final_norm=true",
      "model.qk_norm=true", "model.position=learned", "model.n_head=2", "model.n_kv_head=0",
      "model.n_layer=2", "model.qkv_bias=true", "model.out_bias=false", "model.mlp_bias=true",
      "model.tie_embeddings=true", "model.mlp_ratio=2.0", NULL}},
    /* mixture of experts and of heads: the loss differenced is LM + auxiliary losses */
    {"moe-e3k2-gelu-cap-zloss",
     {"model.activation=gelu", "model.norm=pre", "model.norm_type=layernorm",
      "model.norm_affine=true", "model.n_head=2", "model.n_layer=2", "model.mlp_bias=true",
      "model.moe_experts=3", "model.moe_top_k=2", "model.moe_capacity=1.0", "model.moe_balance=0.5",
      "model.moe_zloss=0.1", "model.mlp_ratio=2.0", NULL}},
    {"moh-s1k2-silu-moe-every-other",
     {"model.activation=silu", "model.norm=pre", "model.norm_type=rmsnorm",
      "model.norm_affine=true", "model.n_head=4", "model.n_layer=2", "model.moh_shared=1",
      "model.moh_top_k=2", "model.moh_balance=0.5", "model.moe_experts=2",
      "model.moe_layers=every_other", "model.mlp_ratio=2.0", NULL}},
};

static uint64_t lcg_state;
static uint32_t lcg(void) {
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(lcg_state >> 33);
}

static int kinked(Activation a) {
    return a == ACT_RELU || a == ACT_RELU2 || a == ACT_REGLU;
}

static int32_t xs[B * T], ys[B * T];

/* The objective backward differentiates: the LM loss plus the auxiliary (MoE/MoH) losses. */
static double loss_at(GPT *m) {
    double lm = (double)gpt_forward(m, xs, ys, B, T);
    return lm + (double)m->aux_loss;
}

static double worst_ratio; /* over all checks: |fd - an| / (RTOL max + ATOL) */

/* One finite-difference check of <grad, d> along a direction: set(ctx, s) puts the
 * parameters at (saved + s d); set(ctx, 0) restores them exactly.
 * Returns 1 ok, 0 fail, -1 skipped (kink). */
typedef void (*Setter)(void *ctx, float s);

static double central(Setter set, void *ctx, GPT *m, float h) {
    set(ctx, h);
    double fp = loss_at(m);
    set(ctx, -h);
    double fm = loss_at(m);
    set(ctx, 0);
    return (fp - fm) / (2.0 * (double)h);
}

static char cur_what[128], worst_what[256]; /* the check being made, the worst one so far */

static int judge(double fd, double an) {
    double r = fabs(fd - an) / (RTOL * fmax(fabs(fd), fabs(an)) + ATOL);
    if (r > worst_ratio) {
        worst_ratio = r;
        snprintf(worst_what, sizeof worst_what, "%s: analytic %.6g fd %.6g", cur_what, an, fd);
    }
    return r <= 1.0;
}

/* Richardson extrapolation of the central difference: (4 D(h/2) - D(h)) / 3 cancels the
 * h^2 term, leaving O(h^4) truncation error. */
static double richardson(Setter set, void *ctx, GPT *m, float h) {
    return (4.0 * central(set, ctx, m, h / 2) - central(set, ctx, m, h)) / 3.0;
}

static int fd_check(Setter set, void *ctx, GPT *m, double an, float h, int allow_kink,
                    double *fd_out) {
    if (!allow_kink) return judge(*fd_out = richardson(set, ctx, m, h), an);
    /* A kink inside [-h, h] makes the estimate depend on h; a smooth loss does not. Accept
     * the estimate only when steps h and h/2 agree; else retry four times smaller, then skip. */
    for (int attempt = 0; attempt < 2; attempt++, h /= 4) {
        double a = richardson(set, ctx, m, h), b = richardson(set, ctx, m, h / 2);
        *fd_out = b;
        if (fabs(a - b) <= KINK_AGREE * (RTOL * fmax(fabs(b), fabs(an)) + ATOL))
            return judge(b, an);
    }
    return -1;
}

typedef struct {
    float *p;           /* the tensor */
    const float *saved; /* its unperturbed values */
    const float *dir;   /* NULL: the single entry i */
    size_t i, n;
} Target;

static void set_target(void *ctx, float s) {
    Target *t = ctx;
    if (!t->dir) {
        t->p[t->i] = s == 0 ? t->saved[t->i] : t->saved[t->i] + s;
        return;
    }
    for (size_t k = 0; k < t->n; k++)
        t->p[k] = s == 0 ? t->saved[k] : t->saved[k] + s * t->dir[k];
}

static void run_case(const Case *cs) {
    RunConfig rc;
    run_config_default(&rc);
    char err[ABL_ERR_MAX];
    static const char *const base_sets[] = {"model.vocab_size=11", "model.d_model=8",
                                            /* > T: learned positions use the first T rows */
                                            "model.context=6",
                                            /* large enough for O(0.01-0.1) gradients well above the
                                               fd noise */
                                            "model.init_std=0.35", NULL};
    for (const char *const *a = base_sets; *a; a++)
        CHECK_MSG(knob_assign(&rc, *a, err) == 0, "%s: %s", *a, err);
    for (const char *const *a = cs->sets; *a; a++)
        if (knob_assign(&rc, *a, err) != 0) {
            CHECK_MSG(0, "%s: %s: %s", cs->name, *a, err);
            return;
        }
    const ModelConfig c = rc.model;
    /* routing (top-k, capacity) switches where two router scores cross: a kink, too */
    int kinks = kinked(c.activation) || model_is_moe(&c) || model_is_moh(&c);
    if (model_config_validate(&c, err) != 0) {
        CHECK_MSG(0, "%s: invalid config: %s", cs->name, err);
        return;
    }
    GPT m;
    memset(&m, 0, sizeof m);
    /* capacity (B+1, T+2) larger than the (B, T) used: strides must follow the current batch
     * (refdump, in the reference test, runs at exactly the capacity) */
    if (gpt_alloc(&m, &c, B + 1, T + 2, err) != 0) {
        CHECK_MSG(0, "%s: gpt_alloc: %s", cs->name, err);
        return;
    }
    gpt_init_weights(&m, 7);
    /* Norm gains and biases are initialized to 1/0; move them off that point so that their
     * gradients (and the paths through them) are generic. */
    lcg_state = 99;
    for (int ti = 0; ti < T_COUNT; ti++) {
        const TensorInfo *t = &m.tensors[ti];
        if (t->size == 0 || (t->init != INIT_ONES && t->init != INIT_ZEROS)) continue;
        for (size_t k = 0; k < t->size; k++)
            m.params[t->offset + k] += 0.2f * ((float)(lcg() % 2001) / 1000.0f - 1.0f);
    }
    for (int i = 0; i < B * T; i++) {
        xs[i] = (int32_t)(lcg() % V);
        ys[i] = (int32_t)(lcg() % V);
    }
    size_t np = m.n_params;
    float *an = malloc(np * sizeof *an);
    float *logits_ref = malloc((size_t)B * T * V * sizeof(float));

    /* contract checks */
    gpt_forward(&m, xs, NULL, B, T);
    memcpy(logits_ref, gpt_logits(&m), (size_t)B * T * V * sizeof(float));
    float loss_c = gpt_forward(&m, xs, ys, B, T);
    double loss_ref = 0;
    for (int r = 0; r < B * T; r++) { /* with targets, the loss of the same logits */
        const float *lr = logits_ref + (size_t)r * V;
        double mx = lr[0], z = 0;
        for (int v = 1; v < V; v++)
            mx = fmax(mx, lr[v]);
        for (int v = 0; v < V; v++)
            z += exp(lr[v] - mx);
        loss_ref += log(z) - (lr[ys[r]] - mx);
    }
    loss_ref /= B * T;
    CHECK_MSG(fabs(loss_c - loss_ref) < 1e-5 * fabs(loss_ref),
              "%s: loss %.9g, cross-entropy of the logits %.9g", cs->name, (double)loss_c,
              loss_ref);
    {
        int32_t xsub[1 * (T - 1)];
        for (int t = 0; t < T - 1; t++)
            xsub[t] = xs[T + t]; /* batch row 1, first T-1 tokens */
        gpt_forward(&m, xsub, NULL, 1, T - 1);
        double ds = 0;
        for (int t = 0; t < T - 1; t++)
            for (int v = 0; v < V; v++)
                ds =
                    fmax(ds, fabs(gpt_logits(&m)[t * V + v] - logits_ref[((size_t)T + t) * V + v]));
        CHECK_MSG(ds < 1e-5,
                  "%s: forward with (B,T)=(1,%d) differs from the prefix of the full "
                  "batch by %g (causality or capacity handling)",
                  cs->name, T - 1, ds);
    }

    gpt_zero_grad(&m);
    double base = loss_at(&m);
    gpt_backward(&m);
    memcpy(an, m.grads, np * sizeof *an);
    gpt_forward(&m, xs, ys, B, T);
    gpt_backward(&m);
    double dacc = 0, gmax = 0;
    for (size_t i = 0; i < np; i++) {
        dacc = fmax(dacc, fabs(m.grads[i] - 2 * an[i]));
        gmax = fmax(gmax, fabs(an[i]));
    }
    CHECK_MSG(dacc <= 1e-5 * gmax + 1e-9,
              "%s: second backward does not accumulate (max |g2 - 2 g1| %g)", cs->name, dacc);
    CHECK_MSG(gmax > 1e-3, "%s: gradients vanish (max %g)", cs->name, gmax);

    int checked = 0, skipped = 0, failed = 0;
    float *dir = malloc(np * sizeof *dir);
    float *saved = malloc(np * sizeof *saved);
    memcpy(saved, m.params, np * sizeof *saved);
    for (int ti = 0; ti < T_COUNT; ti++) {
        const TensorInfo *t = &m.tensors[ti];
        if (t->size == 0) continue;
        float *p = m.params + t->offset;
        const float *g = an + t->offset;
        /* entries: the PER_TENSOR/2 largest |grad|, then pseudo-random ones */
        size_t pick[PER_TENSOR];
        int npick = 0;
        if (t->size <= PER_TENSOR) {
            for (size_t k = 0; k < t->size; k++)
                pick[npick++] = k;
        } else {
            for (int j = 0; j < PER_TENSOR / 2; j++) {
                size_t best = 0;
                float bv = -1;
                for (size_t k = 0; k < t->size; k++) {
                    int used = 0;
                    for (int q = 0; q < npick; q++)
                        used |= pick[q] == k;
                    if (!used && fabsf(g[k]) > bv) bv = fabsf(g[k]), best = k;
                }
                pick[npick++] = best;
            }
            while (npick < PER_TENSOR) {
                size_t k = lcg() % t->size;
                int used = 0;
                for (int q = 0; q < npick; q++)
                    used |= pick[q] == k;
                if (!used) pick[npick++] = k;
            }
        }
        for (int j = 0; j < npick; j++) {
            Target tg = {p, saved + t->offset, NULL, pick[j], t->size};
            snprintf(cur_what, sizeof cur_what, "%s %s[%zu]", cs->name, t->name, pick[j]);
            double fd;
            int r = fd_check(set_target, &tg, &m, g[pick[j]], EPS, kinks, &fd);
            if (r < 0) {
                skipped++;
                continue;
            }
            checked++;
            if (!r) {
                failed++;
                CHECK_MSG(0, "%s: %s[%zu]: analytic %.6g, finite difference %.6g", cs->name,
                          t->name, pick[j], g[pick[j]], fd);
            }
        }
        /* whole-tensor directional derivative */
        double dot = 0;
        for (size_t k = 0; k < t->size; k++) {
            dir[k] = (lcg() & 1) ? 1.0f : -1.0f;
            dot += (double)dir[k] * g[k];
        }
        Target tg = {p, saved + t->offset, dir, 0, t->size};
        snprintf(cur_what, sizeof cur_what, "%s %s along a random direction", cs->name, t->name);
        double fd;
        int r = fd_check(set_target, &tg, &m, dot, DIR_EPS, kinks, &fd);
        if (r < 0) {
            skipped++;
        } else {
            checked++;
            if (!r) {
                failed++;
                CHECK_MSG(0,
                          "%s: %s along a random direction: analytic %.6g, finite difference %.6g",
                          cs->name, t->name, dot, fd);
            }
        }
    }
    CHECK_MSG(skipped * 4 <= checked + skipped, "%s: %d of %d checks skipped as kinks", cs->name,
              skipped, checked + skipped);
    fprintf(stderr, "  %-36s %4d checked %3d skipped (kink) %2d failed  loss %.4f\n", cs->name,
            checked, skipped, failed, base);
    free(dir);
    CHECK_MSG(memcmp(saved, m.params, np * sizeof *saved) == 0, "%s: parameters not restored",
              cs->name);
    free(saved);
    free(an);
    free(logits_ref);
    gpt_free(&m);
}

/* Every case of the table: one model configuration's gradients against finite differences. */
TEST(all_cases) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
    fprintf(stderr, "worst |fd - an| / (%g max(|fd|,|an|) + %g) = %.3f (%s)\n", RTOL, ATOL,
            worst_ratio, worst_what);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_gradcheck");
}
