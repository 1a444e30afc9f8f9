/* Rank 0's side of a tune: sweep (docs/spec.md, "tune"; the policy is schedule/tune.c): a
 * configuration's choice sets its comparison runs' configs, is journaled once (with a PLAN
 * record of each comparison run at the chosen value, so the journal, the view and a resume
 * show what the run trains) and said on the log; so is each rung decision before it (the
 * runs it does not promote end done at the rung: host_tune_stopped). A tuning run's
 * attempt stops at its rung's step (tune_assignment); its end there is heard as a pause,
 * not an interruption (tune_paused). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/event_schema.h"
#include "orchestrator/plan/spec_tune.h"
#include "util/log.h"
#include "sweep_internal.h"

/* "train.lr=0.01 warmup_steps=10" of candidate c (the knobs' short names after the first). */
static void values_text(const JournalTune *t, int c, char *out, size_t n) {
    size_t len = 0;
    out[0] = '\0';
    for (int k = 0; k < t->n_knobs && len < n; k++)
        len += (size_t)snprintf(out + len, n - len, "%s%s=%s", k ? " " : "", t->knob[k],
                                t->value[c][k]);
}

/* "highest" or "lowest" when the chosen candidate's value of knob q is the highest or
 * lowest of 3 or more distinct numbers tried (every candidate, stopped ones too: the range
 * tried), else NULL: a choice at an edge may not be the optimum, which can lie beyond. */
static const char *edge_of(const JournalTune *t, int q) {
    double v[SPEC_TUNE_MAX_CANDIDATES], lo = INFINITY, hi = -INFINITY;
    int distinct = 0;
    if (t->chosen < 0 || t->chosen >= t->n_cand) return NULL;
    for (int c = 0; c < t->n_cand; c++) {
        char *end;
        v[c] = strtod(t->value[c][q], &end);
        if (end == t->value[c][q] || *end || !isfinite(v[c])) return NULL; /* not a number */
        int seen = 0;
        for (int d = 0; d < c && !seen; d++)
            seen = v[d] == v[c];
        distinct += !seen;
        lo = fmin(lo, v[c]);
        hi = fmax(hi, v[c]);
    }
    if (distinct < 3) return NULL; /* of 2 values, every choice is at an edge */
    return v[t->chosen] >= hi ? "highest" : v[t->chosen] <= lo ? "lowest" : NULL;
}

const JournalTune *host_tune_journaled(void *ctx, int config, const char *name, int rung) {
    Sweep *s = ctx;
    const JournalTune *found = NULL; /* the last of them counts */
    for (int i = 0; i < s->n_tunes_journaled; i++) {
        const JournalTune *o = &s->tunes_journaled[i];
        if (o->config == config && !strcmp(o->name, name) && o->decided == rung) found = o;
    }
    return found;
}

/* A rung decision (not the last): journaled once, synced, and said on the log. */
static int rung_decided(Sweep *s, const JournalTune *t) {
    for (int i = 0; i < s->n_tunes_journaled; i++) {
        const JournalTune *o = &s->tunes_journaled[i];
        if (o->config == t->config && !strcmp(o->name, t->name) && o->decided == t->decided)
            return 0; /* journaled by a session before */
    }
    if (s->stop == STOP_IO) return -1;
    if (journal_append_tune(s->j, t) != 0 || journal_sync(s->j) != 0) {
        stop_journal(s);
        return -1;
    }
    char on[512] = "";
    int n_on = 0;
    for (int c = 0; c < t->n_cand; c++) {
        if (t->rung[c] <= t->decided) continue;
        char v[SPEC_TUNE_MAX_KNOBS * (2 * JOURNAL_TUNE_TEXT_MAX + 2)];
        values_text(t, c, v, sizeof v);
        if (strlen(on) + strlen(v) + 3 < sizeof on)
            snprintf(on + strlen(on), sizeof on - strlen(on), "%s%s", n_on ? ", " : "", v);
        n_on++;
    }
    log_info("tune: %s: rung %d of %d (%.3g of the budget): %d candidate(s) train on: %s",
             t->name[0] ? t->name : "baseline", t->decided + 1, t->n_rungs, t->frac[t->decided],
             n_on, on);
    return 0;
}

int host_tuned(void *ctx, const JournalTune *t) {
    Sweep *s = ctx;
    const SpecTune *tu = &s->spec.tune;
    int per = plan_runs_per_config(&s->spec), n_tuning = tu->n_candidates * tu->n_seeds;
    if (t->config < 0 || (t->config + 1) * per > s->plan.n_runs) return -1;
    if (t->decided < t->n_rungs - 1) return rung_decided(s, t);
    int base = t->config * per;
    for (int i = n_tuning; i < per; i++)
        spec_tune_apply(tu, t->chosen, &s->plan.runs[base + i].cfg);
    for (int i = 0; i < s->n_tunes_journaled; i++) {
        const JournalTune *o = &s->tunes_journaled[i];
        if (o->config != t->config || strcmp(o->name, t->name) || o->decided != t->decided)
            continue;
        if (!journal_tune_same(o, t))
            log_warn("tune: %s: the tuning runs' results differ from the journal's choice (%s "
                     "then, %s now): their results changed",
                     t->name, o->value[o->chosen][0], t->value[t->chosen][0]);
        return 0; /* journaled by a session before, with its comparison runs' PLAN records */
    }
    if (s->stop == STOP_IO) return -1;
    for (int k = 0; k < s->n; k++) {
        SweepRun *r = &s->runs[k];
        if (r->dead || r->plan_later || r->pr < s->plan.runs + base + n_tuning ||
            r->pr >= s->plan.runs + base + per)
            continue;
        RunConfig cfg;
        run_config(s, r, &cfg);
        if (journal_append_plan2(s->j, (uint32_t)k, r->pr->id, r->pr->name, r->pr->seed, &cfg,
                                 r->pr->overrides) != 0) {
            stop_journal(s);
            return -1;
        }
    }
    if (journal_append_tune(s->j, t) != 0 || journal_sync(s->j) != 0) {
        stop_journal(s);
        return -1;
    }
    char chosen[SPEC_TUNE_MAX_KNOBS * (2 * JOURNAL_TUNE_TEXT_MAX + 2)];
    values_text(t, t->chosen, chosen, sizeof chosen);
    int finite = 0;
    for (int c = 0; c < t->n_cand; c++)
        finite += isfinite(t->metric[c]) != 0;
    log_info("tune: %s: %s, validation loss %.4f (mean of %d tuning seed(s); %d of %d "
             "candidates trained without diverging); its comparison runs train at it",
             t->name[0] ? t->name : "baseline", chosen, t->metric[t->chosen], t->seeds[t->chosen],
             finite, t->n_cand);
    for (int q = 0; q < t->n_knobs; q++) {
        const char *edge = edge_of(t, q);
        if (edge)
            log_warn("tune: %s: %s=%s is the %s %s tried: the best value may lie %s the range "
                     "(widen tune.knobs past it to know)",
                     t->name[0] ? t->name : "baseline", t->knob[q], t->value[t->chosen][q], edge,
                     t->knob[q], edge[0] == 'h' ? "above" : "below");
    }
    return 0;
}

struct RungEnd {
    EndEvent end;
    int rank;
    char host[JOURNAL_HOST_MAX];
};

void tune_note_end(Sweep *s, int run, int rank, const char *host, const EndEvent *end) {
    SweepRun *r = &s->runs[run];
    if (r->stop_step <= 0 || end->status != RUN_INTERRUPTED || end->steps != r->stop_step) return;
    if (!r->rung_end && !(r->rung_end = malloc(sizeof *r->rung_end))) return; /* unknown then */
    r->rung_end->end = *end;
    r->rung_end->rank = rank;
    snprintf(r->rung_end->host, sizeof r->rung_end->host, "%s", host ? host : "");
}

void tune_free_end(SweepRun *r) {
    free(r->rung_end);
    r->rung_end = NULL;
}

/* A tuning run its configuration's rung decision stopped: a RUN_END of its last attempt
 * (the one that stopped at the rung's step) with status done, the rung in tune_rung and
 * that attempt's figures and provenance (where it ran, its BLAS, its times; its validation
 * loss there: loss, else the journaled one), synced; its checkpoint goes. It is no
 * failure: the rung is where successive halving ends it. */
int host_tune_stopped(void *ctx, int run, int rung, double loss) {
    Sweep *s = ctx;
    if (run < 0 || run >= s->n) return 0;
    SweepRun *r = &s->runs[run];
    if (r->finished) return 0;
    if (s->stop == STOP_IO) return -1;
    RunConfig cfg;
    run_config(s, r, &cfg);
    EndEvent end;
    char why[128];
    snprintf(why, sizeof why, "not promoted past successive-halving rung %d (step %lld)", rung,
             (long long)r->ckpt_step);
    const struct RungEnd *was = r->rung_end;
    if (was && was->end.steps == r->ckpt_step) {
        end = was->end;
        end.status = RUN_DONE;
        snprintf(end.message, sizeof end.message, "%s", why);
    } else { /* its attempt's end is not in this process (not expected): figures only */
        event_end_unknown(&end, RUN_DONE, why);
        end.steps = (long)r->ckpt_step;
        end.tokens = (long)r->ckpt_step * cfg.train.batch_size * cfg.model.context;
        end.train_seconds = r->train_seconds;
        end.tokens_per_s = r->train_seconds > 0 ? end.tokens / r->train_seconds : 0.0;
        was = NULL;
    }
    end.final_val_loss = isfinite(loss) ? loss : r->final_val_loss;
    end.tune_rung = rung;
    if (journal_append_end(s->j, (uint32_t)run, r->attempt, was ? was->rank : -1,
                           was ? was->host : "", &end) != 0 ||
        journal_sync(s->j) != 0) {
        stop_journal(s);
        return -1;
    }
    r->finished = 1;
    r->status = RUN_DONE;
    r->final_val_loss = end.final_val_loss;
    tune_free_end(r);
    drop_checkpoint(s, r);
    refs_free(&r->events);
    if (s->progress.total > 0) /* not before the sweep's start counts it as finished before */
        progress_run_finished(&s->progress, r->pr->name, &end, r->cost);
    return 0;
}

/* The rung a tuning run's next attempt trains to, and the step it stops at (the rung's
 * fraction of the run's own step budget, calibrated or not; the last rung trains on to the
 * end). Called once its config, calibrated budget included, is in the assignment. */
void tune_assignment(Sweep *s, int run, RunAssignment *a) {
    int n_rungs = 1;
    double frac = 1;
    int rung = s->sched->ops->rung ? s->sched->ops->rung(s->sched, run, &n_rungs, &frac) : -1;
    s->runs[run].stop_step = 0;
    if (rung < 0) return;
    long total = run_config_total_steps(&a->cfg);
    /* a time budget without calibration has no steps to take fractions of: the run trains
     * to the end, the last rung, and its final loss stands for every rung */
    a->rung1 = (total > 0 ? rung : n_rungs - 1) + 1;
    if (rung < n_rungs - 1 && total > 0) a->stop_step = spec_tune_rung_step(total, frac);
    s->runs[run].stop_step = a->stop_step;
    SweepRun *r = &s->runs[run];
    if (a->stop_step > 0 && r->ckpt_step > a->stop_step) {
        /* only a journal from before successive halving has one (a run trains past a rung
         * only once it is promoted): its result at the rung is the rung step's, so it
         * trains there again */
        log_info("run %s: its checkpoint at step %lld is past its rung's step %lld; it "
                 "restarts from its start",
                 r->pr->name, (long long)r->ckpt_step, (long long)a->stop_step);
        drop_checkpoint(s, r);
    }
}

/* Did run stop at its rung (the assignment's stop step, with its checkpoint there)? Then
 * the scheduler hears it as paused, and 1; else 0 (an ordinary interruption). */
int tune_paused(Sweep *s, int run, const RunResult *res) {
    SweepRun *r = &s->runs[run];
    if (!s->sched->ops->paused || r->stop_step <= 0 || res->end.steps != r->stop_step ||
        res->ckpt_step != r->stop_step || r->ckpt_step != r->stop_step)
        return 0;
    r->final_val_loss = res->end.final_val_loss;
    r->train_seconds = res->end.train_seconds;
    s->sched->ops->paused(s->sched, run, &res->end);
    return 1;
}
