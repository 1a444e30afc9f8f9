/* The MLP activation statistics: the pre-activation range of every act row
 * (the nonlinearity's input; GLU: the gate's) and, with stats.val, the act rows of split val
 * taken over every validation batch of an evaluation. The val rows are checked against one
 * forward over all the validation windows at once (no folding of batches), and the
 * pre-activation range against the post-activation one through the monotone nonlinearity
 * (max relu(x) = relu(max x)); the reference test (tests/reference) checks both against
 * PyTorch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"
#include "test_util.h"
#include "worker/knobs.h"
#include "worker/train.h"

static const char *dir, *corpus; /* set by main */

#define MAX_ROWS 64

typedef struct {
    EventSink sink;
    ActEvent train[MAX_ROWS], val[MAX_ROWS];
    int n_train, n_val, evals;
} Rows;

static void rows_emit(EventSink *self, const Event *ev) {
    Rows *r = (Rows *)self;
    if (ev->kind == EV_EVAL) r->evals++;
    if (ev->kind != EV_ACT) return;
    if (ev->u.act.split == ACT_SPLIT_VAL && r->n_val < MAX_ROWS) r->val[r->n_val++] = ev->u.act;
    if (ev->u.act.split == ACT_SPLIT_TRAIN && r->n_train < MAX_ROWS)
        r->train[r->n_train++] = ev->u.act;
}

static int config(RunConfig *c, const char *const *sets) {
    run_config_default(c);
    snprintf(c->data.path, sizeof c->data.path, "%s", corpus);
    c->train.steps = 4;
    c->train.warmup_steps = 1;
    c->train.batch_size = 4;
    c->train.eval_every = 2;
    c->train.eval_tokens = 16 * 11; /* 11 windows: batches of 4, 4 and 3 */
    c->sample.tokens = 0;
    c->stats.every = 2;
    char err[ABL_ERR_MAX];
    for (int i = 0; sets && sets[i]; i++)
        if (knob_assign(c, sets[i], err) != 0) {
            CHECK_MSG(0, "%s", err);
            return -1;
        }
    return 0;
}

static double rel(double a, double b) {
    return fabs(a - b) / fmax(fabs(b), 1e-30);
}

/* Equal up to float round-off: the products of a batch of 11 may round otherwise than those
 * of batches of 4. */
static int close(double a, double b) {
    return fabs(a - b) <= 1e-5 * fmax(fabs(a), fabs(b)) + 1e-12;
}

/* Trains sets' config for 4 steps with stats.val and checks its rows (see the top). */
static void check_config(const char *const *sets, int monotone) {
    RunConfig c;
    if (config(&c, sets) != 0) return;
    char err[ABL_ERR_MAX];
    CHECK_MSG(knob_assign(&c, "stats.val=true", err) == 0, "%s", err);
    if (!c.stats.val) return;
    Dataset d;
    Trainer t;
    if (dataset_load(&d, &c.data, c.model.context, err) != 0 ||
        trainer_init(&t, &c, 5, &d, err) != 0) {
        CHECK_MSG(0, "%s", err);
        return;
    }
    Rows r = {{rows_emit}, {{0}}, {{0}}, 0, 0, 0};
    EndEvent end;
    CHECK(trainer_run(&t, &r.sink, NULL, &end) == RUN_DONE);
    int L = c.model.n_layer;
    CHECK_MSG(r.evals == 2 && r.n_val == 2 * L && r.n_train == 2 * L,
              "%s: %d evals, %d val rows, %d train rows", sets[0], r.evals, r.n_val, r.n_train);
    /* every row: the post-activation range through the nonlinearity of the pre-activation's */
    for (int i = 0; i < r.n_train + r.n_val; i++) {
        const ActEvent *a = i < r.n_train ? &r.train[i] : &r.val[i - r.n_train];
        CHECK_MSG(isfinite(a->pre_max) && isfinite(a->pre_min) && a->pre_min <= a->pre_max,
                  "%s: pre-activation range [%g, %g]", sets[0], a->pre_min, a->pre_max);
        if (monotone == 1) /* relu */
            CHECK_MSG(a->max == fmax(a->pre_max, 0.0) && a->min == fmax(a->pre_min, 0.0),
                      "%s: max %g min %g vs pre %g %g", sets[0], a->max, a->min, a->pre_max,
                      a->pre_min);
        if (monotone == 2) /* relu2 */
            CHECK_MSG(rel(a->max, pow(fmax(a->pre_max, 0.0), 2)) < 1e-6, "%s: max %g vs pre_max %g",
                      sets[0], a->max, a->pre_max);
    }
    for (int i = 0; i < r.n_val; i++) {
        const ActEvent *a = &r.val[i];
        CHECK(a->step == (i < L ? 2 : 4) && a->layer == i % L && a->n_head == 0);
        CHECK(isnan(a->grad_norm) && isnan(a->near_zero_frac));
    }
    /* the last evaluation's rows against one forward over every validation window */
    int T = c.model.context;
    EvalLayout lay = dataset_eval_layout(&d, SPLIT_VAL, c.train.eval_tokens, T);
    int n = lay.n_windows;
    CHECK(n == 11 && lay.n_targets == (long)n * T);
    GPT g;
    int32_t *x = malloc(sizeof(int32_t) * (size_t)n * T), *y = malloc(sizeof(int32_t) * n * T);
    if (x && y && gpt_alloc(&g, &t.gpt.cfg, n, T, err) == 0) {
        memcpy(g.params, t.gpt.params, g.n_params * sizeof(float));
        for (int i = 0; i < n; i++)
            dataset_eval_window(&d, &lay, i, x + (size_t)i * T, y + (size_t)i * T);
        g.collect_stats = 1;
        gpt_forward(&g, x, y, n, T);
        for (int l = 0; l < L; l++) {
            const ActEvent *a = &r.val[L + l];
            const LayerStats *s = &g.stats[l];
            fprintf(stderr,
                    "%-16s layer %d: val max %.6g (one pass %.6g) pre [%.6g, %.6g] (%.6g, %.6g) "
                    "zero_frac %.5f (%.5f) rms %.5g (%.5g)\n",
                    sets[0], l, a->max, s->max, a->pre_min, a->pre_max, s->pre_min, s->pre_max,
                    a->zero_frac, s->zero_frac, a->rms, s->rms);
            CHECK_MSG(close(a->max, s->max) && close(a->min, s->min),
                      "%s layer %d: max %g vs %g, min %g vs %g", sets[0], l, a->max, s->max, a->min,
                      s->min);
            CHECK_MSG(close(a->pre_max, s->pre_max) && close(a->pre_min, s->pre_min),
                      "%s layer %d: pre %g %g vs %g %g", sets[0], l, a->pre_max, a->pre_min,
                      s->pre_max, s->pre_min);
            CHECK_MSG(fabs(a->zero_frac - s->zero_frac) * s->h_count <= 2,
                      "%s layer %d: zero_frac %g vs %g", sets[0], l, a->zero_frac, s->zero_frac);
            CHECK_MSG(close(a->rms, s->rms) && fabs(a->mean - s->mean) < 1e-5 * s->rms,
                      "%s layer %d: rms %g vs %g, mean %g vs %g", sets[0], l, a->rms, s->rms,
                      a->mean, s->mean);
            CHECK_MSG(close(a->resid_rms, s->resid_rms), "%s layer %d: resid_rms %g vs %g", sets[0],
                      l, a->resid_rms, s->resid_rms);
        }
        gpt_free(&g);
    } else {
        CHECK_MSG(0, "cannot allocate the one-pass model: %s", err);
    }
    free(x);
    free(y);
    trainer_free(&t);
    dataset_free(&d);
}

TEST(relu) {
    const char *s[] = {"model.activation=relu", NULL};
    check_config(s, 1);
}
TEST(relu2) {
    const char *s[] = {"model.activation=relu2", NULL};
    check_config(s, 2);
}
TEST(gelu_book_init) {
    const char *s[] = {"model.activation=gelu", "model.init=torch", "model.norm_type=layernorm",
                       "model.mlp_bias=true", NULL};
    check_config(s, 0);
}
TEST(swiglu) {
    const char *s[] = {"model.activation=swiglu", NULL};
    check_config(s, 0);
}
/* a mixture of experts: the statistics are over the rows the experts ran on */
TEST(moe_reglu) {
    const char *s[] = {"model.activation=reglu", "model.moe_experts=4", "model.moe_top_k=2", NULL};
    check_config(s, 0);
}

/* Trains sets' config (see config) into r: 0 when it ran to its end. */
static int train_rows(const char *const *sets, RunConfig *c, Rows *r, int *had_val_stats) {
    *r = (Rows){{rows_emit}, {{0}}, {{0}}, 0, 0, 0};
    *had_val_stats = 0;
    if (config(c, sets) != 0) return -1;
    char err[ABL_ERR_MAX];
    Dataset d;
    Trainer t;
    if (dataset_load(&d, &c->data, c->model.context, err) != 0) {
        CHECK_MSG(0, "%s", err);
        return -1;
    }
    if (trainer_init(&t, c, 5, &d, err) != 0) {
        CHECK_MSG(0, "%s", err);
        dataset_free(&d);
        return -1;
    }
    EndEvent end;
    int status = trainer_run(&t, &r->sink, NULL, &end);
    *had_val_stats = t.val_stats != NULL;
    trainer_free(&t);
    dataset_free(&d);
    return status == RUN_DONE ? 0 : -1;
}

/* Without stats.val there are no val rows, and the training rows are as before. */
TEST(off_by_default) {
    RunConfig c;
    Rows r;
    int val_stats;
    CHECK(train_rows(NULL, &c, &r, &val_stats) == 0);
    CHECK(c.stats.val == 0);
    CHECK(r.n_val == 0 && r.n_train == 2 * c.model.n_layer && !val_stats);
}

/* A layer's grad_norm is that of its gradients before clipping, as the global one
 * (docs/metrics.md): with a clip of 1e-6 every layer's clipped gradients have a norm of at
 * most 1e-6, and before this was fixed the rows reported those. */
TEST(layer_grad_norm_before_clipping) {
    const char *sets[] = {"train.grad_clip=1e-6", NULL};
    RunConfig c;
    Rows r;
    int val_stats;
    CHECK(train_rows(sets, &c, &r, &val_stats) == 0);
    CHECK(r.n_train == 2 * c.model.n_layer);
    for (int i = 0; i < r.n_train; i++)
        CHECK_MSG(r.train[i].grad_norm > 1e-4, "step %ld layer %d: grad_norm %g, clipped",
                  r.train[i].step, r.train[i].layer, r.train[i].grad_norm);
}

int main(int argc, char **argv) {
    if (test_tmpdir_corpus("test_act_stats", &dir, &corpus) != 0) return 1;
    return test_main(argc, argv, "test_act_stats");
}
