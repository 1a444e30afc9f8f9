/* The instability rule (src/worker/run_health.c, docs/metrics.md) and the near-zero fraction
 * of the MLP activation, in the run itself:
 * - the rule's edges: a non-finite loss fires at any step, a loss above ln V + 1 only after
 *   warmup, the first firing is kept;
 * - ordinary short runs of the shipped micro recipe (quickstart: lr 1e-2, warmup 50, clip 1)
 *   over variants of the micro study and the smooth activations end done and unflagged;
 * - a deliberately unstable run (lr 5, no clipping, no warmup) ends done but flagged
 *   above_uniform at the step its loss blew up; a diverged run is flagged nonfinite;
 * - the verdict survives a checkpoint, and a checkpoint written before it existed loads
 *   with the verdict starting over from its step;
 * - GELU and Tanh, whose exact-zero fraction is 0, have a near-zero fraction above 0 (and at
 *   least the exact-zero fraction for ReLU). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"
#include "worker/knobs.h"
#include "worker/run_health.h"
#include "worker/train.h"

static const char *dir, *corpus; /* set by main for every case */

TEST(rule) {
    RunHealth h;
    const int V = 65; /* ln 65 + 1 = 5.174 */
    double lim = run_health_limit(V);
    CHECK_CMP(fabs(lim - (log(65.0) + 1.0)), <, 1e-12);
    run_health_init(&h);
    CHECK(h.kind == INSTAB_NONE && h.step == 0 && isnan(h.loss));
    /* during warmup (step <= warmup_steps) a high loss is the init's or the ramp's */
    CHECK(run_health_observe(&h, 10, 100.0, 10, V) == 0 && h.kind == INSTAB_NONE);
    CHECK(run_health_observe(&h, 11, lim, 10, V) == 0 && h.kind == INSTAB_NONE); /* not above */
    CHECK_CMP(run_health_observe(&h, 12, nextafter(lim, INFINITY), 10, V), ==, 1);
    CHECK(h.kind == INSTAB_ABOVE_UNIFORM && h.step == 12 && h.loss > lim);
    /* the first firing is kept */
    CHECK(run_health_observe(&h, 13, NAN, 10, V) == 0 && h.kind == INSTAB_ABOVE_UNIFORM);
    CHECK_CMP(h.step, ==, 12);
    /* a non-finite loss fires during warmup too */
    run_health_init(&h);
    CHECK_CMP(run_health_observe(&h, 3, INFINITY, 10, V), ==, 1);
    CHECK(h.kind == INSTAB_NONFINITE && h.step == 3);
    EndEvent end;
    memset(&end, 0, sizeof end);
    run_health_fill_end(&h, &end);
    CHECK(end.instability == INSTAB_NONFINITE && end.unstable_step == 3 &&
          isinf(end.unstable_loss));
}

/* A deterministic stand-in for a healthy run's training loss after the warmup: a decaying
 * trend plus batch noise uniform in +-0.1 (mean absolute deviation 0.05, the micro recipe's). */
static double healthy_loss(long step) {
    static uint32_t x = 12345;
    x = x * 1664525u + 1013904223u;
    return 2.0 + 0.5 * exp(-(double)step / 100) + 0.2 * ((double)(x >> 8) / (1u << 24) - 0.5);
}

/* The loss_spike clause: RUN_SPIKE_STEPS consecutive steps more than RUN_SPIKE_K scales above
 * the level fire it at the first of them; fewer do not, a single wild step does not, the
 * level and scale do not learn from steps above, and nothing fires while the detector warms
 * in (RUN_SPIKE_SPAN steps after the warmup). */
TEST(loss_spike) {
    const int V = 50257; /* ln V + 1 = 11.8: the above_uniform clause stays out of the way */
    const long warm = 10;
    RunHealth h;
    run_health_init(&h);
    long step = 1;
    /* a jump right after the warmup, while the detector warms in: no verdict */
    for (; step <= warm + 30; step++)
        CHECK(run_health_observe(&h, step, step > warm + 15 ? 4.0 : healthy_loss(step), warm, V) ==
              0);
    for (; step <= 400; step++)
        CHECK(run_health_observe(&h, step, healthy_loss(step), warm, V) == 0);
    CHECK_MSG(h.kind == INSTAB_NONE && h.scale > 0.03 && h.scale < 0.08, "scale %g", h.scale);
    /* one wild step (3 nats up), then 9 steps 0.6 nats up: not a spike; the level and
     * scale are those before the excursion when it ends */
    double level = h.level, scale = h.scale;
    CHECK(run_health_observe(&h, step++, h.level + 3.0, warm, V) == 0);
    CHECK(h.level == level && h.scale == scale && h.above == 1);
    CHECK(run_health_observe(&h, step, healthy_loss(step), warm, V) == 0 && h.above == 0);
    step++;
    level = h.level;
    scale = h.scale;
    for (int i = 0; i < RUN_SPIKE_STEPS - 1; i++)
        CHECK(run_health_observe(&h, step++, level + 0.6, warm, V) == 0);
    CHECK(h.level == level && h.scale == scale); /* frozen through the excursion */
    CHECK(h.kind == INSTAB_NONE && h.above == RUN_SPIKE_STEPS - 1);
    for (int i = 0; i < 100; i++, step++)
        CHECK(run_health_observe(&h, step, healthy_loss(step), warm, V) == 0);
    /* 10 steps 0.6 nats up: flagged at the first of them, with its loss */
    long first = step;
    for (int i = 0; i < RUN_SPIKE_STEPS; i++, step++)
        CHECK(run_health_observe(&h, step, h.level + 0.6 + 0.01 * i, warm, V) ==
              (i == RUN_SPIKE_STEPS - 1));
    CHECK_MSG(h.kind == INSTAB_LOSS_SPIKE && h.step == first && h.loss > 2.0, "%s at %ld (%g)",
              instability_names[h.kind], h.step, h.loss);
    EndEvent end;
    memset(&end, 0, sizeof end);
    run_health_fill_end(&h, &end);
    CHECK(end.instability == INSTAB_LOSS_SPIKE && end.unstable_step == first);
    CHECK(!strcmp(instability_names[INSTAB_LOSS_SPIKE], "loss_spike"));
}

/* The quickstart recipe on the micro preset, short. */
static void recipe(RunConfig *c, const char *corpus, long steps) {
    run_config_default(c);
    model_config_preset(&c->model, "micro");
    snprintf(c->data.path, sizeof c->data.path, "%s", corpus);
    c->train.steps = steps;
    c->train.lr = 1e-2;
    c->train.warmup_steps = 50;
    c->train.eval_every = 0;
    c->train.eval_tokens = 1024;
    c->train.log_every = 10;
    c->stats.every = 50;
    c->sample.tokens = 0;
}

/* Keeps the act events' near-zero and zero fractions (the last per layer). */
typedef struct {
    EventSink sink;
    int n_acts;
    double near_zero[8], zero[8];
} Acts;

static void acts_emit(EventSink *self, const Event *ev) {
    Acts *a = (Acts *)self;
    if (ev->kind != EV_ACT || ev->u.act.layer >= 8) return;
    a->n_acts++;
    a->near_zero[ev->u.act.layer] = ev->u.act.near_zero_frac;
    a->zero[ev->u.act.layer] = ev->u.act.zero_frac;
}

/* Trains c to its budget (or, with stop_at > 0, checkpoints into ckpt at that step and stops);
 * with resume_from, first loads that checkpoint. */
static RunStatus run(const RunConfig *c, EventSink *sink, EndEvent *end, long stop_at,
                     const char *ckpt, const char *resume_from);

typedef struct {
    const Trainer *t;
    long stop_at;
    const char *path;
} Stop;

static TrainPoll stop_poll(void *ctx) {
    Stop *s = ctx;
    return s->t->step >= s->stop_at ? TRAIN_CHECKPOINT : TRAIN_CONTINUE;
}

static int stop_save(void *ctx, const Trainer *t) {
    Stop *s = ctx;
    FILE *f = fopen(s->path, "wb");
    if (!f) return -1;
    int rc = trainer_save(t, f);
    return fclose(f) == 0 ? rc : -1;
}

static RunStatus run(const RunConfig *c, EventSink *sink, EndEvent *end, long stop_at,
                     const char *ckpt, const char *resume_from) {
    char err[ABL_ERR_MAX];
    Dataset d;
    Trainer t;
    if (dataset_load(&d, &c->data, c->model.context, err) != 0 ||
        trainer_init(&t, c, 1, &d, err) != 0) {
        fprintf(stderr, "%s\n", err);
        test_failures++;
        return RUN_FAILED;
    }
    if (resume_from) {
        FILE *f = fopen(resume_from, "rb");
        CHECK_CMP(f, !=, NULL);
        if (f) {
            CHECK_MSG(trainer_load(&t, f, err) == 0, "%s", err);
            fclose(f);
        }
    }
    Stop s = {&t, stop_at, ckpt};
    TrainControl ctl = {stop_poll, &s, stop_save, &s};
    RunStatus st = trainer_run(&t, sink, stop_at > 0 ? &ctl : NULL, end);
    trainer_free(&t);
    dataset_free(&d);
    return st;
}

/* The micro study's variants and the smooth activations, short: none is flagged. */
TEST(ordinary) {
    static const char *const sets[] = {
        "",
        "model.n_layer=4",
        "model.context=32",
        "model.activation=gelu",
        "model.activation=tanh",
        "model.activation=swiglu",
        "model.norm=post",
        "model.position=rope",
    };
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++) {
        RunConfig c;
        recipe(&c, corpus, 100);
        char err[ABL_ERR_MAX];
        if (sets[i][0]) CHECK_MSG(knob_assign(&c, sets[i], err) == 0, "%s", err);
        Acts a = {{acts_emit}, 0, {0}, {0}};
        EndEvent end;
        CHECK_CMP(run(&c, &a.sink, &end, 0, NULL, NULL), ==, RUN_DONE);
        CHECK_MSG(end.instability == INSTAB_NONE && end.unstable_step == 0 &&
                      isnan(end.unstable_loss),
                  "%s: flagged %s at step %ld (loss %g)", sets[i][0] ? sets[i] : "baseline",
                  instability_names[end.instability], end.unstable_step, end.unstable_loss);
        CHECK_CMP(a.n_acts, ==, 2 * c.model.n_layer);
        for (int l = 0; l < c.model.n_layer && l < 8; l++) {
            CHECK_MSG(a.near_zero[l] >= a.zero[l] && a.near_zero[l] < 1.0,
                      "%s layer %d: near_zero %g zero %g", sets[i], l, a.near_zero[l], a.zero[l]);
            if (strstr(sets[i], "gelu") || strstr(sets[i], "tanh")) {
                CHECK_MSG(a.zero[l] == 0.0, "%s: exact zeros %g", sets[i], a.zero[l]);
                CHECK_MSG(a.near_zero[l] > 0.0, "%s layer %d: near_zero_frac 0", sets[i], l);
            }
        }
    }
}

/* lr 5 without clipping or warmup: the loss leaves ln V far behind at once, then the run
 * limps on to its budget: done, flagged. */
TEST(unstable) {
    RunConfig c;
    recipe(&c, corpus, 40);
    c.train.lr = 5.0;
    c.train.grad_clip = 0.0;
    c.train.warmup_steps = 0;
    EndEvent end;
    CHECK_CMP(run(&c, NULL, &end, 0, NULL, NULL), ==, RUN_DONE);
    CHECK_MSG(end.status == RUN_DONE && end.instability == INSTAB_ABOVE_UNIFORM,
              "status %s instability %s", run_status_names[end.status],
              instability_names[end.instability]);
    CHECK_MSG(end.unstable_step >= 2 && end.unstable_step <= 5 &&
                  end.unstable_loss > run_health_limit(256), /* any byte-level vocabulary */
              "step %ld loss %g", end.unstable_step, end.unstable_loss);
    long step = end.unstable_step;
    double loss = end.unstable_loss;

    /* stopped at step 20 with a checkpoint, resumed from it: the same verdict */
    char ckpt[512], old[512];
    snprintf(ckpt, sizeof ckpt, "%s/unstable.ckpt", dir);
    CHECK_CMP(run(&c, NULL, &end, 20, ckpt, NULL), ==, RUN_INTERRUPTED);
    CHECK(end.instability == INSTAB_ABOVE_UNIFORM && end.unstable_step == step);
    CHECK_CMP(run(&c, NULL, &end, 0, NULL, ckpt), ==, RUN_DONE);
    CHECK_MSG(end.instability == INSTAB_ABOVE_UNIFORM && end.unstable_step == step &&
                  end.unstable_loss == loss,
              "resumed: %s at %ld (loss %g)", instability_names[end.instability], end.unstable_step,
              end.unstable_loss);

    /* a checkpoint without the verdict block (written before it existed): loads, unflagged.
     * The block is the last 80 bytes trainer_save writes (version 2: the verdict's 32, then
     * the loss_spike detector's 48). */
    snprintf(old, sizeof old, "%s/old.ckpt", dir);
    FILE *in = fopen(ckpt, "rb"), *out = fopen(old, "wb");
    CHECK(in && out);
    if (in && out) {
        fseek(in, 0, SEEK_END);
        long size = ftell(in) - 80;
        fseek(in, 0, SEEK_SET);
        char buf[4096];
        for (long left = size; left > 0;) {
            size_t k = (size_t)(left < (long)sizeof buf ? left : (long)sizeof buf);
            CHECK(fread(buf, 1, k, in) == k && fwrite(buf, 1, k, out) == k);
            left -= (long)k;
        }
        char magic[9] = {0};
        CHECK(fread(magic, 1, 8, in) == 8 && !strcmp(magic, "ABLHLTH2"));
    }
    if (in) fclose(in);
    if (out) fclose(out);
    /* it loads; the verdict starts over from the checkpoint's step (this run, still
     * unstable, fires again at once) */
    CHECK_CMP(run(&c, NULL, &end, 0, NULL, old), ==, RUN_DONE);
    CHECK_MSG(end.instability == INSTAB_ABOVE_UNIFORM && end.unstable_step > 20,
              "old checkpoint: %s at %ld", instability_names[end.instability], end.unstable_step);
    /* a version-1 block (the verdict without the detector): the verdict loads */
    in = fopen(ckpt, "rb");
    out = fopen(old, "ab");
    CHECK(in && out);
    if (in && out) {
        char block[32];
        fseek(in, -80, SEEK_END);
        CHECK(fread(block, 1, 32, in) == 32);
        memcpy(block, "ABLHLTH1", 8);
        CHECK(fwrite(block, 1, 32, out) == 32);
    }
    if (in) fclose(in);
    if (out) fclose(out);
    CHECK_CMP(run(&c, NULL, &end, 0, NULL, old), ==, RUN_DONE);
    CHECK_MSG(end.instability == INSTAB_ABOVE_UNIFORM && end.unstable_step == step,
              "version-1 block: %s at %ld", instability_names[end.instability], end.unstable_step);
    unlink(ckpt);
    unlink(old);

    /* a run that diverges is flagged nonfinite at the step it ended (inside a long warmup,
     * where the other clause cannot fire first) */
    c.train.lr = 1e30;
    c.train.steps = 200;
    c.train.warmup_steps = 1000;
    CHECK_CMP(run(&c, NULL, &end, 0, NULL, NULL), ==, RUN_DIVERGED);
    CHECK(end.instability == INSTAB_NONFINITE && end.unstable_step == end.steps);
}

/* The loss_spike detector's state goes through a checkpoint whole: a run resumed mid-way
 * judges its later steps against the level and scale the run never stopped would have. */
TEST(detector_checkpointed) {
    RunConfig c;
    recipe(&c, corpus, 120);
    char ckpt[512];
    snprintf(ckpt, sizeof ckpt, "%s/detector.ckpt", dir);
    EndEvent end;
    CHECK_CMP(run(&c, NULL, &end, 110, ckpt, NULL), ==, RUN_INTERRUPTED);
    char err[ABL_ERR_MAX];
    Dataset d;
    Trainer a, b;
    if (dataset_load(&d, &c.data, c.model.context, err) != 0 ||
        trainer_init(&a, &c, 1, &d, err) != 0 || trainer_init(&b, &c, 1, &d, err) != 0) {
        CHECK_MSG(0, "%s", err);
        return;
    }
    FILE *f = fopen(ckpt, "rb");
    CHECK(f && trainer_load(&a, f, err) == 0);
    if (f) fclose(f);
    /* saved again from what was loaded, and loaded into a fresh trainer: the same state,
     * which has seen the 60 steps after the warmup of 50 */
    f = fopen(ckpt, "wb");
    CHECK(f && trainer_save(&a, f) == 0);
    if (f) fclose(f);
    f = fopen(ckpt, "rb");
    CHECK(f && trainer_load(&b, f, err) == 0);
    if (f) fclose(f);
    CHECK_MSG(a.health.seen == 60 && a.health.scale > 0 && isfinite(a.health.level),
              "seen %ld scale %g level %g", a.health.seen, a.health.scale, a.health.level);
    CHECK(b.health.seen == a.health.seen && b.health.level == a.health.level &&
          b.health.scale == a.health.scale && b.health.above == a.health.above);
    trainer_free(&a);
    trainer_free(&b);
    dataset_free(&d);
    unlink(ckpt);
}

int main(int argc, char **argv) {
    if (test_tmpdir_corpus("test_run_health", &dir, &corpus) != 0) return 1;
    return test_main(argc, argv, "test_run_health");
}
