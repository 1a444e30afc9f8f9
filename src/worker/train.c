#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/adamw.h"
#include "model/generate.h"
#include "blas_env.h"
#include "util/clock.h"
#include "util/hash.h"
#include "provenance.h"
#include "sample_metrics.h"

void trainer_start_event(const RunConfig *cfg, StartEvent *ev) {
    memset(ev, 0, sizeof *ev);
    ev->params = (long)model_param_count(&cfg->model);
    ev->active_params = (long)model_active_param_count(&cfg->model);
    ev->flops_per_token = model_flops_per_token(&cfg->model);
    ev->kv_bytes_per_token = model_kv_bytes_per_token(&cfg->model);
    snprintf(ev->blas_core, sizeof ev->blas_core, "%s", blas_core());
    ev->blas_threads = blas_threads();
    clock_utc_now(ev->start_utc, sizeof ev->start_utc);
    ev->config = cfg;
}

int trainer_init(Trainer *t, const RunConfig *cfg, uint64_t seed, const Dataset *d,
                 char err[ABL_ERR_MAX]) {
    memset(t, 0, sizeof *t);
    blas_set_threads(); /* results must not depend on the machine's core count */
    t->cfg = *cfg;
    t->seed = seed;
    t->data = d;
    ModelConfig *mc = &t->cfg.model;
    if (mc->vocab_size == 0) mc->vocab_size = d->vocab_size;
    if (mc->vocab_size < d->vocab_size) {
        snprintf(err, ABL_ERR_MAX, "model.vocab_size %d is smaller than the data's vocabulary %d",
                 mc->vocab_size, d->vocab_size);
        return -1;
    }
    if (run_config_validate(&t->cfg, err) != 0) return -1;
    int B = t->cfg.train.batch_size, T = mc->context;
    if (gpt_alloc(&t->gpt, mc, B, T, err) != 0) return -1;
    size_t n = t->gpt.n_params;
    t->m = calloc(n, sizeof(float));
    t->v = calloc(n, sizeof(float));
    t->x = malloc(sizeof(int32_t) * (size_t)B * T);
    t->y = malloc(sizeof(int32_t) * (size_t)B * T);
    if (t->cfg.stats.val) t->val_stats = calloc((size_t)mc->n_layer, sizeof *t->val_stats);
    t->layer_grad_norm = calloc((size_t)mc->n_layer, sizeof *t->layer_grad_norm);
    if (!t->m || !t->v || !t->x || !t->y || !t->layer_grad_norm ||
        (t->cfg.stats.val && !t->val_stats)) {
        snprintf(err, ABL_ERR_MAX, "cannot allocate optimizer state for %zu parameters", n);
        trainer_free(t);
        return -1;
    }
    /* the initialisation and the data order each from their own seed when the spec sets
     * one (model.init_seed, train.data_seed), else from the run's */
    gpt_init_weights(&t->gpt, mc->init_seed >= 0 ? (uint64_t)mc->init_seed : seed);
    t->data_seed = t->cfg.train.data_seed >= 0 ? (uint64_t)t->cfg.train.data_seed : seed;
    t->total_steps = run_config_total_steps(&t->cfg);
    t->val_loss = t->val_acc = t->test_loss = t->test_acc = NAN;
    run_health_init(&t->health);
    return 0;
}

double trainer_memory_bytes(const RunConfig *cfg, long data_tokens) {
    const ModelConfig *mc = &cfg->model;
    int B = cfg->train.batch_size, T = mc->context;
    double bytes = gpt_alloc_bytes(mc, B, T) + /* params, grads, activations */
                   2.0 * (double)model_param_count(mc) * sizeof(float) + /* AdamW m, v */
                   2.0 * B * T * sizeof(int32_t) +                       /* the batch */
                   (double)data_tokens * sizeof(int32_t);                /* the token stream */
    if (cfg->sample.tokens > 0) /* the KV cache, while the model is still allocated */
        bytes += kvcache_bytes(mc) + 2.0 * cfg->sample.tokens * sizeof(int32_t) +
                 (double)mc->vocab_size * sizeof(float);
    return bytes;
}

void trainer_free(Trainer *t) {
    gpt_free(&t->gpt);
    free(t->m);
    free(t->v);
    free(t->x);
    free(t->y);
    free(t->val_stats);
    free(t->layer_grad_norm);
    memset(t, 0, sizeof *t);
}

/* The loss and accuracy over split s's evaluation targets (dataset_eval_layout: the same
 * tokens at every context), a mean over targets (validation: also its auxiliary losses and,
 * with stats.val, its activation statistics); NaN for a test split there is not. The full
 * windows go B at a time; a shorter last window goes alone. */
static void evaluate(Trainer *t, Split s, double *out_loss, double *out_acc) {
    const Dataset *d = t->data;
    int B = t->cfg.train.batch_size, T = t->cfg.model.context;
    EvalLayout lay = dataset_eval_layout(d, s, t->cfg.train.eval_tokens, T);
    double loss = 0.0, aux = 0.0;
    long hits = 0, count = 0, batches = 0;
    uint64_t digest = FNV1A_BASIS;
    GPT *g = &t->gpt;
    int L = g->cfg.n_layer;
    ValStats *vs = s == SPLIT_VAL ? t->val_stats : NULL;
    if (vs) val_stats_reset(vs, L);
    for (int i = 0; i < lay.n_windows;) {
        int bs = 0, len = 0;
        while (bs < B && i < lay.n_windows) {
            int32_t *x = t->x + (size_t)bs * T, *y = t->y + (size_t)bs * T;
            int n = dataset_eval_window(d, &lay, i, x, y);
            if (bs > 0 && n != len) break; /* the shorter last window: a batch of its own */
            for (int j = 0; j < n; j++) {
                int64_t pos_id[2] = {lay.first + (long)i * T + j, y[j]};
                digest = fnv1a(digest, (const char *)pos_id, sizeof pos_id);
            }
            len = n;
            bs++;
            i++;
        }
        g->collect_stats = vs != NULL;
        loss += (double)gpt_forward(g, t->x, t->y, bs, len) * bs * len;
        g->collect_stats = 0;
        if (vs) val_stats_add(vs, g->stats, L, (double)bs * len * g->cfg.d_model);
        hits += t->gpt.correct;
        count += (long)bs * len;
        aux += t->gpt.aux_loss;
        batches++;
    }
    if (s == SPLIT_VAL) {
        t->val_aux = batches ? aux / (double)batches : 0.0;
        t->eval_targets = count;
        t->eval_digest = digest;
    }
    *out_loss = count ? loss / (double)count : NAN;
    *out_acc = count ? (double)hits / (double)count : NAN;
}

void trainer_evaluate(Trainer *t, double *val_loss, double *val_acc) {
    evaluate(t, SPLIT_VAL, val_loss, val_acc);
}

static void emit_eval(Trainer *t, EventSink *sink) {
    trainer_evaluate(t, &t->val_loss, &t->val_acc);
    t->eval_step = t->step;
    Event ev = {.kind = EV_EVAL};
    ev.u.eval = (EvalEvent){.step = t->step,
                            .val_loss = t->val_loss,
                            .val_acc = t->val_acc,
                            .val_aux_loss = t->val_aux,
                            .tokens = t->tokens,
                            .time = t->train_seconds};
    sink_emit(sink, &ev);
    for (int l = 0; t->val_stats && l < t->gpt.cfg.n_layer; l++) {
        Event a = {.kind = EV_ACT};
        val_stats_event(t->val_stats, &t->gpt.cfg, t->step, l, &a.u.act);
        sink_emit(sink, &a);
    }
}

static void emit_acts(Trainer *t, EventSink *sink) {
    const GPT *g = &t->gpt;
    for (int l = 0; l < g->cfg.n_layer; l++) {
        const LayerStats *s = &g->stats[l];
        Event ev = {.kind = EV_ACT};
        ActEvent *a = &ev.u.act;
        a->step = t->step;
        a->layer = l;
        a->zero_frac = s->zero_frac;
        a->max = s->max;
        a->min = s->min;
        a->mean = s->mean;
        a->rms = s->rms;
        a->resid_rms = s->resid_rms;
        a->grad_norm = t->layer_grad_norm[l];
        a->n_head = g->cfg.n_head;
        for (int h = 0; h < g->cfg.n_head && h < ABL_MAX_HEADS; h++)
            a->attn_entropy[h] = s->attn_entropy[h];
        a->near_zero_frac = s->near_zero_frac;
        a->pre_max = s->pre_max;
        a->pre_min = s->pre_min;
        a->split = ACT_SPLIT_TRAIN;
        if (model_layer_is_moe(&g->cfg, l)) {
            int E = g->cfg.moe_experts;
            size_t w = 0;
            a->moe_experts = E;
            a->router_entropy = s->router_entropy;
            a->moe_balance = s->moe_balance;
            a->moe_zloss = s->moe_zloss;
            a->moe_dropped = s->moe_dropped;
            for (int e = 0; e < E; e++) {
                if (s->expert_frac[e] > a->moe_max_frac) a->moe_max_frac = s->expert_frac[e];
                if (w < sizeof a->expert_frac)
                    w += (size_t)snprintf(a->expert_frac + w, sizeof a->expert_frac - w, "%s%.4g",
                                          e ? " " : "", s->expert_frac[e]);
            }
        } else {
            a->moe_experts = 1;
        }
        if (model_is_moh(&g->cfg)) {
            size_t w = 0;
            a->moh_entropy = s->moh_entropy;
            a->moh_balance = s->moh_balance;
            for (int h = 0; h < g->cfg.n_head && w < sizeof a->head_frac; h++)
                w += (size_t)snprintf(a->head_frac + w, sizeof a->head_frac - w, "%s%.4g",
                                      h ? " " : "", s->head_frac[h]);
        }
        sink_emit(sink, &ev);
    }
}

static void emit_step(const Trainer *t, EventSink *sink, double loss, double lr, double grad_norm) {
    Event ev = {.kind = EV_STEP};
    ev.u.step = (StepEvent){.step = t->step,
                            .tokens = t->tokens,
                            .loss = loss,
                            .lr = lr,
                            .grad_norm = grad_norm,
                            .time = t->train_seconds};
    sink_emit(sink, &ev);
}

static int budget_left(const Trainer *t) {
    const TrainConfig *tc = &t->cfg.train;
    /* a calibrated time budget has its steps (total_steps > 0) and runs like a step budget */
    if (tc->seconds > 0 && t->total_steps < 0) return t->train_seconds < tc->seconds;
    return t->step < t->total_steps;
}

/* One optimizer step on a fresh batch. Returns the loss (non-finite = diverged). */
static float train_step(Trainer *t, int collect_stats, double *grad_norm, double *lr) {
    const TrainConfig *tc = &t->cfg.train;
    GPT *g = &t->gpt;
    int B = tc->batch_size, T = t->cfg.model.context;
    dataset_train_batch(t->data, t->data_seed, t->step, B, T, t->x, t->y);
    g->collect_stats = collect_stats;
    gpt_zero_grad(g);
    float loss = gpt_forward(g, t->x, t->y, B, T);
    g->collect_stats = 0;
    if (!isfinite(loss)) return loss;
    gpt_backward(g);
    double norm = gpt_grad_norm(g);
    *grad_norm = norm;
    if (!isfinite(norm)) return NAN;
    /* the layers' norms before clipping, as the global one (docs/metrics.md) */
    for (int l = 0; collect_stats && l < g->cfg.n_layer; l++)
        t->layer_grad_norm[l] = gpt_layer_grad_norm(g, l);
    /* clipping rides in the optimizer's one pass over the gradients (adamw_step) */
    float scale = 1.0f;
    if (tc->grad_clip > 0 && norm > tc->grad_clip) scale = (float)(tc->grad_clip / norm);
    *lr = run_config_lr(tc, t->step, t->total_steps);
    AdamW opt = {(float)*lr, (float)tc->beta1, (float)tc->beta2, (float)tc->eps,
                 (float)tc->weight_decay};
    adamw_step(g, t->m, t->v, scale, &opt, t->step + 1);
    return loss;
}

double trainer_time_steps(Trainer *t, int warmup, int steps) {
    double seconds = 0.0;
    for (int i = 0; i < warmup + steps; i++) {
        double grad_norm, lr, t0 = clock_seconds();
        train_step(t, 0, &grad_norm, &lr);
        if (i >= warmup) seconds += clock_seconds() - t0;
        t->step++;
    }
    return seconds;
}

/* Token ids as text, "464 3290 ...": as many as fit in cap (NUL included). */
static int format_ids(const int32_t *ids, int n, char *out, size_t cap) {
    size_t w = 0;
    for (int i = 0; i < n; i++) {
        char one[16];
        int k = snprintf(one, sizeof one, "%s%ld", i ? " " : "", (long)ids[i]);
        if (w + (size_t)k + 1 > cap) break;
        memcpy(out + w, one, (size_t)k);
        w += (size_t)k;
    }
    out[w] = '\0';
    return (int)w;
}

static void emit_samples(Trainer *t, EventSink *sink) {
    const SampleConfig *sc = &t->cfg.sample;
    if (sc->tokens <= 0) return;
    char err[ABL_ERR_MAX];
    int32_t prompt[ABL_TEXT_MAX];
    int np = dataset_encode(t->data, sc->prompt, prompt, ABL_TEXT_MAX, err);
    if (np < 0) np = 0; /* validated before the run; an unencodable prompt samples from token 0 */
    KVCache kc;
    if (kvcache_alloc(&kc, &t->gpt, err) != 0) return;
    int32_t *out = malloc(sizeof(int32_t) * (size_t)sc->tokens);
    if (!out) {
        kvcache_free(&kc);
        return;
    }
    for (int k = 0; k < SAMPLE_KIND_COUNT; k++) {
        double temp = k == SAMPLE_GREEDY ? 0.0 : sc->temperature;
        double t0 = clock_seconds();
        generate(&kc, prompt, np, sc->tokens, temp, t->seed, out);
        double dt = clock_seconds() - t0;
        Event ev = {.kind = EV_SAMPLE};
        SampleEvent *s = &ev.u.sample;
        s->kind = (SampleKind)k;
        s->temperature = temp;
        s->n_tokens = sc->tokens;
        s->tokens_per_s = dt > 0 ? sc->tokens / dt : 0.0;
        s->text_len = dataset_decode(t->data, out, sc->tokens, s->text, sizeof s->text);
        s->ids_len = format_ids(out, sc->tokens, s->ids, sizeof s->ids);
        sample_measure(out, sc->tokens, s);
        sink_emit(sink, &ev);
    }
    free(out);
    kvcache_free(&kc);
}

static void fill_end(const Trainer *t, RunStatus status, EndEvent *end) {
    memset(end, 0, sizeof *end);
    end->status = status;
    end->steps = t->step;
    end->tokens = t->tokens;
    end->train_seconds = t->train_seconds;
    end->tokens_per_s = t->train_seconds > 0 ? (double)t->tokens / t->train_seconds : 0.0;
    end->final_val_loss = t->val_loss;
    end->final_val_acc = t->val_acc;
    end->final_test_loss = t->test_loss;
    end->final_test_acc = t->test_acc;
    end->tune_rung = -1; /* a sweep's rank 0 knows the rung (run_exec.c) */
    run_health_fill_end(&t->health, end);
    provenance_fill_end(end, t->attempt_start_utc);
}

RunStatus trainer_run(Trainer *t, EventSink *sink, const TrainControl *ctl, EndEvent *end) {
    const TrainConfig *tc = &t->cfg.train;
    const int every_stats = t->cfg.stats.every;
    long tokens_per_step = (long)tc->batch_size * t->cfg.model.context;
    provenance_attempt_begin(t->attempt_start_utc, sizeof t->attempt_start_utc);
    if (t->step == 0) {
        Event ev = {.kind = EV_START};
        trainer_start_event(&t->cfg, &ev.u.start);
        if (t->data) { /* the data this run trains on, as its worker read it */
            StartEvent *se = &ev.u.start;
            const DataIdentity *id = &t->data->identity;
            snprintf(se->data_sha256, sizeof se->data_sha256, "%s", id->sha256);
            se->data_bytes = (long)id->bytes;
            snprintf(se->data_vocab, sizeof se->data_vocab, "%s", id->vocab);
        }
        ev.u.start.data_vocab_size = t->cfg.model.vocab_size;
        sink_emit(sink, &ev);
    }
    RunStatus status = RUN_DONE;
    while (budget_left(t)) {
        TrainPoll poll = ctl && ctl->poll ? ctl->poll(ctl->poll_ctx) : TRAIN_CONTINUE;
        int at_rung = t->stop_step > 0 && t->step >= t->stop_step;
        if (at_rung && poll != TRAIN_ABORT) poll = TRAIN_CHECKPOINT;
        if (poll == TRAIN_SAVE && ctl->save) ctl->save(ctl->save_ctx, t);
        if (poll == TRAIN_CHECKPOINT || poll == TRAIN_ABORT) {
            int saved = poll == TRAIN_CHECKPOINT && ctl->save && ctl->save(ctl->save_ctx, t) == 0;
            fill_end(t, RUN_INTERRUPTED, end);
            /* not saving is no failure: the run continues from its last checkpoint (or
             * from its start) when the sweep resumes */
            if (poll == TRAIN_CHECKPOINT && !saved)
                snprintf(end->message, sizeof end->message,
                         "stopped at step %ld without a checkpoint (it could not be written)",
                         t->step);
            else if (at_rung)
                snprintf(end->message, sizeof end->message,
                         "stopped at step %ld, a successive-halving rung", t->step);
            return RUN_INTERRUPTED;
        }
        /* statistics on scheduled steps; with stats.every 0, on the last step of a step or
         * token budget (a time budget cannot know its last step, so it gets them at the end) */
        long next = t->step + 1;
        int stats = every_stats > 0 ? next % every_stats == 0
                                    : (t->total_steps > 0 && next == t->total_steps);
        double grad_norm = NAN, lr = 0.0, t0 = clock_seconds();
        float loss = train_step(t, stats, &grad_norm, &lr);
        t->train_seconds += clock_seconds() - t0;
        t->step = next;
        t->tokens += tokens_per_step;
        /* every step's loss, logged or not: a spike between log lines still counts */
        run_health_observe(&t->health, t->step, loss, tc->warmup_steps, t->cfg.model.vocab_size);
        if (!isfinite(loss)) {
            emit_step(t, sink, loss, lr, grad_norm);
            status = RUN_DIVERGED;
            break;
        }
        int last = !budget_left(t);
        if (t->step % tc->log_every == 0 || last) {
            emit_step(t, sink, loss, lr, grad_norm);
        }
        if (stats) emit_acts(t, sink);
        /* a rung's step is evaluated: its loss decides which candidates continue */
        if ((tc->eval_every > 0 && t->step % tc->eval_every == 0) || last ||
            t->step == t->stop_step)
            emit_eval(t, sink);
    }
    if (status == RUN_DONE) {
        if (t->eval_step != t->step) emit_eval(t, sink);
        /* the held-out test split, once, on the final weights: no evaluation, selection or
         * stopping rule ever reads it before */
        evaluate(t, SPLIT_TEST, &t->test_loss, &t->test_acc);
        emit_samples(t, sink);
    }
    fill_end(t, status, end);
    if (status == RUN_DIVERGED)
        snprintf(end->message, sizeof end->message, "non-finite loss at step %ld", t->step);
    Event ev = {.kind = EV_END};
    ev.u.end = *end;
    sink_emit(sink, &ev);
    return status;
}

/* ------------------------------------------------------------------ checkpoints */

#define CKPT_MAGIC "ABLCKPT1"

typedef struct {
    char magic[8];
    uint64_t n_params, seed;
    int64_t step, tokens, eval_step;
    double train_seconds, val_loss, val_acc;
} CkptHeader;

/* The instability verdict, after the AdamW moments. Version 2 adds the loss_spike
 * detector's state (run_health.h): a version-1 block loads the verdict with the detector
 * starting over from the checkpoint's step, as if its warmup had just ended; a checkpoint
 * written before the verdict existed has the caller's trailer there instead (another magic),
 * and the verdict starts over, unflagged, from the checkpoint's step. */
#define CKPT_HEALTH_MAGIC  "ABLHLTH1"
#define CKPT_HEALTH2_MAGIC "ABLHLTH2"
typedef struct {
    char magic[8];
    int32_t kind, reserved;
    int64_t step;
    double loss;
} CkptHealth;
/* The loss_spike detector's fields of RunHealth, saved and loaded alike: X(field, type in
 * the file). */
/* clang-format off */
#define CKPT_DETECTOR_FIELDS(X) \
    X(level, double)            \
    X(scale, double)            \
    X(above_loss, double)       \
    X(seen, int64_t)            \
    X(above, int64_t)           \
    X(above_step, int64_t)
/* clang-format on */
#define CKPT_FIELD_DECL(f, T) T f;
typedef struct {
    CkptHealth v1; /* its magic CKPT_HEALTH2_MAGIC */
    CKPT_DETECTOR_FIELDS(CKPT_FIELD_DECL)
} CkptHealth2;

int trainer_save(const Trainer *t, FILE *f) {
    CkptHeader h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 8);
    h.n_params = t->gpt.n_params;
    h.seed = t->seed;
    h.step = t->step;
    h.tokens = t->tokens;
    h.eval_step = t->eval_step;
    h.train_seconds = t->train_seconds;
    h.val_loss = t->val_loss;
    h.val_acc = t->val_acc;
    size_t n = t->gpt.n_params;
    if (fwrite(&h, sizeof h, 1, f) != 1 || fwrite(t->gpt.params, sizeof(float), n, f) != n ||
        fwrite(t->m, sizeof(float), n, f) != n || fwrite(t->v, sizeof(float), n, f) != n)
        return -1;
    CkptHealth2 hh;
    memset(&hh, 0, sizeof hh);
    memcpy(hh.v1.magic, CKPT_HEALTH2_MAGIC, 8);
    const RunHealth *he = &t->health;
    hh.v1.kind = (int32_t)he->kind;
    hh.v1.step = he->step;
    hh.v1.loss = he->loss;
#define CKPT_FIELD_OUT(f, T) hh.f = (T)he->f;
    CKPT_DETECTOR_FIELDS(CKPT_FIELD_OUT)
    return fwrite(&hh, sizeof hh, 1, f) == 1 ? 0 : -1;
}

int trainer_load(Trainer *t, FILE *f, char err[ABL_ERR_MAX]) {
    CkptHeader h;
    size_t n = t->gpt.n_params;
    if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, CKPT_MAGIC, 8) != 0) {
        snprintf(err, ABL_ERR_MAX, "not an ablate checkpoint");
        return -1;
    }
    if (h.n_params != n || h.seed != t->seed) {
        snprintf(err, ABL_ERR_MAX, "checkpoint is for another run (%llu parameters, seed %llu)",
                 (unsigned long long)h.n_params, (unsigned long long)h.seed);
        return -1;
    }
    if (fread(t->gpt.params, sizeof(float), n, f) != n || fread(t->m, sizeof(float), n, f) != n ||
        fread(t->v, sizeof(float), n, f) != n) {
        snprintf(err, ABL_ERR_MAX, "checkpoint is truncated");
        return -1;
    }
    t->step = h.step;
    t->tokens = h.tokens;
    t->eval_step = h.eval_step;
    t->train_seconds = h.train_seconds;
    t->val_loss = h.val_loss;
    t->val_acc = h.val_acc;
    run_health_init(&t->health);
    CkptHealth2 hh;
    memset(&hh, 0, sizeof hh);
    size_t got = fread(&hh, 1, sizeof hh, f);
    int v2 = got == sizeof hh && memcmp(hh.v1.magic, CKPT_HEALTH2_MAGIC, 8) == 0;
    int v1 = got >= sizeof hh.v1 && memcmp(hh.v1.magic, CKPT_HEALTH_MAGIC, 8) == 0;
    RunHealth *he = &t->health;
    if ((v1 || v2) && hh.v1.kind > INSTAB_NONE && hh.v1.kind < INSTAB_COUNT) {
        he->kind = (Instability)hh.v1.kind;
        he->step = (long)hh.v1.step;
        he->loss = hh.v1.loss;
    }
#define CKPT_FIELD_IN(f, T) he->f = hh.f;
    if (v2) {
        CKPT_DETECTOR_FIELDS(CKPT_FIELD_IN)
    }
    return 0;
}
