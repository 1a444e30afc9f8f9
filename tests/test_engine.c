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

/* Trains a micro model for `steps` steps and returns the parameter buffer (malloc'd). */
static float *train_params(const char *corpus, uint64_t seed, long steps, double *final_loss,
                           size_t *n_params) {
    RunConfig c;
    run_config_default(&c);
    snprintf(c.data.path, sizeof c.data.path, "%s", corpus);
    c.train.steps = steps;
    c.train.eval_every = 0;
    c.train.eval_tokens = 256;
    c.train.warmup_steps = 5;
    c.stats.every = 10;
    c.sample.tokens = 16;
    char err[ABL_ERR_MAX];
    Dataset d;
    if (dataset_load(&d, &c.data, c.model.context, err) != 0) {
        fprintf(stderr, "%s\n", err);
        test_failures++;
        return NULL;
    }
    Trainer t;
    CHECK_MSG(trainer_init(&t, &c, seed, &d, err) == 0, "%s", err);
    EndEvent end;
    CHECK(trainer_run(&t, NULL, NULL, &end) == RUN_DONE);
    *final_loss = end.final_val_loss;
    *n_params = t.gpt.n_params;
    float *p = malloc(t.gpt.n_params * sizeof(float));
    memcpy(p, t.gpt.params, t.gpt.n_params * sizeof(float));
    trainer_free(&t);
    dataset_free(&d);
    return p;
}

static void test_determinism(const char *corpus) {
    double l1, l2, l3;
    size_t n1, n2, n3;
    float *a = train_params(corpus, 7, 30, &l1, &n1);
    float *b = train_params(corpus, 7, 30, &l2, &n2);
    float *c = train_params(corpus, 8, 30, &l3, &n3);
    CHECK(a && b && c && n1 == n2 && n1 == n3);
    if (a && b && c) {
        CHECK_MSG(memcmp(a, b, n1 * sizeof(float)) == 0, "same seed gave different weights");
        CHECK_MSG(l1 == l2, "same seed gave different losses %.9g %.9g", l1, l2);
        CHECK_MSG(memcmp(a, c, n1 * sizeof(float)) != 0, "another seed gave the same weights");
        CHECK(l1 != l3);
    }
    free(a);
    free(b);
    free(c);
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
    run_config_default(&c);
    snprintf(c.data.path, sizeof c.data.path, "%s", path);
    c.data.val_fraction = 0.0;
    c.train.steps = 300;
    c.train.warmup_steps = 10;
    c.train.weight_decay = 0.0;
    c.train.eval_every = 0;
    c.train.eval_tokens = 512;
    c.sample.tokens = 0;
    char err[ABL_ERR_MAX];
    Dataset d;
    CHECK_MSG(dataset_load(&d, &c.data, c.model.context, err) == 0, "%s", err);
    Trainer t;
    CHECK_MSG(trainer_init(&t, &c, 1, &d, err) == 0, "%s", err);
    EndEvent end;
    CHECK(trainer_run(&t, NULL, NULL, &end) == RUN_DONE);
    /* with val_fraction 0 the evaluation windows come from the (memorized) training text */
    CHECK_MSG(end.final_val_loss < 0.05, "final loss %.4f, expected < 0.05", end.final_val_loss);
    CHECK_MSG(end.final_val_acc > 0.99, "final accuracy %.4f", end.final_val_acc);
    trainer_free(&t);
    dataset_free(&d);
}

/* A non-finite loss ends the run as diverged, at the step it happened. */
static void test_divergence(const char *corpus) {
    RunConfig c;
    run_config_default(&c);
    snprintf(c.data.path, sizeof c.data.path, "%s", corpus);
    c.train.steps = 200;
    c.train.lr = 1e30;
    c.train.warmup_steps = 0;
    c.train.grad_clip = 0;
    c.train.eval_tokens = 256;
    char err[ABL_ERR_MAX];
    Dataset d;
    CHECK(dataset_load(&d, &c.data, c.model.context, err) == 0);
    Trainer t;
    CHECK_MSG(trainer_init(&t, &c, 1, &d, err) == 0, "%s", err);
    EndEvent end;
    CHECK(trainer_run(&t, NULL, NULL, &end) == RUN_DIVERGED);
    CHECK(end.status == RUN_DIVERGED && end.steps > 0 && end.steps < 200);
    CHECK(strstr(end.message, "non-finite") != NULL);
    trainer_free(&t);
    dataset_free(&d);
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
