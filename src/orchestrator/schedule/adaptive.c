/* The adaptive scheduler (scheduler.h) of a replicate: sweep (issue 20, docs/spec.md
 * "replicate"): one process, seeds only where a contrast is still open.
 *
 * The plan holds every configuration x max seeds (contrast.h). Every configuration first
 * trains seeds 1..looks[0]; a contrast (configuration vs baseline, paired by seed index) is
 * looked at when seeds 1..n of both arms have ended durably (ended() is called only after
 * the RUN_END is synced), n = looks[look], with exactly those n pairs (seq_look), never
 * more: a run that ended beyond n never enters that look. A look either settles the
 * contrast (better, worse, equivalent; unresolved at the last look; unstable when a run of
 * seeds 1..n diverged or was flagged by the instability rule, or has no finite loss) or
 * opens the next look, whose seeds are then handed out. A configuration whose contrasts
 * are all settled needs no more seeds: its runs not yet taken are journaled not_needed
 * (the baseline stays needed while any contrast is open). Runs already training when that
 * happens finish and are kept, and change nothing. With a budget, once the runs ended so
 * far used budget.core_hours (train_seconds, one core each), no new run starts and the
 * open contrasts end unresolved (note "budget").
 *
 * Every decision is a function of the ended runs' results alone, so start() replays them
 * from the runs a resumed sweep finished before (the host journals only the ones its
 * journal lacks): the same decisions after kill -9 + --resume and on any rank count. The
 * budget is the exception by nature: which runs ended before it ran out depends on timing.
 * Runs are handed out lowest seed index first (then plan order), so looks complete early. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/plan/id_index.h"
#include "orchestrator/plan/contrast.h"
#include "scheduler.h"
#include "sequential.h"
#include "util/log.h"

_Static_assert(SPEC_MAX_LOOKS == SEQ_MAX_LOOKS, "replicate.looks and the rule's looks");

enum { R_TODO, R_OUT, R_ENDED, R_SKIPPED }; /* SKIPPED: not_needed, or not a run */

typedef struct {
    Scheduler base;
    const Plan *plan;
    const SpecReplicate *rep;
    Contrasts c;
    SeqRule rule;
    int *run_of;       /* [config * n_seeds + k]: journal index, -1 if not a run here */
    unsigned char *st; /* per journal index: R_* */
    int *pos;          /* per journal index: config * n_seeds + k, or -1 (not a run here) */
    int *next;         /* per config: seeds below it are not R_TODO (a hint for take) */
    int *need;         /* per config: seeds 1..need[c] are wanted now */
    int *look;         /* per contrast: the next look to take */
    SeqVerdict *verdict;
    JournalDecision *last; /* per contrast: its latest decision */
    double *d;             /* n_seeds paired differences (scratch) */
    int *requeued, n_requeued;
    double used, budget; /* seconds of training ended so far; the budget (0: none) */
    int out_of_budget;
} Adaptive;

static int config_of(const Adaptive *a, int j) {
    return a->c.config[j];
}

static int run_at(const Adaptive *a, int config, int k) {
    return a->run_of[contrasts_run(&a->c, config, k)];
}

/* The paired differences configuration - baseline of seeds 1..n into a->d: 1 all there,
 * 0 some not ended yet, -1 a run unstable or without a finite loss (named in why). */
static int pairs(Adaptive *a, int j, int n, char *why, size_t wn) {
    int cfg = config_of(a, j), b = a->c.baseline;
    for (int k = 0; k < n; k++) {
        int x = run_at(a, cfg, k), y = run_at(a, b, k);
        if (x < 0 || y < 0 || a->st[x] != R_ENDED || a->st[y] != R_ENDED) return 0;
    }
    for (int k = 0; k < n; k++) {
        const SchedRun *rx = &a->base.runs[run_at(a, cfg, k)];
        const SchedRun *ry = &a->base.runs[run_at(a, b, k)];
        for (int side = 0; side < 2; side++) {
            const SchedRun *r = side ? ry : rx;
            if (r->unstable || r->status != RUN_DONE || !isfinite(r->final_val_loss)) {
                snprintf(why, wn, "unstable: %s", r->name);
                return -1;
            }
        }
        a->d[k] = rx->final_val_loss - ry->final_val_loss;
    }
    return 1;
}

static void decide(Adaptive *a, const JournalDecision *d) {
    a->last[d->contrast] = *d;
    SchedHost *h = &a->base.host;
    if (h->decided) h->decided(h->ctx, d); /* a failure stops the sweep (the host says so) */
}

/* Wanted seeds per configuration, from the open contrasts; a configuration with none open
 * gives up its runs not yet taken (they are journaled not_needed). */
static void update_need(Adaptive *a) {
    int b = a->c.baseline;
    for (int c = 0; c < a->c.n_configs; c++)
        a->need[c] = 0;
    for (int j = 0; j < a->c.n_contrasts; j++) {
        if (a->verdict[j] != SEQ_OPEN) continue;
        int n = a->rep->looks[a->look[j]], cfg = config_of(a, j);
        if (n > a->need[cfg]) a->need[cfg] = n;
        if (n > a->need[b]) a->need[b] = n;
    }
    SchedHost *h = &a->base.host;
    for (int c = 0; c < a->c.n_configs; c++) {
        if (a->need[c] > 0) continue;
        for (int k = 0; k < a->c.n_seeds; k++) {
            int r = run_at(a, c, k);
            if (r < 0 || a->st[r] != R_TODO) continue;
            a->st[r] = R_SKIPPED;
            if (h->not_needed)
                h->not_needed(h->ctx, r,
                              a->out_of_budget ? "replicate: the budget ran out"
                                               : "replicate: its contrasts are settled");
        }
    }
}

/* Takes every look of contrast j whose runs are there; 1 if it decided anything. */
static int try_looks(Adaptive *a, int j) {
    int changed = 0;
    while (a->verdict[j] == SEQ_OPEN && !a->out_of_budget) {
        int L = a->look[j], n = a->rep->looks[L];
        JournalDecision rec = {.contrast = j, .look = L, .n = n, .level = a->rule.level[L]};
        int ok = pairs(a, j, n, rec.note, sizeof rec.note);
        if (ok == 0) break;
        if (ok < 0) {
            rec.diff = rec.sd = rec.lo = rec.hi = NAN;
            rec.verdict = SEQ_UNSTABLE;
        } else {
            SeqDecision s = seq_look(&a->rule, L, a->d);
            rec.diff = s.diff, rec.sd = s.sd, rec.lo = s.lo, rec.hi = s.hi;
            rec.verdict = (int)s.verdict;
            if (s.verdict == SEQ_OPEN && L + 1 >= a->rule.n_looks) rec.verdict = SEQ_UNRESOLVED;
        }
        decide(a, &rec);
        changed = 1;
        if (rec.verdict != SEQ_OPEN)
            a->verdict[j] = (SeqVerdict)rec.verdict;
        else
            a->look[j]++;
    }
    return changed;
}

/* The budget ran out: the open contrasts end unresolved, with their last interval. */
static int end_budget(Adaptive *a) {
    if (a->out_of_budget || a->budget <= 0 || a->used < a->budget) return 0;
    a->out_of_budget = 1;
    for (int j = 0; j < a->c.n_contrasts; j++) {
        if (a->verdict[j] != SEQ_OPEN) continue;
        JournalDecision rec = a->last[j];
        rec.verdict = SEQ_UNRESOLVED;
        snprintf(rec.note, sizeof rec.note, "budget");
        decide(a, &rec);
        a->verdict[j] = SEQ_UNRESOLVED;
    }
    log_info("replicate: the budget of %g core-hours is used up (%.3g used): no new runs; "
             "the open contrasts end unresolved",
             a->rep->core_hours, a->used / 3600);
    return 1;
}

/* The looks that runs of configuration cfg (-1: any) may have completed. */
static void settle(Adaptive *a, int cfg) {
    int changed = cfg < 0;
    for (int j = 0; j < a->c.n_contrasts; j++)
        if (cfg < 0 || cfg == a->c.baseline || cfg == config_of(a, j)) changed |= try_looks(a, j);
    changed |= end_budget(a);
    if (changed) update_need(a);
}

static int a_start(Scheduler *s, const SchedRun *runs, int n) {
    Adaptive *a = (Adaptive *)s;
    int total = a->c.n_configs * a->c.n_seeds;
    if (sched_keep_runs(s, runs, n) != 0 || !(a->st = calloc((size_t)n + 1, 1)) ||
        !(a->requeued = malloc(sizeof(int) * (size_t)(n + 1))) ||
        !(a->pos = malloc(sizeof(int) * (size_t)(n + 1))))
        return -1;
    for (int i = 0; i < n; i++)
        a->pos[i] = -1;
    IdIndex ix = {0}; /* built if the spec changed: a search per run is quadratic */
    for (int i = 0; i < n; i++) {
        const SchedRun *r = &runs[i];
        a->st[i] = R_SKIPPED;
        if (!r->id[0]) continue; /* a lost journal index */
        /* journal index i is plan index i unless the spec changed between sessions */
        if ((i >= total || strcmp(a->plan->runs[i].id, r->id)) && !ix.slot &&
            id_index_build(&ix, a->plan->runs[0].id, sizeof *a->plan->runs, a->plan->n_runs))
            return -1;
        int pi = i < total && !strcmp(a->plan->runs[i].id, r->id) ? i : id_index_find(&ix, r->id);
        if (pi < 0 || pi >= total) continue;
        a->run_of[pi] = i;
        a->pos[i] = pi;
        /* a run an earlier session did not need has no result: the replay below gives it
         * up again, unless a look needs it now (a larger budget than that session's) */
        if (!r->finished || r->status == RUN_NOT_NEEDED)
            a->st[i] = R_TODO;
        else
            a->st[i] = R_ENDED, a->used += r->train_seconds;
    }
    id_index_free(&ix);
    /* replay: the decisions the results so far give (the host journals the new ones) */
    settle(a, -1);
    return 0;
}

/* The next wanted run: the lowest seed index over the configurations, then plan order. */
static int a_take(Scheduler *s, double now) {
    Adaptive *a = (Adaptive *)s;
    (void)now;
    if (a->out_of_budget) return -1;
    if (a->n_requeued) {
        int run = a->requeued[--a->n_requeued];
        a->st[run] = R_OUT;
        return run;
    }
    int best = -1, best_k = 0;
    for (int c = 0; c < a->c.n_configs; c++) {
        int k = a->next[c];
        while (k < a->c.n_seeds && (run_at(a, c, k) < 0 || a->st[run_at(a, c, k)] != R_TODO))
            k++;
        a->next[c] = k;
        if (k < a->need[c] && (best < 0 || k < best_k)) best = c, best_k = k;
    }
    if (best < 0) return -1;
    int run = run_at(a, best, best_k);
    a->st[run] = R_OUT;
    return run;
}

static int a_more(Scheduler *s) {
    Adaptive *a = (Adaptive *)s;
    if (a->out_of_budget) return 0;
    if (a->n_requeued) return 1;
    for (int c = 0; c < a->c.n_configs; c++)
        for (int k = a->next[c]; k < a->need[c]; k++) {
            int r = run_at(a, c, k);
            if (r >= 0 && a->st[r] == R_TODO) return 1;
        }
    return 0;
}

/* Given up by this process (the sweep stops): left unfinished, for the next session. */
static void a_cancel(Scheduler *s, int run) {
    Adaptive *a = (Adaptive *)s;
    if (run < 0 || run >= s->n || a->st[run] != R_OUT) return;
    a->st[run] = R_TODO;
    a->requeued[a->n_requeued++] = run;
}

/* Interrupted on its own: back to the front (taken next), unless its configuration was
 * settled while it trained: then it is not needed any more. */
static void a_requeue(Scheduler *s, int run) {
    Adaptive *a = (Adaptive *)s;
    if (run < 0 || run >= s->n || a->st[run] != R_OUT) return;
    int p = a->pos[run];
    if (p >= 0 && a->need[p / a->c.n_seeds] == 0) {
        a->st[run] = R_SKIPPED;
        SchedHost *h = &a->base.host;
        if (h->not_needed) h->not_needed(h->ctx, run, "replicate: its contrasts are settled");
        return;
    }
    a_cancel(s, run);
}

static void a_ended(Scheduler *s, int run, const EndEvent *end) {
    Adaptive *a = (Adaptive *)s;
    if (run < 0 || run >= s->n || a->st[run] == R_ENDED) return;
    SchedRun *r = &s->runs[run];
    r->finished = 1;
    r->status = end->status;
    r->final_val_loss = end->final_val_loss;
    r->unstable = end->status == RUN_DIVERGED || end->instability != INSTAB_NONE;
    r->train_seconds = end->train_seconds;
    if (end->status == RUN_FAILED) { /* no result: its looks wait (a resume retrains it) */
        a->st[run] = R_SKIPPED;
        return;
    }
    a->st[run] = R_ENDED;
    a->used += end->train_seconds;
    if (a->pos[run] >= 0) settle(a, a->pos[run] / a->c.n_seeds);
}

static void a_tick(Scheduler *s, double now) {
    (void)s, (void)now;
}

static int a_abandoned(Scheduler *s, int run) {
    (void)s, (void)run;
    return 0;
}

static int a_complete_on_start(Scheduler *s, int n_live, const char *out_path) {
    (void)s, (void)n_live, (void)out_path;
    return 0;
}

static void a_announce(Scheduler *s, int n_live, int n_done, int n_resumed, const char *where,
                       const char *out_path) {
    Adaptive *a = (Adaptive *)s;
    int open = 0;
    for (int j = 0; j < a->c.n_contrasts; j++)
        open += a->verdict[j] == SEQ_OPEN;
    char resumed[64] = "";
    if (n_resumed)
        snprintf(resumed, sizeof resumed, " (%d resumed from their checkpoints)", n_resumed);
    log_info("%d runs planned (%d already finished); replicate: %d configurations x %d-%d "
             "seeds, %d of %d contrasts open%s, on %s -> %s",
             n_live, n_done, a->c.n_configs, a->rep->min, a->rep->max, open, a->c.n_contrasts,
             resumed, where, out_path);
}

static void a_close(Scheduler *s) {
    Adaptive *a = (Adaptive *)s;
    contrasts_free(&a->c);
    free(a->run_of);
    free(a->st);
    free(a->pos);
    free(a->next);
    free(a->need);
    free(a->look);
    free(a->verdict);
    free(a->last);
    free(a->d);
    free(a->requeued);
    sched_free_runs(s);
    free(a);
}

static const SchedOps adaptive_ops = {
    .start = a_start,
    .take = a_take,
    .more = a_more,
    .requeue = a_requeue,
    .cancel = a_cancel,
    .ended = a_ended,
    .tick = a_tick,
    .abandoned = a_abandoned,
    .announce = a_announce,
    .complete_on_start = a_complete_on_start,
    .close = a_close,
    .continue_flag = "--resume",
    .shared = 0,
};

Scheduler *sched_adaptive_open(const SchedConfig *cfg, const SchedHost *host,
                               char err[ABL_ERR_MAX]) {
    Adaptive *a = calloc(1, sizeof *a);
    if (!a) return snprintf(err, ABL_ERR_MAX, "out of memory"), NULL;
    a->base.ops = &adaptive_ops;
    if (host) a->base.host = *host;
    a->plan = cfg->plan;
    a->rep = &cfg->plan->spec->replicate;
    a->budget = a->rep->core_hours * 3600;
    if (contrasts_build(cfg->plan, &a->c, err) != 0) {
        free(a);
        return NULL;
    }
    char msg[ABL_ERR_MAX];
    if (seq_rule_init(&a->rule, a->rep->looks, a->rep->n_looks, a->rep->alpha, a->rep->delta,
                      a->c.n_contrasts, msg) != 0) {
        spec_fail(err, a->rep->mark, "replicate: %s", msg);
        contrasts_free(&a->c);
        free(a);
        return NULL;
    }
    int total = a->c.n_configs * a->c.n_seeds, nc = a->c.n_contrasts;
    a->run_of = malloc(sizeof(int) * (size_t)(total + 1));
    a->next = calloc((size_t)a->c.n_configs + 1, sizeof *a->next);
    a->need = calloc((size_t)a->c.n_configs + 1, sizeof *a->need);
    a->look = calloc((size_t)nc + 1, sizeof *a->look);
    a->verdict = calloc((size_t)nc + 1, sizeof *a->verdict);
    a->last = calloc((size_t)nc + 1, sizeof *a->last);
    a->d = calloc((size_t)a->c.n_seeds + 1, sizeof *a->d);
    if (!a->run_of || !a->next || !a->need || !a->look || !a->verdict || !a->last || !a->d) {
        a_close(&a->base);
        return snprintf(err, ABL_ERR_MAX, "out of memory"), NULL;
    }
    for (int i = 0; i < total; i++)
        a->run_of[i] = -1;
    for (int j = 0; j < nc; j++) {
        a->last[j] = (JournalDecision){
            .contrast = j, .look = -1, .diff = NAN, .sd = NAN, .lo = NAN, .hi = NAN, .level = NAN};
        a->verdict[j] = SEQ_OPEN;
    }
    for (int c = 0; c < a->c.n_configs; c++)
        a->need[c] = a->rep->looks[0];
    return &a->base;
}
