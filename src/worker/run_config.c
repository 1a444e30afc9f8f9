#include "run_config.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const schedule_names[SCHED_COUNT] = {"constant", "linear", "cosine"};
const char *const tokenizer_names[TOK_COUNT] = {"char", "byte", "tokens", "gpt2"};

/* Defaults: the micro recipe of seeds-digest.md (AdamW 1e-2, betas 0.9/0.95, wd 0.1,
 * warmup 100 then cosine to 0, clip 1.0, batch 32) with a short step budget. */
void run_config_default(RunConfig *c) {
    memset(c, 0, sizeof *c);
    model_config_default(&c->model);
    TrainConfig *t = &c->train;
    t->lr = 1e-2;
    t->beta1 = 0.9;
    t->beta2 = 0.95;
    t->eps = 1e-8;
    t->weight_decay = 0.1;
    t->schedule = SCHED_COSINE;
    t->warmup_steps = 100;
    t->min_lr = 0.0;
    t->grad_clip = 1.0;
    t->batch_size = 32;
    t->steps = 1000;
    t->eval_every = 200;
    t->eval_tokens = 16384;
    t->log_every = 1;
    t->calibrate_steps = 20;
    t->data_seed = -1;
    c->data.tokenizer = TOK_CHAR;
    c->data.val_fraction = 0.1;
    c->stats.every = 100;
    snprintf(c->sample.prompt, sizeof c->sample.prompt, "\n");
    c->sample.tokens = 200;
    c->sample.temperature = 0.8;
}

int run_config_validate(const RunConfig *c, char err[ABL_ERR_MAX]) {
    ModelConfig m = c->model;
    if (m.vocab_size == 0) m.vocab_size = 256; /* not known until the data is read */
    if (model_config_validate(&m, err) != 0) return -1;
    const TrainConfig *t = &c->train;
    if (t->steps < 0 || t->tokens < 0 || t->seconds < 0 || t->flops < 0 || t->tokens_per_param < 0)
        ABL_FAIL("train budgets must be positive");
    int budgets = (t->steps > 0) + (t->tokens > 0) + (t->seconds > 0) + (t->flops > 0) +
                  (t->tokens_per_param > 0);
    if (budgets != 1)
        ABL_FAIL("exactly one of train.steps, train.tokens, train.seconds, train.flops, "
                 "train.tokens_per_param must be set (%d are)",
                 budgets);
    if (!(t->lr > 0)) ABL_FAIL("train.lr must be positive (got %g)", t->lr);
    if (!(t->beta1 >= 0 && t->beta1 < 1))
        ABL_FAIL("train.beta1 must be in [0, 1) (got %g)", t->beta1);
    if (!(t->beta2 >= 0 && t->beta2 < 1))
        ABL_FAIL("train.beta2 must be in [0, 1) (got %g)", t->beta2);
    if (!(t->eps > 0)) ABL_FAIL("train.eps must be positive (got %g)", t->eps);
    if (!(t->weight_decay >= 0)) ABL_FAIL("train.weight_decay must be >= 0");
    if (t->warmup_steps < 0) ABL_FAIL("train.warmup_steps must be >= 0");
    if (!(t->min_lr >= 0 && t->min_lr <= t->lr))
        ABL_FAIL("train.min_lr must be in [0, train.lr] (got %g)", t->min_lr);
    if (!(t->grad_clip >= 0)) ABL_FAIL("train.grad_clip must be >= 0 (0 disables clipping)");
    if (t->batch_size < 1) ABL_FAIL("train.batch_size must be positive (got %d)", t->batch_size);
    /* token counts are int64 (the run's tokens, the plan's totals): a budget whose tokens
     * would not fit is refused rather than wrapped to a negative or zero budget */
    long per_step = (long)t->batch_size * m.context;
    if (t->steps > LONG_MAX / per_step)
        ABL_FAIL("train.steps %ld x train.batch_size %d x model.context %d is more than 2^63-1 "
                 "training tokens",
                 t->steps, t->batch_size, m.context);
    if (t->tokens > 0 && run_config_total_steps(c) > LONG_MAX / per_step)
        ABL_FAIL("train.tokens %ld, rounded up to whole steps of train.batch_size %d x "
                 "model.context %d tokens, is more than 2^63-1",
                 t->tokens, t->batch_size, m.context);
    if (t->flops > 0) { /* with the vocabulary above: the plan checks again with the data's */
        RunConfig v = *c;
        v.model = m;
        long steps = run_config_total_steps(&v);
        if (!isfinite(t->flops) || steps < 1 || steps > LONG_MAX / per_step)
            ABL_FAIL("train.flops %g at %.6g FLOPs a token is %s training tokens", t->flops,
                     model_flops_per_token(&m), steps < 1 ? "not a count of" : "more than 2^63-1");
    }
    if (t->tokens_per_param > 0) {
        long steps = run_config_total_steps(c);
        if (!isfinite(t->tokens_per_param) || steps < 1 || steps > LONG_MAX / per_step)
            ABL_FAIL("train.tokens_per_param %g x %zu non-embedding parameters is %s training "
                     "tokens",
                     t->tokens_per_param, model_nonembedding_param_count(&m),
                     steps < 1 ? "not a count of" : "more than 2^63-1");
    }
    if (t->calibrate < 0) ABL_FAIL("train.calibrate must be >= 0 (got %d; 0 = off)", t->calibrate);
    if (t->calibrate > 0 && !(t->seconds > 0))
        ABL_FAIL("train.calibrate %d needs a time budget: it turns train.seconds into a step "
                 "budget from measured tokens/s (set train.seconds, or drop train.calibrate)",
                 t->calibrate);
    /* the calibrated budget, round(tokens/s x seconds / tokens a step), must be a count of
     * steps whose tokens fit in int64 at any rate a machine reaches (up to 9.2e9 tokens/s):
     * a larger train.seconds overflowed it, and the run then failed for "its calibration
     * failed" (a sweep) or trained by the clock, uncalibrated (ablate train) */
    if (t->calibrate > 0 && t->seconds > CALIB_MAX_SECONDS)
        ABL_FAIL("train.seconds %g with train.calibrate is more than %g s (31 years): its "
                 "calibrated step budget could not be counted",
                 t->seconds, CALIB_MAX_SECONDS);
    if (t->data_seed < -1)
        ABL_FAIL("train.data_seed must be >= 0, or -1 for the run's seed (got %ld)", t->data_seed);
    if (t->calibrate_steps < 1)
        ABL_FAIL("train.calibrate_steps must be positive (got %d)", t->calibrate_steps);
    if (t->eval_every < 0) ABL_FAIL("train.eval_every must be >= 0");
    if (t->eval_tokens < 1) ABL_FAIL("train.eval_tokens must be positive");
    if (t->log_every < 1) ABL_FAIL("train.log_every must be positive");
    if (c->data.path[0] == '\0') ABL_FAIL("data.path is required");
    if (!(c->data.val_fraction >= 0 && c->data.val_fraction < 1))
        ABL_FAIL("data.val_fraction must be in [0, 1) (got %g)", c->data.val_fraction);
    if (!(c->data.test_fraction >= 0 && c->data.val_fraction + c->data.test_fraction < 1))
        ABL_FAIL("data.test_fraction must be >= 0 and leave a train split beside "
                 "data.val_fraction %g (got %g)",
                 c->data.val_fraction, c->data.test_fraction);
    if (c->data.vocab_size < 0) ABL_FAIL("data.vocab_size must be positive");
    if (c->data.tokenizer == TOK_TOKENS && c->data.vocab_size > 65536)
        ABL_FAIL("data.vocab_size %d does not fit the uint16 tokens of the .bin format",
                 c->data.vocab_size);
    if (c->data.tokenizer == TOK_GPT2 && c->data.vocab_size != 0 && c->data.vocab_size != 50257)
        ABL_FAIL("data.vocab_size is for the tokens tokenizer; gpt2's vocabulary has 50257 "
                 "tokens (got %d)",
                 c->data.vocab_size);
    if (c->stats.every < 0) ABL_FAIL("stats.every must be >= 0");
    if (c->sample.tokens < 0) ABL_FAIL("sample.tokens must be >= 0");
    if (!(c->sample.temperature > 0)) ABL_FAIL("sample.temperature must be positive");
    return 0;
}

long run_config_total_steps(const RunConfig *c) {
    const TrainConfig *t = &c->train;
    if (t->steps > 0) return t->steps;
    if (t->seconds > 0) return t->calibrated_steps > 0 ? t->calibrated_steps : -1;
    if (t->flops > 0) { /* needs the resolved vocabulary (the lm_head's FLOPs) */
        double per_step = model_flops_per_token(&c->model) * t->batch_size * c->model.context;
        if (c->model.vocab_size <= 0 || !(per_step > 0)) return -1;
        double steps = ceil(t->flops / per_step);
        return steps >= 9.2e18 ? LONG_MAX : (long)steps;
    }
    if (t->tokens_per_param > 0) { /* non-embedding parameters: no vocabulary needed */
        double per_step = (double)t->batch_size * c->model.context;
        if (!(per_step > 0)) return -1;
        double steps = ceil(t->tokens_per_param *
                            (double)model_nonembedding_param_count(&c->model) / per_step);
        return steps >= 9.2e18 ? LONG_MAX : (long)steps;
    }
    if (t->tokens > 0) {
        long per_step = (long)t->batch_size * c->model.context;
        if (per_step < 1) return -1;
        return t->tokens / per_step + (t->tokens % per_step != 0); /* ceil, without overflow */
    }
    return -1;
}

double run_config_lr(const TrainConfig *t, long step, long total) {
    /* step is 0-based here: the step about to be taken. */
    if (t->warmup_steps > 0 && step < t->warmup_steps)
        return t->lr * (double)(step + 1) / (double)t->warmup_steps;
    if (t->schedule == SCHED_CONSTANT || total <= 0) return t->lr;
    long span = total - t->warmup_steps;
    double frac = span > 0 ? (double)(step - t->warmup_steps) / (double)span : 1.0;
    if (frac > 1.0) frac = 1.0;
    double decay = t->schedule == SCHED_LINEAR ? 1.0 - frac : 0.5 * (1.0 + cos(M_PI * frac));
    return t->min_lr + (t->lr - t->min_lr) * decay;
}
