/* The engine's contract: the reference families' exact parameter counts, deterministic
 * training (same seed: identical bytes; another seed: different), and a micro model that
 * memorizes a tiny corpus. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"
#include "test_util.h"
#include "worker/knobs.h"
#include "worker/train.h"

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

static void test_param_counts(void) {
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

/* The micro defaults on a data file. */
static void micro_config(RunConfig *c, const char *path) {
    run_config_default(c);
    snprintf(c->data.path, sizeof c->data.path, "%s", path);
    c->train.eval_every = 0;
    c->train.eval_tokens = 256;
}

/* Loads the data, trains one run and returns its status; *params (if asked) receives a
 * malloc'd copy of the final parameters and *n_params their count. */
static RunStatus train_once(const RunConfig *c, uint64_t seed, EndEvent *end, float **params,
                            size_t *n_params) {
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
    RunStatus st = trainer_run(&t, NULL, NULL, end);
    if (params) {
        *n_params = t.gpt.n_params;
        *params = malloc(t.gpt.n_params * sizeof(float));
        memcpy(*params, t.gpt.params, t.gpt.n_params * sizeof(float));
    }
    trainer_free(&t);
    dataset_free(&d);
    return st;
}

static void test_determinism(const char *corpus) {
    RunConfig c;
    micro_config(&c, corpus);
    c.train.steps = 30;
    c.train.warmup_steps = 5;
    c.stats.every = 10;
    c.sample.tokens = 16;
    EndEvent e1, e2, e3;
    float *a = NULL, *b = NULL, *x = NULL;
    size_t n1 = 0, n2 = 0, n3 = 0;
    CHECK(train_once(&c, 7, &e1, &a, &n1) == RUN_DONE);
    CHECK(train_once(&c, 7, &e2, &b, &n2) == RUN_DONE);
    CHECK(train_once(&c, 8, &e3, &x, &n3) == RUN_DONE);
    CHECK(a && b && x && n1 == n2 && n1 == n3);
    if (a && b && x) {
        CHECK_MSG(memcmp(a, b, n1 * sizeof(float)) == 0, "same seed gave different weights");
        CHECK_MSG(e1.final_val_loss == e2.final_val_loss, "same seed gave different losses");
        CHECK_MSG(memcmp(a, x, n1 * sizeof(float)) != 0, "another seed gave the same weights");
        CHECK(e1.final_val_loss != e3.final_val_loss);
    }
    free(a);
    free(b);
    free(x);
}

/* A micro model memorizes a tiny corpus in which every character determines the next (a
 * cycle of 54 distinct characters): the loss goes to near zero. */
static void test_overfit(const char *dir) {
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
    CHECK(train_once(&c, 1, &end, NULL, NULL) == RUN_DONE);
    /* with val_fraction 0 the evaluation windows come from the (memorized) training text */
    CHECK_MSG(end.final_val_loss < 0.05, "final loss %.4f, expected < 0.05", end.final_val_loss);
    CHECK_MSG(end.final_val_acc > 0.99, "final accuracy %.4f", end.final_val_acc);
}

/* A non-finite loss ends the run as diverged, at the step it happened. */
static void test_divergence(const char *corpus) {
    RunConfig c;
    micro_config(&c, corpus);
    c.train.steps = 200;
    c.train.lr = 1e30;
    c.train.warmup_steps = 0;
    c.train.grad_clip = 0;
    EndEvent end;
    CHECK(train_once(&c, 1, &end, NULL, NULL) == RUN_DIVERGED);
    CHECK(end.status == RUN_DIVERGED && end.steps > 0 && end.steps < 200);
    CHECK(strstr(end.message, "non-finite") != NULL);
}

int main(void) {
    const char *dir = test_tmpdir();
    const char *corpus = test_corpus(dir);
    CHECK(corpus != NULL);
    test_param_counts();
    test_determinism(corpus);
    test_overfit(dir);
    test_divergence(corpus);
    return test_finish("test_engine");
}
