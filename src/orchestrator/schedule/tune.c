/* The tune scheduler (scheduler.h) of a tune: sweep (docs/spec.md, "tune"): one process, or a
 * policy over the joined scheduler (joined.c) under --join.
 *
 * The plan holds, per configuration, its tuning runs (every candidate at every tuning seed)
 * and then its comparison runs (plan.h). Successive halving (spec_tune_rungs): every
 * candidate's tuning runs train to rung 0's step (rung() tells the sweep which rung a run's
 * attempt trains to; the sweep stops it there with a checkpoint and an evaluation, and says
 * so through paused()); once every alive candidate of a configuration has a result at its
 * rung (its runs paused there, or ended: a diverged run counts +inf, a done one its final
 * loss), the rung is decided: the best ceil(k / eta) by mean validation loss over the
 * tuning seeds (ties to the lower candidate, spec_tune_promote) train on from their
 * checkpoints to the next rung, the others end there (SchedHost.tune_stopped); at the last
 * rung, the full budget, the best is the choice (ties to the lower candidate), and the host
 * is told (SchedHost.tuned) before any of its comparison runs is handed out: it sets their
 * configs to it and journals it. Each rung decision is journaled by the host (tuned) before
 * a promoted run continues. A failed tuning run gives no result: its configuration waits
 * (the sweep ends stopped, and --resume trains it again), as a replicate: sweep's looks
 * wait.
 *
 * With replicate: the comparison runs are not queued here: an adaptive scheduler
 * (adaptive.c, sched_adaptive_open_gated) hands them out as its rule wants seeds, each
 * configuration's once its value is chosen (sched_adaptive_release), and hears their ends;
 * take() offers it a worker when no tuning run is trainable. Its looks read the comparison
 * runs alone (contrasts_run), and its replay at start() follows this scheduler's. Under
 * --join it claims its runs through this scheduler's joined one, and hears the other
 * processes' results of them through t_elsewhere; join/replicate holds both rules.
 *
 * A decision is a function of the tuning runs' results alone. start() replays the journaled
 * ones (SchedHost.tune_journaled: they hold the rung results of the runs that trained on
 * since) and makes the rest again from the results (a run that stopped at its rung before
 * stops there again at once, from its checkpoint): the same decisions after kill -9 +
 * --resume and on any rank count.
 *
 * Under --join every process decides every rung itself, from the same results: a run's
 * result at a rung reaches the others through join/rungs (join_rung, once its stop there is
 * durable), a final one through its done claim. A process trains a run only once it holds
 * its claim, and acts on a decision only for the runs it holds: it trains its promoted runs
 * on (the others find them held) and ends the ones not promoted (their done claims tell the
 * rest). A run not promoted whose holder is gone is claimed by whoever sees it, trained to its
 * rung (from its checkpoint there it stops at once) and ended; a promoted one is taken over
 * as any joined run is. So a joined sweep takes the decisions one process would, whichever
 * process trains what and whichever is killed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/plan/id_index.h"
#include "orchestrator/plan/spec_tune.h"
#include "scheduler.h"
#include "util/buf.h"
#include "util/grow.h"
#include "util/log.h"
#include "worker/event_schema.h"

/* per journal index: T_NONE not a run of this plan, T_TODO to train, T_OUT training here,
 * T_PAUSED stopped at its rung's step (a result there, waiting for the rung's decision),
 * T_DONE a final result (done or diverged), T_STOPPED not promoted past a rung (ended),
 * T_FAILED no result (failed), T_STOPWAIT (--join) not promoted past a rung while another
 * process holds it: it ends there (by its holder, or here once its holder is gone) */
enum { T_NONE, T_TODO, T_OUT, T_PAUSED, T_DONE, T_STOPPED, T_FAILED, T_STOPWAIT };

typedef struct {
    Scheduler base;
    const Plan *plan;
    const SpecTune *t;
    int per;      /* runs per configuration (plan_runs_per_config) */
    int n_tuning; /* tuning runs per configuration: candidates x tuning seeds */
    int n_configs;
    int n_rungs; /* successive halving's rungs (spec_tune_rungs) */
    int keep[SPEC_TUNE_MAX_RUNGS];
    double frac[SPEC_TUNE_MAX_RUNGS];
    int *run_of;          /* plan index -> journal index, -1 if none */
    int *pos;             /* journal index -> plan index, -1 if none */
    unsigned char *st;    /* per journal index: T_* */
    double *loss;         /* per journal index: its result (paused: at its rung; done: final) */
    int *rung;            /* per configuration: the rung its alive candidates train to */
    unsigned char *alive; /* per configuration x candidate: trains to rung[k] */
    double *at;           /* per configuration x candidate x rung: the metric there (NaN) */
    int *chosen;          /* per configuration: the chosen candidate, -1 not yet */
    double *rl;           /* per journal index x rung: its result there (NaN: none yet) */
    int *queue;           /* the runs to train, in the order they became trainable;
                             queue[next..n_queue) to take (-1: an entry used up) */
    int n_queue, next;
    size_t cap_queue;
    int *requeued, n_requeued;
    JournalTune *rec; /* scratch */
    /* --join: the joined scheduler runs are claimed from (NULL: one process) */
    Scheduler *inner;
    unsigned char *here; /* per journal index: paused here (its claim is ours) */
    signed char *target; /* per journal index: the rung it trains to when that is not its
                            configuration's (a decided one it ends at: T_STOPWAIT), or -1 */
    double *recheck;     /* per journal index: when to look at its claim again */
    double next_scan;    /* when take() looks at the claims and join/rungs again */
    int starting;        /* start(): results heard wait for the replay */
    char *rule_text;     /* the rungs every joined process must share (join/replicate) */
    /* replicate: the adaptive scheduler (adaptive.c) of the comparison runs, each
     * configuration's released once its value is chosen; NULL: they are queued here */
    Scheduler *cmp;
} Tune;

static int config_of(const Tune *u, int plan_index) {
    return plan_index / u->per;
}

static int is_tuning(const Tune *u, int plan_index) {
    return plan_index % u->per < u->n_tuning;
}

/* The candidate of a tuning run (plan index): candidates outer, tuning seeds inner. */
static int cand_of(const Tune *u, int plan_index) {
    return (plan_index % u->per) / u->t->n_seeds;
}

/* A comparison run handed out by the adaptive scheduler (a tune: sweep with replicate:). */
static int by_cmp(const Tune *u, int run) {
    return u->cmp && run >= 0 && run < u->base.n && u->pos[run] >= 0 && !is_tuning(u, u->pos[run]);
}

static double *at_of(const Tune *u, int k, int c) {
    return &u->at[((size_t)k * (size_t)u->t->n_candidates + (size_t)c) * SPEC_TUNE_MAX_RUNGS];
}

/* A run's result: +inf unless it trained to its end (or its rung) without diverging. */
static double result_of(RunStatus status, double loss) {
    return (status == RUN_DONE || status == RUN_INTERRUPTED) && isfinite(loss) ? loss : INFINITY;
}

static double *rl_of(const Tune *u, int run) {
    return &u->rl[(size_t)run * SPEC_TUNE_MAX_RUNGS];
}

static void enqueue(Tune *u, int run) {
    if (GROW(u->queue, u->cap_queue, (size_t)u->n_queue + 1) != 0) {
        if (u->base.host.fail) u->base.host.fail(u->base.host.ctx, "out of memory");
        return;
    }
    u->queue[u->n_queue++] = run;
}

/* Run's result at rung r: its stop there, else its final one (done: at the full budget, or
 * ended at that rung; diverged: +inf), else NaN (none yet). */
static double result_at(const Tune *u, int run, int r) {
    double v = rl_of(u, run)[r];
    if (!isnan(v)) return v;
    return u->st[run] == T_DONE || u->st[run] == T_STOPPED ? u->loss[run] : NAN;
}

/* A run this process holds is ended at rung r, not promoted past it: journaled by the host,
 * then (--join) its done claim tells the others. 0, or -1 (the sweep is stopping). */
static int stop_here(Tune *u, int j, int r) {
    SchedHost *h = &u->base.host;
    if (h->tune_stopped && h->tune_stopped(h->ctx, j, r, u->loss[j]) != 0) return -1;
    u->st[j] = T_STOPPED;
    u->here[j] = 0;
    if (u->inner) {
        EndEvent end;
        event_end_unknown(&end, RUN_DONE, "");
        end.final_val_loss = u->loss[j];
        end.tune_rung = r;
        sched_ended(u->inner, j, &end);
    }
    return 0;
}

/* Configuration k's name: its comparison runs' names without their last segment. */
static void config_name(const Tune *u, int k, char *out, size_t n) {
    const char *cmp_name = u->plan->runs[k * u->per + u->n_tuning].name;
    const char *slash = strrchr(cmp_name, '/');
    snprintf(out, n, "%.*s", slash ? (int)(slash - cmp_name) : 0, cmp_name);
}

/* The record of configuration k deciding its current rung, metric[c] of every alive
 * candidate filled from its runs' results (the caller has checked they all have one). */
static void build_record(Tune *u, int k, JournalTune *rec) {
    const SpecTune *t = u->t;
    int r = u->rung[k];
    memset(rec, 0, sizeof *rec);
    rec->config = k;
    config_name(u, k, rec->name, sizeof rec->name);
    rec->n_knobs = t->n_knobs;
    for (int q = 0; q < t->n_knobs; q++)
        snprintf(rec->knob[q], sizeof rec->knob[q], "%s", t->knobs[q]->name);
    rec->n_rungs = u->n_rungs;
    for (int i = 0; i < u->n_rungs; i++)
        rec->frac[i] = u->frac[i];
    rec->n_cand = t->n_candidates;
    rec->decided = r;
    for (int c = 0; c < t->n_candidates; c++) {
        for (int q = 0; q < t->n_knobs; q++)
            snprintf(rec->value[c][q], sizeof rec->value[c][q], "%s",
                     t->values[q][spec_tune_value(t, c, q)].text);
        double *at = at_of(u, k, c);
        for (int i = 0; i < SPEC_TUNE_MAX_RUNGS; i++)
            rec->at[c][i] = i <= r ? at[i] : NAN;
        rec->seeds[c] = t->n_seeds;
        int last = 0; /* the last rung it has a result for */
        for (int i = 0; i <= r; i++)
            if (!isnan(at[i])) last = i;
        rec->rung[c] = last;
        rec->metric[c] = at[last];
    }
}

/* Every alive candidate of configuration k has a result at its rung: the mean over its
 * tuning seeds goes into at[]. 0 if some run has none yet. */
static int rung_results(Tune *u, int k) {
    const SpecTune *t = u->t;
    int base = k * u->per, r = u->rung[k];
    for (int c = 0; c < t->n_candidates; c++) {
        if (!u->alive[k * t->n_candidates + c]) continue;
        for (int si = 0; si < t->n_seeds; si++) {
            int j = u->run_of[base + c * t->n_seeds + si];
            if (j < 0 || isnan(result_at(u, j, r))) return 0;
        }
    }
    for (int c = 0; c < t->n_candidates; c++) {
        if (!u->alive[k * t->n_candidates + c]) continue;
        double sum = 0;
        for (int si = 0; si < t->n_seeds; si++)
            sum += result_at(u, u->run_of[base + c * t->n_seeds + si], r);
        at_of(u, k, c)[r] = sum / t->n_seeds;
    }
    return 1;
}

/* Applies configuration k's decision of its current rung (rec: made now, or journaled by a
 * session before): promoted candidates' paused runs train on to the next rung, the others'
 * runs end there (the host journals them), and at the last rung the comparison runs are
 * queued. Under --join a run with a result at the rung held elsewhere is that process's to
 * act on: promoted, it is queued (its claim tells who trains it; one already stopped at the
 * next rung waits there); not, it waits to be ended (T_STOPWAIT). 0, or -1 (the sweep is
 * stopping). */
static int apply(Tune *u, int k, const JournalTune *rec) {
    const SpecTune *t = u->t;
    int base = k * u->per, r = u->rung[k];
    unsigned char *alive = &u->alive[k * t->n_candidates];
    if (r == u->n_rungs - 1) {
        u->chosen[k] = rec->chosen;
        if (u->cmp) { /* replicate: its seeds, as the rule wants them */
            sched_adaptive_release(u->cmp, k);
            return 0;
        }
        for (int i = u->n_tuning; i < u->per; i++) {
            int j = u->run_of[base + i];
            if (j >= 0 && u->st[j] == T_TODO) enqueue(u, j);
        }
        return 0;
    }
    for (int c = 0; c < t->n_candidates; c++) {
        if (!alive[c]) continue;
        int on = rec->rung[c] > r;
        for (int si = 0; si < t->n_seeds; si++) {
            int j = u->run_of[base + c * t->n_seeds + si];
            if (j < 0) continue;
            int paused = u->st[j] == T_PAUSED, held = !u->inner || u->here[j];
            int elsewhere = u->inner && u->st[j] == T_TODO && !isnan(rl_of(u, j)[r]);
            if (on && (paused || elsewhere)) {
                if (u->inner && r + 1 < u->n_rungs && !isnan(rl_of(u, j)[r + 1])) {
                    u->st[j] = T_PAUSED, u->here[j] = 0; /* stopped there already */
                } else {
                    u->st[j] = T_TODO, u->here[j] = 0;
                    enqueue(u, j);
                }
            } else if (!on && paused && held) {
                if (stop_here(u, j, r) != 0) return -1;
            } else if (!on && (paused || elsewhere)) {
                u->st[j] = T_STOPWAIT;
                u->target[j] = (signed char)r;
            } else if (!on && u->st[j] == T_TODO && u->base.runs[j].finished) {
                u->st[j] = T_STOPPED; /* ended at the rung by a session before */
            }
        }
        alive[c] = (unsigned char)on;
    }
    u->rung[k] = r + 1;
    return 0;
}

/* Decides configuration k's rungs as far as its results (or its journal) go. */
static void try_decide(Tune *u, int k) {
    if (k < 0 || k >= u->n_configs) return;
    const SpecTune *t = u->t;
    SchedHost *h = &u->base.host;
    JournalTune *rec = u->rec;
    while (u->chosen[k] < 0) {
        int r = u->rung[k];
        char name[JOURNAL_CONFIG_MAX];
        config_name(u, k, name, sizeof name);
        const JournalTune *old = h->tune_journaled ? h->tune_journaled(h->ctx, k, name, r) : NULL;
        if (old && old->n_rungs == u->n_rungs && old->n_cand == t->n_candidates) {
            /* decided by a session before: its results at this rung are gone from the runs
             * that trained on, and the record holds them */
            for (int c = 0; c < t->n_candidates; c++)
                at_of(u, k, c)[r] = old->at[c][r];
            *rec = *old;
        } else {
            if (!rung_results(u, k)) return;
            build_record(u, k, rec);
            unsigned char promoted[SPEC_TUNE_MAX_CANDIDATES];
            double m[SPEC_TUNE_MAX_CANDIDATES];
            for (int c = 0; c < t->n_candidates; c++)
                m[c] = u->alive[k * t->n_candidates + c] ? at_of(u, k, c)[r] : INFINITY;
            if (r < u->n_rungs - 1) {
                spec_tune_promote(m, &u->alive[k * t->n_candidates], t->n_candidates,
                                  u->keep[r + 1], promoted);
                for (int c = 0; c < t->n_candidates; c++)
                    if (promoted[c]) rec->rung[c] = r + 1;
                rec->chosen = -1;
            } else {
                /* the best at the full budget among those that reached it */
                rec->chosen = -1;
                for (int c = 0; c < t->n_candidates; c++)
                    if (u->alive[k * t->n_candidates + c] &&
                        (rec->chosen < 0 || m[c] < m[rec->chosen]))
                        rec->chosen = c;
            }
        }
        if (h->tuned && h->tuned(h->ctx, rec) != 0) return; /* the sweep stops (the host says) */
        if (apply(u, k, rec) != 0) return;
    }
}

/* A run's result (ours, an earlier session's, or under --join another process's): it counts
 * from now on. */
static void record_result(Tune *u, int run, RunStatus status, double loss) {
    SchedRun *r = &u->base.runs[run];
    r->finished = 1;
    r->status = status;
    r->final_val_loss = loss;
    u->st[run] = status == RUN_DONE || status == RUN_DIVERGED ? T_DONE : T_FAILED;
    u->here[run] = 0;
    u->loss[run] = result_of(status, loss);
    int p = u->pos[run];
    if (p >= 0 && is_tuning(u, p) && !u->starting) try_decide(u, config_of(u, p));
}

/* --join: run stopped at rung r with loss (join/rungs, maybe our own line): a result there.
 * A run that waits for its configuration's rung is paused (elsewhere) from now on. */
static void heard_rung(void *ctx, int run, int r, double loss) {
    Tune *u = ctx;
    if (run < 0 || run >= u->base.n || u->pos[run] < 0 || !is_tuning(u, u->pos[run]) ||
        r >= u->n_rungs)
        return;
    rl_of(u, run)[r] = result_of(RUN_INTERRUPTED, loss);
    int k = config_of(u, u->pos[run]);
    if (u->starting || u->st[run] != T_TODO || r != u->rung[k]) return;
    u->st[run] = T_PAUSED;
    u->loss[run] = rl_of(u, run)[r];
    try_decide(u, k);
}

/* --join: another process finished run (its done claim): told to the sweep first, then
 * decided from like our own. */
static void t_elsewhere(void *ctx, int run, const JoinResult *res) {
    Tune *u = ctx;
    SchedHost *h = &u->base.host;
    if (h->finished_elsewhere) h->finished_elsewhere(h->ctx, run, res);
    if (run < 0 || run >= u->base.n || u->st[run] == T_NONE) return;
    record_result(u, run, res->status, res->final_val_loss);
    if (by_cmp(u, run)) sched_adaptive_heard(u->cmp, run, res); /* its looks */
}

/* Claims run for this process (joined.c); one process has every run. 1 ours, 0 held by
 * another, 2 finished (its result heard), -1 an I/O error. */
static int own(Tune *u, int run) {
    return u->inner ? sched_joined_claim(u->inner, run) : 1;
}

/* A sweep that journaled a rung decision keeps the rungs' fractions it decided at (a binary
 * or a tune.first_rung of another session may place them elsewhere): its later rungs must
 * continue the schedule its earlier ones cut by. Rungs no record decides yet train to the
 * same fractions, so every configuration is tuned alike. */
static void keep_journaled_rungs(Tune *u) {
    SchedHost *h = &u->base.host;
    for (int k = 0; k < u->n_configs && h->tune_journaled; k++) {
        char name[JOURNAL_CONFIG_MAX];
        config_name(u, k, name, sizeof name);
        const JournalTune *old = h->tune_journaled(h->ctx, k, name, 0);
        if (!old || old->n_rungs != u->n_rungs) continue;
        if (memcmp(old->frac, u->frac, sizeof(double) * (size_t)u->n_rungs)) {
            char was[SPEC_TUNE_MAX_RUNGS * 12] = "";
            for (int r = 0; r < u->n_rungs; r++)
                snprintf(was + strlen(was), sizeof was - strlen(was), "%s%.4g", r ? ", " : "",
                         old->frac[r]);
            log_info("tune: the sweep keeps the rungs it began with, at %s of the budget", was);
            memcpy(u->frac, old->frac, sizeof(double) * (size_t)u->n_rungs);
        }
        return;
    }
}

static int u_start(Scheduler *s, const SchedRun *runs, int n) {
    Tune *u = (Tune *)s;
    int total = u->plan->n_runs;
    size_t nr = (size_t)(n + 1) * SPEC_TUNE_MAX_RUNGS;
    if (sched_keep_runs(s, runs, n) != 0 || !(u->st = calloc((size_t)n + 1, 1)) ||
        !(u->pos = malloc(sizeof(int) * (size_t)(n + 1))) ||
        !(u->loss = malloc(sizeof(double) * (size_t)(n + 1))) ||
        !(u->requeued = malloc(sizeof(int) * (size_t)(n + 1))) ||
        !(u->rl = malloc(sizeof(double) * nr)) || !(u->here = calloc((size_t)n + 1, 1)) ||
        !(u->target = malloc((size_t)n + 1)) ||
        !(u->recheck = calloc((size_t)n + 1, sizeof(double))))
        return -1;
    for (size_t i = 0; i < nr; i++)
        u->rl[i] = NAN;
    memset(u->target, 0xff, (size_t)n + 1); /* -1: its configuration's rung */
    IdIndex ix = {0}; /* built if the spec changed: a search per run is quadratic */
    for (int i = 0; i < n; i++) {
        u->pos[i] = -1;
        u->loss[i] = INFINITY;
        if (!runs[i].id[0]) continue; /* a lost journal index */
        /* journal index i is plan index i unless the spec changed between sessions */
        if ((i >= total || strcmp(u->plan->runs[i].id, runs[i].id)) && !ix.slot &&
            id_index_build(&ix, u->plan->runs[0].id, sizeof *u->plan->runs, u->plan->n_runs))
            return -1;
        int pi = i < total && !strcmp(u->plan->runs[i].id, runs[i].id)
                     ? i
                     : id_index_find(&ix, runs[i].id);
        if (pi < 0) continue;
        u->run_of[pi] = i;
        u->pos[i] = pi;
        u->st[i] = T_TODO;
    }
    id_index_free(&ix);
    /* the results so far, without deciding yet (a finished run of a candidate stopped at a
     * rung before is one of the decisions replayed below) */
    for (int pi = 0; pi < total; pi++) {
        int j = u->run_of[pi];
        if (j < 0 || !runs[j].finished) continue;
        u->st[j] = runs[j].status == RUN_DONE || runs[j].status == RUN_DIVERGED ? T_DONE : T_FAILED;
        u->loss[j] = result_of(runs[j].status, runs[j].final_val_loss);
    }
    /* --join: what the other processes finished, and the rung results they told */
    if (u->inner) {
        u->starting = 1;
        int rc = sched_start(u->inner, runs, n);
        if (rc == 0) sched_joined_rungs(u->inner, heard_rung, u);
        u->starting = 0;
        if (rc != 0) return -1;
    }
    keep_journaled_rungs(u);
    /* replay: the decisions journaled, and those the results give (the host journals the
     * new ones); then the tuning runs of the alive candidates, in plan order, toward their
     * configuration's rung (one that stopped at that rung's step before stops again there
     * at once, from its checkpoint, and so gives its result back) */
    for (int k = 0; k < u->n_configs; k++)
        try_decide(u, k);
    for (int pi = 0; pi < total; pi++) {
        int j = u->run_of[pi];
        if (j < 0 || !is_tuning(u, pi) || u->st[j] != T_TODO || u->base.runs[j].finished) continue;
        int k = config_of(u, pi);
        if (u->chosen[k] >= 0 || !u->alive[k * u->t->n_candidates + cand_of(u, pi)]) continue;
        if (!isnan(rl_of(u, j)[u->rung[k]])) { /* --join: stopped at the rung elsewhere */
            u->st[j] = T_PAUSED;
            u->loss[j] = rl_of(u, j)[u->rung[k]];
        } else {
            enqueue(u, j);
        }
    }
    return u->cmp ? sched_start(u->cmp, runs, n) : 0;
}

/* --join: runs not promoted that wait for their holder to end them; one whose holder is
 * gone is claimed and trained to its rung (it stops there at once, and paused() ends it). */
static int take_stopwait(Tune *u, double now) {
    for (int j = 0; j < u->base.n; j++) {
        if (u->st[j] != T_STOPWAIT || u->recheck[j] > now) continue;
        int o = own(u, j);
        if (o < 0) return -1;
        if (o == 0) u->recheck[j] = now + 1.0;
        if (o == 1) {
            u->st[j] = T_OUT;
            return j;
        }
    }
    return -1;
}

/* The next run: one interrupted here on its own, else the queue's first this process can
 * claim (one process: the queue's first). */
static int u_take(Scheduler *s, double now) {
    Tune *u = (Tune *)s;
    while (u->n_requeued) {
        int run = u->requeued[--u->n_requeued];
        int o = own(u, run); /* still ours, unless taken over while it waited */
        if (o == 1) {
            u->st[run] = T_OUT;
            return run;
        }
        if (o < 0) return -1;
        if (o == 0 && u->st[run] == T_TODO) enqueue(u, run), u->recheck[run] = now + 1.0;
    }
    if (u->inner) {
        if (now < u->next_scan) return -1; /* rank 0 asks often: not the claims each time */
        u->next_scan = now + 0.2;
        sched_joined_rungs(u->inner, heard_rung, u);
    }
    /* an entry is used up once taken, or found not to train (a run that is to train again
     * is queued again); one held elsewhere stays, and is looked at again later */
    for (int q = u->next; q < u->n_queue; q++) {
        int run = u->queue[q];
        if (run >= 0 && u->st[run] != T_TODO) u->queue[q] = run = -1;
        if (run < 0) {
            if (q == u->next) u->next++;
            continue;
        }
        if (u->recheck[run] > now) continue;
        int o = own(u, run);
        if (o < 0) return -1;
        if (o == 0) u->recheck[run] = now + 1.0; /* its holder may go: look again later */
        if (o != 1 || u->st[run] != T_TODO) continue;
        u->queue[q] = -1;
        if (q == u->next) u->next++;
        u->st[run] = T_OUT;
        u->next_scan = 0; /* more idle workers may want one at once */
        return run;
    }
    if (u->cmp) {
        int run = sched_take(u->cmp, now);
        if (run >= 0) {
            u->st[run] = T_OUT;
            return run;
        }
    }
    return u->inner ? take_stopwait(u, now) : -1;
}

/* Anything left to train: here, or (--join) held elsewhere, to be trained or ended there.
 * Runs that wait for a rung decision no result can make (a failed tuning run's) are not. */
static int u_more(Scheduler *s) {
    Tune *u = (Tune *)s;
    if (u->n_requeued) return 1;
    for (int i = u->next; i < u->n_queue; i++)
        if (u->queue[i] >= 0 && u->st[u->queue[i]] == T_TODO) return 1;
    for (int j = 0; u->inner && j < s->n; j++)
        if (u->st[j] == T_STOPWAIT) return 1;
    return u->cmp && sched_more(u->cmp);
}

/* Given up by this process (the sweep stops): one process takes it again first; under
 * --join it is released, for whoever claims it next. */
static void u_cancel(Scheduler *s, int run) {
    Tune *u = (Tune *)s;
    if (run < 0 || run >= s->n) return;
    if (by_cmp(u, run)) {
        if (u->st[run] == T_OUT) u->st[run] = T_TODO;
        sched_cancel(u->cmp, run);
        return;
    }
    if (u->inner) sched_cancel(u->inner, run); /* nothing when not ours */
    if (u->st[run] != T_OUT) return;
    u->st[run] = T_TODO;
    if (u->target[run] >= 0) {
        u->st[run] = T_STOPWAIT; /* to be ended at its rung, by whoever holds it */
    } else if (u->inner) {
        int k = config_of(u, u->pos[run]);
        if (is_tuning(u, u->pos[run]) && !isnan(rl_of(u, run)[u->rung[k]]))
            heard_rung(u, run, u->rung[k], rl_of(u, run)[u->rung[k]]); /* stopped there */
        else
            enqueue(u, run);
    } else {
        u->requeued[u->n_requeued++] = run;
    }
}

/* Back to the front: interrupted on its own (under --join still ours, unless another
 * process took it over meanwhile). */
static void u_requeue(Scheduler *s, int run) {
    Tune *u = (Tune *)s;
    if (run < 0 || run >= s->n || u->st[run] != T_OUT) return;
    if (u->inner && sched_abandoned(u->inner, run)) {
        u_cancel(s, run);
        return;
    }
    u->st[run] = T_TODO;
    if (by_cmp(u, run)) {
        sched_requeue(u->cmp, run);
        return;
    }
    u->requeued[u->n_requeued++] = run;
}

/* Under --join the claim says done (with the result) only after the decisions this result
 * leads to here are journaled. */
static void u_ended(Scheduler *s, int run, const EndEvent *end) {
    Tune *u = (Tune *)s;
    if (run < 0 || run >= s->n || u->st[run] == T_NONE) return;
    record_result(u, run, end->status, end->final_val_loss);
    if (by_cmp(u, run))
        sched_ended(u->cmp, run, end);
    else if (u->inner)
        sched_ended(u->inner, run, end);
}

static int u_rung(Scheduler *s, int run, int *n_rungs, double *frac) {
    Tune *u = (Tune *)s;
    *n_rungs = u->n_rungs;
    *frac = 1;
    if (run < 0 || run >= s->n || u->pos[run] < 0 || !is_tuning(u, u->pos[run])) return -1;
    int r = u->target[run] >= 0 ? u->target[run] : u->rung[config_of(u, u->pos[run])];
    *frac = u->frac[r];
    return r;
}

/* Stopped at its rung's step, its end durable: its result there (told to the other joined
 * processes); a run trained to a rung already decided against it (T_STOPWAIT taken over)
 * ends there now. */
static void u_paused(Scheduler *s, int run, const EndEvent *end) {
    Tune *u = (Tune *)s;
    if (run < 0 || run >= s->n || u->st[run] != T_OUT) return;
    if (u->inner && sched_abandoned(u->inner, run)) {
        u_cancel(s, run);
        return;
    }
    int k = config_of(u, u->pos[run]);
    int r = u->target[run] >= 0 ? u->target[run] : u->rung[k];
    u->target[run] = -1;
    u->st[run] = T_PAUSED;
    u->here[run] = 1;
    u->loss[run] = rl_of(u, run)[r] = result_of(RUN_INTERRUPTED, end->final_val_loss);
    if (u->inner && sched_joined_rung(u->inner, run, r, end->final_val_loss) != 0) return;
    if (r < u->rung[k]) {
        stop_here(u, run, r); /* decided while it was away: not promoted */
        return;
    }
    try_decide(u, k);
}

static void u_tick(Scheduler *s, double now) {
    Tune *u = (Tune *)s;
    if (u->inner) sched_tick(u->inner, now);
}

static int u_abandoned(Scheduler *s, int run) {
    Tune *u = (Tune *)s;
    return u->inner && sched_abandoned(u->inner, run);
}

static int u_complete_on_start(Scheduler *s, int n_live, const char *out_path) {
    Tune *u = (Tune *)s;
    if (u->cmp && u->inner) /* it keeps a journal with decisions no other one holds */
        return u->cmp->ops->complete_on_start(u->cmp, n_live, out_path);
    return u->inner ? u->inner->ops->complete_on_start(u->inner, n_live, out_path) : 0;
}

static void u_announce(Scheduler *s, int n_live, int n_done, int n_resumed, const char *where,
                       const char *out_path) {
    Tune *u = (Tune *)s;
    int chosen = 0, todo = 0;
    for (int k = 0; k < u->n_configs; k++)
        chosen += u->chosen[k] >= 0;
    for (int i = 0; i < s->n; i++)
        todo += u->st[i] == T_TODO;
    char resumed[64] = "";
    if (n_resumed)
        snprintf(resumed, sizeof resumed, " (%d resumed from their checkpoints)", n_resumed);
    if (u->inner) {
        u->inner->ops->announce(u->inner, n_live, n_done, n_resumed, where, out_path);
        log_info("tune: %d configurations x %d candidates x %d tuning seeds, %d rung(s) (eta "
                 "%d), %d chosen, decided from the results of every joined process",
                 u->n_configs, u->t->n_candidates, u->t->n_seeds, u->n_rungs, u->t->eta, chosen);
        if (u->cmp) u->cmp->ops->announce(u->cmp, n_live, n_done, n_resumed, where, out_path);
        return;
    }
    log_info("%d runs planned (%d already finished), %s%d to run%s; tune: %d configurations x "
             "%d candidates x %d tuning seeds, %d rung(s) (eta %d), %d chosen; on %s -> %s",
             n_live, n_done, u->cmp ? "at most " : "", todo, resumed, u->n_configs,
             u->t->n_candidates, u->t->n_seeds, u->n_rungs, u->t->eta, chosen, where, out_path);
    if (u->cmp) u->cmp->ops->announce(u->cmp, n_live, n_done, n_resumed, where, out_path);
}

static void u_close(Scheduler *s) {
    Tune *u = (Tune *)s;
    sched_close(u->cmp);
    sched_close(u->inner);
    free(u->rule_text);
    free(u->rl);
    free(u->here);
    free(u->target);
    free(u->recheck);
    free(u->run_of);
    free(u->pos);
    free(u->st);
    free(u->chosen);
    free(u->loss);
    free(u->rung);
    free(u->alive);
    free(u->at);
    free(u->queue);
    free(u->requeued);
    free(u->rec);
    sched_free_runs(s);
    free(u);
}

/* The same policy alone (--resume continues it) or over the joined scheduler (--join),
 * which makes the sweep shared. */
#define TUNE_OPS(flag, is_shared)                                                                  \
    {                                                                                              \
        .start = u_start, .take = u_take, .more = u_more, .requeue = u_requeue,                    \
        .cancel = u_cancel, .ended = u_ended, .tick = u_tick, .abandoned = u_abandoned,            \
        .announce = u_announce, .complete_on_start = u_complete_on_start, .close = u_close,        \
        .rung = u_rung, .paused = u_paused, .continue_flag = flag, .shared = is_shared,            \
    }
static const SchedOps tune_ops = TUNE_OPS("--resume", 0);
static const SchedOps tune_joined_ops = TUNE_OPS("--join", 1);

/* The rungs as text (join/replicate): every process of a joined tune: sweep must cut at the
 * same fractions by the same rule (the plan's names already fix the candidates and seeds). */
static char *tune_rule_text(const Tune *u) {
    Buf b = {0};
    buf_printf(&b, "tune eta %d rungs %d:", u->t->eta, u->n_rungs);
    for (int r = 0; r < u->n_rungs; r++)
        buf_printf(&b, " %.17g", u->frac[r]);
    buf_addc(&b, '\n');
    /* with replicate: its rule and contrasts too (join_ledger_check names the key that
     * differs) */
    if (u->cmp) buf_printf(&b, "%s", sched_adaptive_rule(u->cmp));
    buf_addc(&b, '\0');
    if (b.oom) {
        buf_free(&b);
        return NULL;
    }
    return b.p;
}

Scheduler *sched_tune_open(const SchedConfig *cfg, const SchedHost *host,
                           char journal[ABL_PATH_MAX], char err[ABL_ERR_MAX]) {
    Tune *u = calloc(1, sizeof *u);
    if (!u) return snprintf(err, ABL_ERR_MAX, "out of memory"), NULL;
    u->base.ops = &tune_ops;
    if (host) u->base.host = *host;
    u->plan = cfg->plan;
    u->t = &cfg->plan->spec->tune;
    u->per = plan_runs_per_config(cfg->plan->spec);
    u->n_tuning = u->t->n_candidates * u->t->n_seeds;
    u->n_configs = cfg->plan->n_runs / u->per;
    u->n_rungs = spec_tune_rungs(u->t->n_candidates, u->t->eta, u->t->first_rung, u->keep, u->frac);
    size_t nk = (size_t)u->n_configs + 1, nc = nk * (size_t)u->t->n_candidates;
    u->run_of = malloc(sizeof(int) * (size_t)(cfg->plan->n_runs + 1));
    u->chosen = malloc(sizeof(int) * nk);
    u->rung = calloc(nk, sizeof(int));
    u->alive = malloc(nc);
    u->at = malloc(sizeof(double) * nc * SPEC_TUNE_MAX_RUNGS);
    u->rec = malloc(sizeof *u->rec);
    if (!u->run_of || !u->chosen || !u->rung || !u->alive || !u->at || !u->rec) {
        u_close(&u->base);
        return snprintf(err, ABL_ERR_MAX, "out of memory"), NULL;
    }
    for (int i = 0; i < cfg->plan->n_runs; i++)
        u->run_of[i] = -1;
    for (int k = 0; k < u->n_configs; k++)
        u->chosen[k] = -1;
    memset(u->alive, 1, nc);
    for (size_t i = 0; i < nc * SPEC_TUNE_MAX_RUNGS; i++)
        u->at[i] = NAN;
    if (cfg->plan->spec->replicate.on &&
        !(u->cmp = sched_adaptive_open_gated(cfg, &u->base.host, err))) {
        u_close(&u->base);
        return NULL;
    }
    if (cfg->join) {
        if (!(u->rule_text = tune_rule_text(u))) {
            u_close(&u->base);
            return snprintf(err, ABL_ERR_MAX, "out of memory"), NULL;
        }
        /* other rungs: refused at the tune key */
        if (!(u->inner =
                  sched_joined_under(&u->base, cfg, u->rule_text, t_elsewhere, journal, err))) {
            u_close(&u->base);
            return NULL;
        }
        u->base.ops = &tune_joined_ops;
        if (u->cmp) sched_adaptive_share(u->cmp, u->inner);
    }
    return &u->base;
}
