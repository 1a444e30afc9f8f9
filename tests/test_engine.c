/* The engine's contract: the reference families' exact parameter counts, deterministic
 * training (same seed: identical bytes; another seed: different), a micro model that
 * memorizes a tiny corpus, divergence, the lr schedules, the three budgets and gradient
 * clipping; the fused optimizer step against the passes it replaces. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/adamw.h"
#include "model/gemm.h"
#include "model/gpt.h"
#include "test_util.h"
#include "worker/knobs.h"
#include "worker/train.h"

static const char *dir, *corpus; /* set by main for every case */

static size_t count_with(const char *preset, int vocab, const char *const *sets, int n) {
    RunConfig c;
    run_config_default(&c);
    model_config_preset(&c.model, preset);
    if (vocab) c.model.vocab_size = vocab;
    char err[ABL_ERR_MAX];
    for (int i = 0; i < n; i++)
        CHECK_MSG(knob_assign(&c, sets[i], err) == 0, "%s", err);
    TensorInfo t[T_COUNT];
    size_t table = gpt_tensor_table(&c.model, t);
    size_t formula = model_param_count(&c.model);
    CHECK_MSG(table == formula, "tensor table %zu != formula %zu", table, formula);
    return formula;
}

TEST(param_counts) {
    CHECK(count_with("micro", 65, NULL, 0) == 29248);
    const char *d64[] = {"model.d_model=64"};
    CHECK(count_with("micro", 65, d64, 1) == 107648);
    const char *gqa[] = {"model.n_kv_head=2"};
    CHECK(count_with("micro", 65, gqa, 1) == 27200);
    CHECK(count_with("book", 0, NULL, 0) == 13673984);
    const char *h1[] = {"model.n_head=1"}, *h8[] = {"model.n_head=8"};
    CHECK(count_with("book", 0, h1, 1) == 13673984);
    CHECK(count_with("book", 0, h8, 1) == 13673984);
    /* a GLU MLP has a second up projection */
    const char *glu[] = {"model.activation=swiglu"};
    CHECK(count_with("micro", 65, glu, 1) == 29248 + 2 * 32 * 128);
    /* peri-LN with affine layernorm: four norms per block with gain and shift */
    const char *peri[] = {"model.norm=peri", "model.norm_affine=true", "model.norm_type=layernorm"};
    CHECK(count_with("micro", 65, peri, 3) == 29248 + 2 * 32 /* input norm */ + 2 * 4 * 2 * 32);
}

/* model.init torch on the book preset: every tensor as PyTorch's default modules draw it
 * (nn.Linear weight and bias U(-b, b), b = 1/sqrt(fan_in), std b/sqrt(3); nn.Embedding
 * N(0, 1); LayerNorm gain 1, shift 0). The fan_in of each linear layer is written here from
 * the book's modules, not read from the tensor table. */
TEST(init_torch) {
    RunConfig c;
    run_config_default(&c);
    model_config_preset(&c.model, "book");
    char err[ABL_ERR_MAX];
    CHECK_MSG(knob_assign(&c, "model.init=torch", err) == 0, "%s", err);
    if (c.model.init != WINIT_TORCH) return;
    const struct {
        const char *name;
        int fan_in; /* > 0: U(+-1/sqrt(fan_in)); 0: N(0, 1); -1: ones; -2: zeros */
    } want[] = {{"wte", 0},         {"wpe", 0},           {"attn_norm.w", -1},  {"attn_norm.b", -2},
                {"qkv.w", 128},     {"attn_proj.w", 128}, {"attn_proj.b", 128}, {"mlp_norm.w", -1},
                {"mlp_norm.b", -2}, {"fc.w", 128},        {"fc.b", 128},        {"fc_proj.w", 512},
                {"fc_proj.b", 512}, {"final_norm.w", -1}, {"final_norm.b", -2}, {"lm_head.w", 128}};
    GPT m;
    CHECK_MSG(gpt_alloc(&m, &c.model, 1, 1, err) == 0, "%s", err);
    gpt_init_weights(&m, 3);
    int seen = 0;
    for (int i = 0; i < T_COUNT; i++) {
        const TensorInfo *t = &m.tensors[i];
        if (t->size == 0) continue;
        int k = 0, n = (int)(sizeof want / sizeof want[0]);
        while (k < n && strcmp(want[k].name, t->name) != 0)
            k++;
        CHECK_MSG(k < n, "unexpected tensor %s", t->name);
        if (k == n) continue;
        seen++;
        const float *w = m.params + t->offset;
        double sum = 0, sq = 0, amax = 0;
        for (size_t j = 0; j < t->size; j++) {
            sum += w[j];
            sq += (double)w[j] * w[j];
            amax = fmax(amax, fabs((double)w[j]));
        }
        double N = (double)t->size, mean = sum / N, sd = sqrt(sq / N - mean * mean);
        int f = want[k].fan_in;
        if (f < 0) {
            int ok = 1;
            for (size_t j = 0; j < t->size; j++)
                ok &= w[j] == (f == -1 ? 1.0f : 0.0f);
            CHECK_MSG(ok, "%s is not all %s", t->name, f == -1 ? "ones" : "zeros");
            continue;
        }
        /* uniform: std b/sqrt(3), the std of its sample std ~ sqrt(0.2 / N) relative;
         * normal: std 1, ~ sqrt(0.5 / N); the mean within 5 standard errors */
        double bound = f > 0 ? 1.0 / sqrt((double)f) : 0, sigma = f > 0 ? bound / sqrt(3.0) : 1.0;
        double rel = 5.0 * sqrt((f > 0 ? 0.2 : 0.5) / N);
        fprintf(stderr, "%-12s n %9zu mean %+.3e std %.5f (want %.5f) max|w| %.5f (bound %.5f)\n",
                t->name, t->size, mean, sd, sigma, amax, bound);
        CHECK_MSG(fabs(sd / sigma - 1.0) <= rel, "%s: std %g, want %g", t->name, sd, sigma);
        CHECK_MSG(fabs(mean) <= 5.0 * sigma / sqrt(N), "%s: mean %g", t->name, mean);
        if (f > 0) {
            CHECK_MSG(amax <= bound * (1 + 1e-6), "%s: |w| %g above the bound %g", t->name, amax,
                      bound);
            /* the bound is reached: within a few spacings of N uniform draws */
            CHECK_MSG(amax >= bound * (1.0 - 20.0 / N), "%s: max |w| %g, bound %g", t->name, amax,
                      bound);
        } else {
            CHECK_MSG(amax > 3.0, "%s: max |w| %g: not N(0, 1)", t->name, amax);
        }
    }
    CHECK_MSG(seen == (int)(sizeof want / sizeof want[0]), "%d of the book's tensors seen", seen);
    gpt_free(&m);
}

/* The micro defaults on a data file. */
static void micro_config(RunConfig *c, const char *path) {
    run_config_default(c);
    snprintf(c->data.path, sizeof c->data.path, "%s", path);
    c->train.eval_every = 0;
    c->train.eval_tokens = 256;
}

/* ... with batches of 4 x 16 = 64 tokens, no samples, a step event per step: for tests of
 * the training loop's knobs. */
static void loop_config(RunConfig *c, const char *path) {
    micro_config(c, path);
    c->train.batch_size = 4;
    c->train.log_every = 1;
    c->sample.tokens = 0;
}

/* Loads the data, trains one run (events to sink, which may be NULL) and returns its status;
 * *params (if asked) receives a malloc'd copy of the final parameters and *n_params their
 * count. */
static RunStatus train_once(const RunConfig *c, uint64_t seed, EventSink *sink, EndEvent *end,
                            float **params, size_t *n_params) {
    char err[ABL_ERR_MAX];
    Dataset d;
    Trainer t;
    if (dataset_load(&d, &c->data, c->model.context, err) != 0) {
        fprintf(stderr, "%s\n", err);
        test_failures++;
        return RUN_FAILED;
    }
    if (trainer_init(&t, c, seed, &d, err) != 0) {
        fprintf(stderr, "%s\n", err);
        test_failures++;
        dataset_free(&d);
        return RUN_FAILED;
    }
    RunStatus st = trainer_run(&t, sink, NULL, end);
    if (params) {
        *n_params = t.gpt.n_params;
        *params = malloc(t.gpt.n_params * sizeof(float));
        memcpy(*params, t.gpt.params, t.gpt.n_params * sizeof(float));
    }
    trainer_free(&t);
    dataset_free(&d);
    return st;
}

/* Same seed: identical bytes; another seed: different. Under each way of running the
 * matrix products (src/model/gemm.h): in OpenBLAS whole, in the pieces AVX-512 OpenBLAS cores
 * get (forced here, so every machine checks them), and in ablate's own small-product kernel;
 * they differ by round-off only. */
TEST(determinism) {
    RunConfig c;
    micro_config(&c, corpus);
    c.train.steps = 30;
    c.train.warmup_steps = 5;
    c.stats.every = 10;
    c.sample.tokens = 16;
    /* OpenBLAS whole, OpenBLAS with the MLP products in 16-row pieces, the own kernel */
    static const double limits[] = {0.0, 16.0 * 128 * 32, 0.0}, own[] = {0.0, 0.0, -1.0};
    double val[3] = {0, 0, 0};
    for (int li = 0; li < 3; li++) {
        gemm_set_small_limit(limits[li]);
        gemm_set_own_limit(own[li]);
        CHECK(gemm_splits(0, c.train.batch_size * c.model.context, 128, 32) == (li == 1));
        EndEvent e1, e2, e3;
        float *a = NULL, *b = NULL, *x = NULL;
        size_t n1 = 0, n2 = 0, n3 = 0;
        CHECK(train_once(&c, 7, NULL, &e1, &a, &n1) == RUN_DONE);
        CHECK(train_once(&c, 7, NULL, &e2, &b, &n2) == RUN_DONE);
        CHECK(train_once(&c, 8, NULL, &e3, &x, &n3) == RUN_DONE);
        CHECK(a && b && x && n1 == n2 && n1 == n3);
        if (a && b && x) {
            CHECK_MSG(memcmp(a, b, n1 * sizeof(float)) == 0, "same seed gave different weights");
            CHECK_MSG(e1.final_val_loss == e2.final_val_loss, "same seed gave different losses");
            CHECK_MSG(memcmp(a, x, n1 * sizeof(float)) != 0, "another seed gave the same weights");
            CHECK(e1.final_val_loss != e3.final_val_loss);
        }
        val[li] = e1.final_val_loss;
        free(a);
        free(b);
        free(x);
    }
    fprintf(stderr, "determinism: val loss %.9g whole, %.9g in pieces, %.9g in the own kernel\n",
            val[0], val[1], val[2]);
    for (int li = 1; li < 3; li++)
        CHECK_MSG(fabs(val[0] - val[li]) <= 1e-4 * val[0], "val loss %.9g whole, %.9g (%d)", val[0],
                  val[li], li);
    gemm_set_small_limit(-1.0);
    gemm_set_own_limit(-1.0);
}

/* A micro model memorizes a tiny corpus in which every character determines the next (a
 * cycle of 54 distinct characters): the loss goes to near zero. */
TEST(overfit) {
    char path[512];
    snprintf(path, sizeof path, "%s/tiny.txt", dir);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 4; i++)
        fputs("abcdefghijklmnopqrstuvwxyz.ABCDEFGHIJKLMNOPQRSTUVWXYZ\n", f);
    fclose(f);
    RunConfig c;
    micro_config(&c, path);
    c.data.val_fraction = 0.0;
    c.train.steps = 300;
    c.train.warmup_steps = 10;
    c.train.weight_decay = 0.0;
    c.train.eval_tokens = 512;
    c.sample.tokens = 0;
    EndEvent end;
    CHECK(train_once(&c, 1, NULL, &end, NULL, NULL) == RUN_DONE);
    /* with val_fraction 0 the evaluation windows come from the (memorized) training text */
    CHECK_MSG(end.final_val_loss < 0.05, "final loss %.4f, expected < 0.05", end.final_val_loss);
    CHECK_MSG(end.final_val_acc > 0.99, "final accuracy %.4f", end.final_val_acc);
}

/* One estimand at every context: models that differ in model.context score the same target
 * tokens (count and a digest of their positions and ids), 250 of them, in windows of their
 * own context (250 is no multiple of any, so each has a shorter last window). */
TEST(eval_targets_context) {
    int contexts[] = {16, 32, 48};
    long targets[3] = {0};
    uint64_t digests[3] = {0};
    for (int k = 0; k < 3; k++) {
        RunConfig c;
        micro_config(&c, corpus);
        c.model.context = contexts[k];
        c.train.eval_tokens = 250;
        char err[ABL_ERR_MAX];
        Dataset d;
        Trainer t;
        if (dataset_load(&d, &c.data, c.model.context, err) != 0) {
            CHECK_MSG(0, "%s", err);
            return;
        }
        if (trainer_init(&t, &c, 1, &d, err) != 0) {
            CHECK_MSG(0, "%s", err);
            dataset_free(&d);
            return;
        }
        double loss, acc;
        trainer_evaluate(&t, &loss, &acc);
        CHECK_MSG(isfinite(loss) && acc >= 0 && acc <= 1, "context %d: loss %g acc %g", contexts[k],
                  loss, acc);
        targets[k] = t.eval_targets;
        digests[k] = t.eval_digest;
        fprintf(stderr, "context %d: %ld targets, digest %016llx, loss %.6f\n", contexts[k],
                targets[k], (unsigned long long)digests[k], loss);
        trainer_free(&t);
        dataset_free(&d);
    }
    for (int k = 0; k < 3; k++) {
        CHECK_MSG(targets[k] == 250, "context %d: %ld targets", contexts[k], targets[k]);
        CHECK_MSG(digests[k] == digests[0], "context %d scores other tokens than context %d",
                  contexts[k], contexts[0]);
    }
}

/* A non-finite loss ends the run as diverged, at the step it happened. */
TEST(divergence) {
    RunConfig c;
    micro_config(&c, corpus);
    c.train.steps = 200;
    c.train.lr = 1e30;
    c.train.warmup_steps = 0;
    c.train.grad_clip = 0;
    EndEvent end;
    CHECK(train_once(&c, 1, NULL, &end, NULL, NULL) == RUN_DIVERGED);
    CHECK(end.status == RUN_DIVERGED && end.steps > 0 && end.steps < 200);
    CHECK(strstr(end.message, "non-finite") != NULL);
}

/* Records the step events (lr, grad norm, clock) and counts the evaluations. */
typedef struct {
    EventSink sink;
    int n_steps, n_evals;
    StepEvent steps[64];
    StepEvent prev, last; /* the last two step events, however many there were */
} Capture;

static void capture_emit(EventSink *self, const Event *ev) {
    Capture *c = (Capture *)self;
    if (ev->kind == EV_STEP) {
        if (c->n_steps < 64) c->steps[c->n_steps] = ev->u.step;
        c->n_steps++;
        c->prev = c->last;
        c->last = ev->u.step;
    }
    if (ev->kind == EV_EVAL) c->n_evals++;
}

/* The documented schedules (docs/metrics.md): warmup_steps of linear warmup (step s of the
 * warmup uses lr * s / warmup), then constant, linear or cosine from lr to min_lr over the
 * remaining steps, step s at fraction (s - 1 - warmup) / (steps - warmup). */
TEST(schedules) {
    const Schedule kinds[] = {SCHED_CONSTANT, SCHED_LINEAR, SCHED_COSINE};
    const int steps = 12, warmup = 3;
    const double lr = 1e-2, min_lr = 1e-3;
    for (int k = 0; k < 3; k++) {
        RunConfig c;
        loop_config(&c, corpus);
        c.train.steps = steps;
        c.train.warmup_steps = warmup;
        c.train.lr = lr;
        c.train.min_lr = min_lr;
        c.train.schedule = kinds[k];
        Capture cap = {.sink = {capture_emit}};
        EndEvent end;
        CHECK(train_once(&c, 1, &cap.sink, &end, NULL, NULL) == RUN_DONE);
        CHECK(cap.n_steps == steps);
        for (int i = 0; i < cap.n_steps; i++) {
            int s = (int)cap.steps[i].step;
            double want = lr, frac = (double)(s - 1 - warmup) / (steps - warmup);
            if (s <= warmup)
                want = lr * s / warmup;
            else if (kinds[k] == SCHED_LINEAR)
                want = min_lr + (lr - min_lr) * (1.0 - frac);
            else if (kinds[k] == SCHED_COSINE)
                want = min_lr + (lr - min_lr) * 0.5 * (1.0 + cos(M_PI * frac));
            CHECK_MSG(fabs(cap.steps[i].lr - want) <= 1e-9 * lr,
                      "schedule %d step %d: lr %.10g, expected %.10g", k, s, cap.steps[i].lr, want);
        }
    }
}

/* A token budget rounds up to whole steps. A time budget counts training only: the run's
 * clock excludes its evaluations (here most of the wall time), and after the warmup the lr
 * holds (no known step count to decay over). */
TEST(budgets) {
    RunConfig c;
    loop_config(&c, corpus); /* 64 tokens per step */
    c.train.steps = 0;
    c.train.tokens = 1000;
    EndEvent end;
    CHECK(train_once(&c, 1, NULL, &end, NULL, NULL) == RUN_DONE);
    CHECK_MSG(end.steps == 16 && end.tokens == 1024, "tokens budget: %ld steps, %ld tokens",
              end.steps, end.tokens);

    c.train.tokens = 0;
    c.train.seconds = 0.2;
    c.train.warmup_steps = 2;
    c.train.log_every = 1000000; /* step events: the last one only */
    c.train.eval_every = 20;
    c.train.eval_tokens = 16384;
    Capture cap = {.sink = {capture_emit}};
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    CHECK(train_once(&c, 1, &cap.sink, &end, NULL, NULL) == RUN_DONE);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double wall = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    CHECK_MSG(end.train_seconds >= 0.2, "time budget 0.2 s: trained %.3f s in %ld steps",
              end.train_seconds, end.steps);
    CHECK(cap.n_steps == 1 && cap.steps[0].time == end.train_seconds);
    CHECK(cap.n_steps == 1 && cap.steps[0].lr == c.train.lr);
    /* the evaluations ran (one per 20 steps, plus the last) and took time the budget did not
     * count (whatever the machine's speed: how many steps fit is its business) */
    CHECK_MSG(cap.n_evals == (int)(end.steps / 20 + (end.steps % 20 != 0)), "%d evals, %ld steps",
              cap.n_evals, end.steps);
    CHECK_MSG(wall > end.train_seconds, "wall %.3f s vs training %.3f s (%d evals)", wall,
              end.train_seconds, cap.n_evals);

    /* it stops at the first step that reaches the budget: every step logged, the one
     * before the last was still under it */
    Capture all = {.sink = {capture_emit}};
    c.train.log_every = 1;
    CHECK(train_once(&c, 1, &all.sink, &end, NULL, NULL) == RUN_DONE);
    CHECK(all.n_steps == end.steps && all.last.time == end.train_seconds);
    CHECK_MSG(end.steps == 1 || all.prev.time < 0.2, "stopped at step %ld, %.3f s before it",
              end.steps, all.prev.time);
}

/* grad_clip rescales the gradient when its global norm is above the limit, and only then;
 * step events report the norm before clipping. */
TEST(grad_clip) {
    RunConfig c;
    loop_config(&c, corpus);
    c.train.steps = 6;
    float *p[3] = {NULL, NULL, NULL};
    size_t n[3];
    Capture cap[3];
    const double clip[3] = {0.0, 1e9, 0.05};
    EndEvent end;
    for (int k = 0; k < 3; k++) {
        c.train.grad_clip = clip[k];
        cap[k] = (Capture){.sink = {capture_emit}};
        CHECK(train_once(&c, 3, &cap[k].sink, &end, &p[k], &n[k]) == RUN_DONE);
    }
    if (p[0] && p[1] && p[2]) {
        CHECK_MSG(memcmp(p[0], p[1], n[0] * sizeof(float)) == 0,
                  "an inactive clip changed the run");
        CHECK_MSG(memcmp(p[0], p[2], n[0] * sizeof(float)) != 0, "an active clip changed nothing");
        CHECK(cap[0].steps[0].grad_norm > 0.05);
        CHECK(cap[2].steps[0].grad_norm == cap[0].steps[0].grad_norm); /* same params, pre-clip */
    }
    for (int k = 0; k < 3; k++)
        free(p[k]);
}

/* adamw_step (clip scale and AdamW of every tensor in one pass) against the passes it
 * replaced: g *= scale over every gradient, then adamw_update tensor by tensor. The same
 * bytes in the parameters and the moments; adamw_step leaves the gradients unclipped. */
TEST(adamw_fused) {
    ModelConfig mc;
    model_config_default(&mc);
    model_config_preset(&mc, "micro");
    mc.vocab_size = 37;
    char err[ABL_ERR_MAX];
    GPT a, b;
    CHECK_MSG(gpt_alloc(&a, &mc, 2, 8, err) == 0, "%s", err);
    CHECK_MSG(gpt_alloc(&b, &mc, 2, 8, err) == 0, "%s", err);
    size_t n = a.n_params, bytes = n * sizeof(float);
    float *ma = calloc(n, sizeof(float)), *va = calloc(n, sizeof(float));
    float *mb = calloc(n, sizeof(float)), *vb = calloc(n, sizeof(float));
    float *g0 = calloc(n, sizeof(float));
    CHECK(ma && va && mb && vb && g0);
    if (!(ma && va && mb && vb && g0)) goto done;
    gpt_init_weights(&a, 7);
    memcpy(b.params, a.params, bytes);
    uint64_t s = 11;
    const float scales[3] = {1.0f, 0.37f, 1.0f};
    for (int step = 0; step < 3; step++) {
        for (size_t i = 0; i < n; i++)
            a.grads[i] = (float)((int64_t)(test_splitmix64(&s) % 2001) - 1000) * 1e-4f;
        memcpy(b.grads, a.grads, bytes);
        memcpy(g0, a.grads, bytes);
        AdamW opt = {3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
        if (scales[step] != 1.0f)
            for (size_t i = 0; i < n; i++)
                a.grads[i] *= scales[step];
        for (int i = 0; i < T_COUNT; i++) {
            const TensorInfo *ti = &a.tensors[i];
            if (ti->size == 0) continue;
            adamw_update(a.params + ti->offset, a.grads + ti->offset, ma + ti->offset,
                         va + ti->offset, ti->size, ti->decay, &opt, step + 1);
        }
        adamw_step(&b, mb, vb, scales[step], &opt, step + 1);
        CHECK_MSG(memcmp(a.params, b.params, bytes) == 0, "parameters differ at step %d", step);
        CHECK_MSG(memcmp(g0, b.grads, bytes) == 0, "gradients changed at step %d", step);
        CHECK_MSG(memcmp(ma, mb, bytes) == 0 && memcmp(va, vb, bytes) == 0,
                  "moments differ at step %d", step);
    }
done:
    free(ma);
    free(va);
    free(mb);
    free(vb);
    free(g0);
    gpt_free(&a);
    gpt_free(&b);
}

int main(int argc, char **argv) {
    if (test_tmpdir_corpus("test_engine", &dir, &corpus) != 0) return 1;
    return test_main(argc, argv, "test_engine");
}
