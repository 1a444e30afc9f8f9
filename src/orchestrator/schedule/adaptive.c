/* The adaptive scheduler (scheduler.h) of a replicate: sweep (docs/spec.md
 * "replicate"): seeds only where a contrast is still open (one process, or many with --join).
 *
 * The plan holds every configuration x max seeds (contrast.h). Every configuration first
 * trains seeds 1..looks[0]; a contrast (configuration vs baseline, or a main effect or
 * interaction over a grid's cells: contrast.h; paired by seed index) is looked at when
 * seeds 1..n of every configuration it uses have ended durably (ended() is called only
 * after the RUN_END is synced), n = looks[look], with exactly those n paired differences
 * (seq_look), never more: a run that ended beyond n never enters that look. A seed index
 * whose run of any configuration the contrast uses diverged, was flagged by the
 * instability rule or has no finite loss is dropped from that contrast, and the next seed
 * index replaces it: a look takes the first n usable seed indices in order (an unusable
 * baseline seed drops its index from every contrast using the baseline, and runs of that
 * index no open contrast can use are not trained). A look either settles the contrast
 * (better, worse, equivalent; unresolved at the last look; unstable when the max seeds
 * planned hold fewer than n usable indices) or opens the next look, whose seeds are then
 * handed out to every configuration the contrast uses. A configuration no open contrast
 * uses needs no more seeds: its runs not yet taken are journaled not_needed (the baseline,
 * used by every vs_base contrast, stays needed while any is open). Runs already training when that
 * happens finish and are kept, and change nothing. With a budget, once the runs ended so
 * far used budget.core_hours (train_seconds, one core each), no new run starts and the
 * open contrasts end unresolved (note "budget").
 *
 * Every decision is a function of the ended runs' results alone, so start() replays them
 * from the runs a resumed sweep finished before (the host journals only the ones its
 * journal lacks): the same decisions after kill -9 + --resume and on any rank count. The
 * budget is the exception by nature: which runs ended before it ran out depends on timing.
 * Runs are handed out lowest seed index first (then plan order), so looks complete early.
 *
 * Under --join it is a policy over the joined scheduler (joined.c): a run is trained here
 * only once claimed in join/, and the results of the runs other processes finish come from
 * their done claims, which carry them exactly and are written only after the RUN_END is
 * synced (and after the decisions it led to there are journaled). So every process decides
 * from the same durable results of seeds 1..n and makes the same decisions, each journaling
 * them (the view shows each once). A run its configuration no longer needs is claimed
 * before it is journaled not_needed, so exactly one process does; one held by another
 * process then is a speculative run there: its result comes in and changes nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/event_schema.h"
#include "orchestrator/plan/id_index.h"
#include "orchestrator/plan/contrast.h"
#include "scheduler.h"
#include "orchestrator/plan/sequential.h"
#include "util/buf.h"
#include "util/grow.h"
#include "util/json.h"
#include "util/log.h"

_Static_assert(SPEC_MAX_LOOKS == SEQ_MAX_LOOKS, "replicate.looks and the rule's looks");

/* SKIPPED: not_needed, or not a run; ELSEWHERE (--join): held by another process after its
 * configuration was settled (speculative there), its claim watched until it ends */
enum { R_TODO, R_OUT, R_ENDED, R_SKIPPED, R_ELSEWHERE };

typedef struct {
    Scheduler base;
    const Plan *plan;
    const SpecReplicate *rep;
    Contrasts c;
    SeqRule rule;
    int *run_of;       /* per plan index (contrasts_run): journal index, -1 if not a run here */
    unsigned char *st; /* per journal index: R_* */
    int *pos;          /* per journal index: its plan index, or -1 (not a comparison run here) */
    /* a tune: sweep's (tune.c drives this scheduler): per configuration, 1 once its value
     * is chosen; its comparison runs are handed out only then. NULL: every one is open. */
    unsigned char *gate;
    int borrowed; /* inner is the tune scheduler's (started and closed by it) */
    /* results heard (sched_adaptive_heard) before start(): applied there, before the replay */
    struct Early {
        int run;
        JoinResult res;
    } * early;
    size_t n_early, cap_early;
    int *next; /* per config: seeds below it are not R_TODO (a hint for take) */
    int *need; /* per config: seeds 1..need[c] are wanted now */
    int *look; /* per contrast: the next look to take */
    SeqVerdict *verdict;
    JournalDecision *last; /* per contrast: its latest decision */
    double *d;             /* n_seeds paired differences (scratch) */
    double *loss;          /* per config: one seed's loss (scratch for contrasts_diff) */
    int *requeued, n_requeued;
    double used, budget; /* seconds of training ended so far; the budget (0: none) */
    int out_of_budget;
    /* --join: the joined scheduler runs are claimed from (NULL: one process), when to look
     * at a run held elsewhere again (per journal index), when take() looks at the claims */
    Scheduler *inner;
    double *recheck;
    double next_scan;
    char *rule_text; /* the rule and contrasts every joined process must share */
    int starting;    /* start(): results heard from the claims wait for the replay */
    int settling, resettle;
    JournalDecision *made; /* --join: every decision this process made, in order */
    size_t n_made, cap_made;
    int n_given; /* --join: runs this process journaled not_needed */
    int dropped; /* a run ended unusable since the last settle (its pair is dropped) */
} Adaptive;

static int run_at(const Adaptive *a, int config, int k) {
    return a->run_of[contrasts_run(&a->c, config, k)];
}

/* The loss run r's verdicts compare: on the test split when the plan has one (contrast.h). */
static double rule_loss(const Adaptive *a, const SchedRun *r) {
    return contrasts_loss(a->c.split, r->final_val_loss, r->final_test_loss);
}

/* Seed index k of contrast j is usable when the runs of seed k of every configuration the
 * contrast uses ended done, not flagged unstable, with a finite loss; it is dropped when any
 * of them ended otherwise (diverged, flagged by the instability rule, no finite loss),
 * whatever the others did; else it is not known yet (a run not ended, failed, or not a run
 * here). */
enum { PAIR_WAIT, PAIR_USABLE, PAIR_DROPPED };

static int usable(const Adaptive *a, const SchedRun *r) {
    return !r->unstable && r->status == RUN_DONE && isfinite(rule_loss(a, r));
}

/* Why a run that ended is not usable, for the note: "diverged", "unstable", "no finite
 * loss"; NULL when it is usable. */
static const char *unusable_why(const Adaptive *a, const SchedRun *r) {
    if (r->status == RUN_DIVERGED) return "diverged";
    if (r->unstable) return "unstable";
    if (r->status != RUN_DONE || !isfinite(rule_loss(a, r))) return "no finite loss";
    return NULL;
}

static int ended_unusable(const Adaptive *a, int run) {
    return run >= 0 && a->st[run] == R_ENDED && !usable(a, &a->base.runs[run]);
}

/* The run of seed k that drops it from contrast j (the baseline's first, then the terms' in
 * order), or -1. */
static int dropping_run(const Adaptive *a, int j, int k) {
    const Contrast *x = &a->c.list[j];
    if (contrasts_uses(&a->c, j, a->c.baseline) && ended_unusable(a, run_at(a, a->c.baseline, k)))
        return run_at(a, a->c.baseline, k);
    for (int t = 0; t < x->n_groups * x->group_size; t++) {
        int r = run_at(a, x->terms[t].config, k);
        if (ended_unusable(a, r)) return r;
    }
    return -1;
}

static int pair_state(const Adaptive *a, int j, int k) {
    if (dropping_run(a, j, k) >= 0) return PAIR_DROPPED;
    const Contrast *x = &a->c.list[j];
    for (int t = 0; t < x->n_groups * x->group_size; t++) {
        int r = run_at(a, x->terms[t].config, k);
        if (r < 0 || a->st[r] != R_ENDED) return PAIR_WAIT;
    }
    return PAIR_USABLE;
}

/* Appends "NAME why" of a dropped seed to the note (at most JOURNAL_NOTE_MAX - 1 bytes; a
 * list cut short ends with "..."). */
static void note_drop(const Adaptive *a, int run, char *note, size_t wn) {
    const SchedRun *r = &a->base.runs[run];
    size_t len = strlen(note);
    if (len + 4 >= wn || (len >= 3 && !strcmp(note + len - 3, "..."))) return;
    int w = snprintf(note + len, wn - len, "%s%s %s", note[len ? len - 1 : 0] == ':' ? " " : "; ",
                     r->name, unusable_why(a, r));
    if (w < 0 || (size_t)w >= wn - len) snprintf(note + (wn - 4 > len ? wn - 4 : len), 4, "...");
}

/* Contrast j's paired differences (contrast.h: for vs_base configuration - baseline) of the
 * first n usable seed indices, in order, into a->d: a dropped index (docs/spec.md
 * "replicate") is skipped and the next one replaces it, up to the max seeds planned. 1 all
 * there (why lists the indices dropped before the n-th, "" when none), 0 an index before
 * the n-th usable one not known yet, -1 fewer than n usable indices in all the planned seeds
 * (why: "unstable: K of MAX seeds dropped: RUN why; ..."). */
static int pairs(Adaptive *a, int j, int n, char *why, size_t wn) {
    const Contrast *x = &a->c.list[j];
    int nt = x->n_groups * x->group_size, m = 0, dropped = 0;
    why[0] = '\0';
    for (int k = 0; k < a->c.n_seeds && m < n; k++) {
        int ps = pair_state(a, j, k);
        if (ps == PAIR_WAIT) return 0;
        m += ps == PAIR_USABLE;
    }
    m = 0;
    for (int k = 0; k < a->c.n_seeds && m < n; k++) {
        int bad = dropping_run(a, j, k);
        if (bad >= 0) {
            if (!dropped++) snprintf(why, wn, "dropped:");
            note_drop(a, bad, why, wn);
            continue;
        }
        for (int t = 0; t < nt; t++)
            a->loss[x->terms[t].config] =
                rule_loss(a, &a->base.runs[run_at(a, x->terms[t].config, k)]);
        a->d[m++] = contrasts_diff(&a->c, j, a->loss);
    }
    if (m == n) return 1;
    snprintf(why, wn, "unstable: %d of %d seeds dropped:", dropped, a->c.n_seeds);
    for (int k = 0; k < a->c.n_seeds; k++) {
        int bad = dropping_run(a, j, k);
        if (bad >= 0) note_drop(a, bad, why, wn);
    }
    return -1;
}

/* How many seed indices contrast j's next look needs: the n-th index not known to be
 * dropped, n = looks[look] (the max seeds when fewer remain). */
static int span(const Adaptive *a, int j) {
    int n = a->rep->looks[a->look[j]], m = 0;
    for (int k = 0; k < a->c.n_seeds; k++)
        if (pair_state(a, j, k) != PAIR_DROPPED && ++m == n) return k + 1;
    return a->c.n_seeds;
}

/* Seed k of configuration c trains for no contrast: every open contrast using c has seed k
 * dropped by another configuration's run (the baseline's, shared by every vs_base one). */
static int pair_dead(const Adaptive *a, int c, int k) {
    int open = 0;
    for (int j = 0; j < a->c.n_contrasts; j++) {
        if (a->verdict[j] != SEQ_OPEN || !contrasts_uses(&a->c, j, c)) continue;
        open = 1;
        int r = dropping_run(a, j, k);
        if (r < 0 || r == run_at(a, c, k)) return 0;
    }
    return open;
}

static void decide(Adaptive *a, const JournalDecision *d) {
    a->last[d->contrast] = *d;
    if (a->inner && GROW(a->made, a->cap_made, a->n_made + 1) == 0) a->made[a->n_made++] = *d;
    SchedHost *h = &a->base.host;
    if (h->decided) h->decided(h->ctx, d); /* a failure stops the sweep (the host says so) */
}

/* Claims run for this process (joined.c); one process has every run. 1 ours, 0 held by
 * another process, 2 finished (its result came in), -1 an I/O error. */
static int own(Adaptive *a, int run) {
    return a->inner ? sched_joined_claim(a->inner, run) : 1;
}

/* A run of ours that will not train: journaled not_needed; under --join its claim then says
 * done (with that status), so no other process trains it. */
static void give_up(Adaptive *a, int run, const char *why) {
    a->st[run] = R_SKIPPED;
    SchedHost *h = &a->base.host;
    if (h->not_needed && h->not_needed(h->ctx, run, why) != 0) {
        if (a->inner) sched_cancel(a->inner, run); /* the sweep stops: for whoever comes next */
        return;
    }
    if (!a->inner) return;
    a->n_given++;
    EndEvent end;
    event_end_unknown(&end, RUN_NOT_NEEDED, why);
    sched_ended(a->inner, run, &end);
}

/* Wanted seeds per configuration, from the open contrasts; a configuration with none open
 * gives up its runs not yet taken (they are journaled not_needed). */
static void update_need(Adaptive *a) {
    for (int c = 0; c < a->c.n_configs; c++)
        a->need[c] = 0;
    for (int j = 0; j < a->c.n_contrasts; j++) {
        if (a->verdict[j] != SEQ_OPEN) continue;
        int n = span(a, j);
        const Contrast *x = &a->c.list[j];
        for (int t = 0; t < x->n_groups * x->group_size; t++)
            if (n > a->need[x->terms[t].config]) a->need[x->terms[t].config] = n;
    }
    for (int c = 0; c < a->c.n_configs; c++) {
        if (a->need[c] > 0) continue;
        for (int k = 0; k < a->c.n_seeds; k++) {
            int r = run_at(a, c, k);
            if (r < 0 || a->st[r] != R_TODO) continue;
            int o = own(a, r);
            if (o == 1)
                give_up(a, r,
                        a->out_of_budget ? "replicate: the budget ran out"
                                         : "replicate: its contrasts are settled");
            else if (o == 0)
                a->st[r] = R_ELSEWHERE; /* speculative there: kept, changes nothing */
            else if (o == 2 && a->st[r] == R_TODO)
                a->st[r] = R_SKIPPED;
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

/* The looks that runs of configuration cfg (-1: any) may have completed. Under --join a
 * result may come in while this runs (a claim met on the way says done): it is settled
 * here, after, rather than inside. */
static void settle(Adaptive *a, int cfg) {
    if (a->settling || a->starting) {
        a->resettle = 1;
        return;
    }
    a->settling = 1;
    do {
        a->resettle = 0;
        /* a dropped pair moves the seeds wanted even without a decision */
        int changed = cfg < 0 || a->dropped;
        a->dropped = 0;
        for (int j = 0; j < a->c.n_contrasts; j++)
            if (cfg < 0 || contrasts_uses(&a->c, j, cfg)) changed |= try_looks(a, j);
        changed |= end_budget(a);
        if (changed) update_need(a);
        cfg = -1;
    } while (a->resettle);
    a->settling = 0;
}

/* A run's result, ours or another process's: it counts from now on. */
static void record_result(Adaptive *a, int run, RunStatus status, double loss, double test_loss,
                          int unstable, double seconds) {
    SchedRun *r = &a->base.runs[run];
    r->finished = 1;
    r->status = status;
    r->final_val_loss = loss;
    r->final_test_loss = test_loss;
    r->unstable = unstable;
    r->train_seconds = seconds;
    if (status == RUN_FAILED || status == RUN_NOT_NEEDED || status == RUN_INTERRUPTED) {
        a->st[run] = R_SKIPPED; /* no result: its looks wait (a resume retrains it) */
        return;
    }
    a->st[run] = R_ENDED;
    a->used += seconds;
}

/* An ended run that cannot pair (a baseline seed drops its index from every contrast using
 * the baseline, another configuration's from the contrasts using it): said when its result
 * comes in (each look's note lists the indices it skipped), and the seeds wanted are
 * recomputed at the next settle. */
static void say_dropped(Adaptive *a, int run) {
    const SchedRun *r = &a->base.runs[run];
    int p = a->pos[run];
    if (p < 0 || a->st[run] != R_ENDED || usable(a, r)) return;
    a->dropped = 1;
    int cfg = contrasts_config_of(&a->c, p), k = contrasts_seed_of(&a->c, p);
    log_info("replicate: %s %s: seed index %d is dropped from %s; the next seed index "
             "replaces it where a look needs one (at most %d seeds per configuration)",
             r->name, unusable_why(a, r), k,
             cfg == a->c.baseline ? "every contrast using the baseline"
                                  : "the contrasts using its configuration",
             a->c.n_seeds);
}

/* A run's result, ours or another process's (or a tune: sweep's, told by tune.c): it counts
 * from now on, and the looks it completes are taken. */
static void heard(Adaptive *a, int run, const JoinResult *res) {
    if (run < 0 || run >= a->base.n || a->st[run] == R_ENDED) return;
    record_result(a, run, res->status, res->final_val_loss, res->final_test_loss, res->unstable,
                  res->train_seconds);
    say_dropped(a, run);
    if (a->st[run] == R_ENDED && a->pos[run] >= 0)
        settle(a, contrasts_config_of(&a->c, a->pos[run]));
}

/* --join: another process finished run (its done claim, or its journal): told to the sweep
 * first (the run is finished there too), then decided from like our own. */
static void a_elsewhere(void *ctx, int run, const JoinResult *res) {
    Adaptive *a = ctx;
    SchedHost *h = &a->base.host;
    if (h->finished_elsewhere) h->finished_elsewhere(h->ctx, run, res);
    heard(a, run, res);
}

static int a_start(Scheduler *s, const SchedRun *runs, int n) {
    Adaptive *a = (Adaptive *)s;
    int total = a->c.n_configs * a->c.per;
    if (sched_keep_runs(s, runs, n) != 0 || !(a->st = calloc((size_t)n + 1, 1)) ||
        !(a->requeued = malloc(sizeof(int) * (size_t)(n + 1))) ||
        !(a->pos = malloc(sizeof(int) * (size_t)(n + 1))) ||
        !(a->recheck = calloc((size_t)n + 1, sizeof *a->recheck)))
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
        if (pi < 0 || pi >= total || contrasts_seed_of(&a->c, pi) < 0) continue;
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
    /* results heard before (a tune: sweep's joined scheduler started first) */
    a->starting = 1; /* settled once, below */
    for (size_t e = 0; e < a->n_early; e++)
        heard(a, a->early[e].run, &a->early[e].res);
    a->starting = 0;
    /* --join: the results other processes have in their claims so far */
    if (a->inner && !a->borrowed) {
        a->starting = 1;
        int rc = sched_start(a->inner, runs, n);
        a->starting = 0;
        if (rc != 0) return -1;
    }
    /* replay: the decisions the results so far give (the host journals the new ones) */
    settle(a, -1);
    return 0;
}

/* Is run one to hand out now (not held elsewhere when last looked at)? */
static int wanted(const Adaptive *a, int r, double now) {
    return r >= 0 && a->st[r] == R_TODO && a->recheck[r] <= now;
}

/* --join: the speculative runs held elsewhere: one its holder left is ours to give up. */
static int watch_elsewhere(Adaptive *a, double now) {
    for (int r = 0; r < a->base.n; r++) {
        if (a->st[r] != R_ELSEWHERE || a->recheck[r] > now) continue;
        int o = own(a, r);
        if (o < 0) return -1;
        if (o == 0) a->recheck[r] = now + 1.0;
        if (o == 1) give_up(a, r, "replicate: its contrasts are settled");
        if (o == 2 && a->st[r] == R_ELSEWHERE) a->st[r] = R_SKIPPED;
    }
    return 0;
}

/* The next wanted run: the lowest seed index over the configurations, then plan order (under
 * --join the first of those this process can claim; -1 also when others hold the rest). */
static int a_take(Scheduler *s, double now) {
    Adaptive *a = (Adaptive *)s;
    if (a->out_of_budget) {
        if (a->inner && now >= a->next_scan) {
            a->next_scan = now + 0.2;
            watch_elsewhere(a, now);
        }
        return -1;
    }
    while (a->n_requeued) {
        int run = a->requeued[--a->n_requeued];
        int o = own(a, run); /* still ours, unless taken over while it waited */
        if (o == 1) {
            a->st[run] = R_OUT;
            return run;
        }
        if (o == 0) a->recheck[run] = now + 1.0;
        if (o < 0) return -1;
    }
    if (a->inner) {
        if (now < a->next_scan) return -1; /* rank 0 asks often: not the claims each time */
        a->next_scan = now + 0.2;
    }
    for (;;) {
        int best = -1, best_k = 0;
        for (int c = 0; c < a->c.n_configs; c++) {
            if (a->gate && !a->gate[c]) continue;
            int k = a->next[c];
            while (k < a->c.n_seeds && (run_at(a, c, k) < 0 || a->st[run_at(a, c, k)] != R_TODO))
                k++;
            a->next[c] = k;
            while (k < a->need[c] && (!wanted(a, run_at(a, c, k), now) || pair_dead(a, c, k)))
                k++;
            if (k < a->need[c] && (best < 0 || k < best_k)) best = c, best_k = k;
        }
        if (best < 0) break;
        int run = run_at(a, best, best_k);
        int o = own(a, run);
        if (o == 1) {
            a->st[run] = R_OUT;
            a->next_scan = 0; /* more idle workers may want one at once */
            return run;
        }
        if (o < 0) return -1;
        if (o == 0) a->recheck[run] = now + 1.0; /* its holder may go: look again later */
        if (o == 2 && a->st[run] == R_TODO) a->st[run] = R_SKIPPED;
    }
    if (a->inner) watch_elsewhere(a, now);
    return -1;
}

/* --join: runs held elsewhere end there; this process waits for them, as joined.c does */
static int any_elsewhere(const Adaptive *a) {
    for (int r = 0; a->inner && r < a->base.n; r++)
        if (a->st[r] == R_ELSEWHERE) return 1;
    return 0;
}

static int a_more(Scheduler *s) {
    Adaptive *a = (Adaptive *)s;
    if (a->out_of_budget) return any_elsewhere(a);
    if (a->n_requeued) return 1;
    for (int c = 0; c < a->c.n_configs; c++)
        for (int k = a->next[c]; k < a->need[c] && (!a->gate || a->gate[c]); k++) {
            int r = run_at(a, c, k);
            if (r >= 0 && a->st[r] == R_TODO && !pair_dead(a, c, k)) return 1;
        }
    return any_elsewhere(a);
}

/* Given up by this process (the sweep stops): left unfinished, for the next session (under
 * --join released, for whoever claims it next). */
static void a_cancel(Scheduler *s, int run) {
    Adaptive *a = (Adaptive *)s;
    if (run < 0 || run >= s->n) return;
    if (a->inner) sched_cancel(a->inner, run); /* nothing when not ours */
    if (a->st[run] != R_OUT) return;
    a->st[run] = R_TODO;
    if (a->inner) {
        int p = a->pos[run];
        if (p >= 0 && a->need[contrasts_config_of(&a->c, p)] == 0) a->st[run] = R_ELSEWHERE;
        return;
    }
    a->requeued[a->n_requeued++] = run;
}

/* Interrupted on its own: back to the front (taken next), unless its configuration was
 * settled while it trained: then it is not needed any more. */
static void a_requeue(Scheduler *s, int run) {
    Adaptive *a = (Adaptive *)s;
    if (run < 0 || run >= s->n || a->st[run] != R_OUT) return;
    if (a->inner && sched_abandoned(a->inner, run)) { /* another process has it now */
        a_cancel(s, run);
        return;
    }
    int p = a->pos[run];
    if (p >= 0 && a->need[contrasts_config_of(&a->c, p)] == 0) {
        give_up(a, run, "replicate: its contrasts are settled");
        return;
    }
    a->st[run] = R_TODO; /* still ours under --join: taken again first */
    a->requeued[a->n_requeued++] = run;
}

/* Under --join the claim says done (with the result) only after the decisions this result
 * leads to here are journaled: a process that learns of it from the claim finds them
 * durable, even if this one is killed next. */
static void a_ended(Scheduler *s, int run, const EndEvent *end) {
    Adaptive *a = (Adaptive *)s;
    if (run < 0 || run >= s->n) return;
    JoinResult res = {end->status, end->final_val_loss, sched_unstable(end), end->train_seconds,
                      end->final_test_loss};
    heard(a, run, &res);
    if (a->inner) sched_ended(a->inner, run, end);
}

static void a_tick(Scheduler *s, double now) {
    Adaptive *a = (Adaptive *)s;
    if (a->inner && !a->borrowed) sched_tick(a->inner, now);
}

static int a_abandoned(Scheduler *s, int run) {
    Adaptive *a = (Adaptive *)s;
    return a->inner && sched_abandoned(a->inner, run);
}

/* --join: is each decision this process made in another process's journal? Normally: a
 * done claim is written after the decisions its result led to in its process, and every
 * live process stays until it has heard every result (and so made every decision). Not
 * when every process that could have made one was killed between the last result's claim
 * and its next look. Reads those journals once (only when joining a complete sweep). */
static int decisions_elsewhere(Adaptive *a, const char *out_path) {
    char **paths, own[ABL_PATH_MAX], err[ABL_ERR_MAX];
    int n;
    if (!a->n_made) return 1;
    if (join_list_journals(out_path, &paths, &n, err) != 0) return 0;
    sched_joined_journal(a->inner, own);
    unsigned char *seen = calloc(a->n_made + 1, 1);
    size_t n_seen = 0;
    for (int k = 0; seen && k < n && n_seen < a->n_made; k++) {
        if (!strcmp(paths[k], own)) continue;
        JournalReader *r = journal_reader_open(paths[k], err);
        JournalRecord rec;
        JournalDecision d;
        while (r && journal_reader_next(r, &rec) == 1) {
            if (rec.type != JREC_DECISION || journal_decode_decision(&rec, &d) != 0) continue;
            for (size_t i = 0; i < a->n_made; i++) {
                const JournalDecision *m = &a->made[i];
                if (!seen[i] && m->contrast == d.contrast && m->look == d.look &&
                    m->verdict == d.verdict && !strcmp(m->note, d.note))
                    seen[i] = 1, n_seen++;
            }
        }
        if (r) journal_reader_close(r);
    }
    free(seen);
    join_free_list(paths, n);
    return n_seen == a->n_made;
}

/* --join: every run was finished before this process came, some maybe by its own replay.
 * Its journal, which holds only what the replay recorded, goes as for any joined sweep,
 * unless that is in no other journal (a decision, or runs it gave up, which a process
 * killed first had left): then it stays, and the view is rebuilt with it. */
static int a_complete_on_start(Scheduler *s, int n_live, const char *out_path) {
    Adaptive *a = (Adaptive *)s;
    if (!a->inner) return 0;
    if (!a->n_given && decisions_elsewhere(a, out_path))
        return a->inner->ops->complete_on_start(a->inner, n_live, out_path);
    char err[ABL_ERR_MAX];
    log_info("the joined sweep is complete (%d runs), with what no other journal held (the "
             "processes that would have recorded it were killed first): this process's "
             "journal keeps it -> %s",
             n_live, out_path);
    if (join_build_view(out_path, NULL, 0, 0, NULL, err) != 0) log_warn("%s", err);
    return 1;
}

static void a_announce(Scheduler *s, int n_live, int n_done, int n_resumed, const char *where,
                       const char *out_path) {
    Adaptive *a = (Adaptive *)s;
    int open = 0;
    for (int j = 0; j < a->c.n_contrasts; j++)
        open += a->verdict[j] == SEQ_OPEN;
    if (a->inner && !a->borrowed)
        a->inner->ops->announce(a->inner, n_live, n_done, n_resumed, where, out_path);
    char resumed[64] = "";
    if (n_resumed)
        snprintf(resumed, sizeof resumed, " (%d resumed from their checkpoints)", n_resumed);
    if (a->gate)
        log_info("replicate: %d configurations x %d-%d seeds at their chosen values, %d of %d "
                 "contrasts open",
                 a->c.n_configs, a->rep->min, a->rep->max, open, a->c.n_contrasts);
    else if (a->inner)
        log_info("replicate: %d configurations x %d-%d seeds, %d of %d contrasts open, "
                 "decided from the results of every joined process",
                 a->c.n_configs, a->rep->min, a->rep->max, open, a->c.n_contrasts);
    else
        log_info("%d runs planned (%d already finished); replicate: %d configurations x %d-%d "
                 "seeds, %d of %d contrasts open%s, on %s -> %s",
                 n_live, n_done, a->c.n_configs, a->rep->min, a->rep->max, open, a->c.n_contrasts,
                 resumed, where, out_path);
}

static void a_close(Scheduler *s) {
    Adaptive *a = (Adaptive *)s;
    if (!a->borrowed) sched_close(a->inner);
    free(a->recheck);
    free(a->gate);
    free(a->early);
    free(a->rule_text);
    free(a->made);
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
    free(a->loss);
    free(a->requeued);
    sched_free_runs(s);
    free(a);
}

/* The same policy alone (--resume continues it) or over the joined scheduler (--join),
 * which makes the sweep shared. */
#define ADAPTIVE_OPS(flag, is_shared)                                                              \
    {                                                                                              \
        .start = a_start, .take = a_take, .more = a_more, .requeue = a_requeue,                    \
        .cancel = a_cancel, .ended = a_ended, .tick = a_tick, .abandoned = a_abandoned,            \
        .announce = a_announce, .complete_on_start = a_complete_on_start, .close = a_close,        \
        .continue_flag = flag, .shared = is_shared,                                                \
    }
static const SchedOps adaptive_ops = ADAPTIVE_OPS("--resume", 0);
static const SchedOps adaptive_joined_ops = ADAPTIVE_OPS("--join", 1);

/* The rule and the contrasts as text (join/replicate): every process of a joined sweep must
 * decide by the same ones. malloc'd, or NULL. */
static char *rule_text(const Adaptive *a) {
    /* the shortest decimals that read back exactly: exact, and readable in the refusal
     * that quotes where two processes' rules differ (hex floats were neither to a user) */
    Buf b = {0};
    char alpha[40], delta[40], hours[40];
    json_format_double(alpha, sizeof alpha, a->rep->alpha);
    json_format_double(delta, sizeof delta, a->rep->delta);
    json_format_double(hours, sizeof hours, a->rep->core_hours);
    buf_printf(&b, "alpha %s\nresolve %s\nseeds %d %d\nbudget_core_hours %s\nlooks", alpha, delta,
               a->rep->min, a->rep->max, hours);
    for (int i = 0; i < a->rep->n_looks; i++)
        buf_printf(&b, " %d", a->rep->looks[i]);
    buf_printf(&b, "\nrule_version %d\nbaseline %s\n", a->rule.version,
               a->c.config_name[a->c.baseline]);
    /* vs_base's text is as before factorial families existed (joined processes compare it) */
    if (a->c.family != SPEC_CONTRASTS_VS_BASE)
        buf_printf(&b, "contrasts %s\n", spec_contrasts_name((SpecContrasts)a->c.family));
    for (int j = 0; j < a->c.n_contrasts; j++)
        buf_printf(&b, "contrast %d %s\n", j, a->c.list[j].label);
    buf_addc(&b, '\0');
    if (b.oom) {
        buf_free(&b);
        return NULL;
    }
    return b.p;
}

int sched_adaptive_rule_version(Scheduler *s, int version) {
    if (!s || (s->ops != &adaptive_ops && s->ops != &adaptive_joined_ops)) return -1;
    return seq_rule_version(&((Adaptive *)s)->rule, version);
}

Scheduler *sched_adaptive_open(const SchedConfig *cfg, const SchedHost *host,
                               char journal[ABL_PATH_MAX], char err[ABL_ERR_MAX]) {
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
    int total = a->c.n_configs * a->c.per, nc = a->c.n_contrasts;
    a->run_of = malloc(sizeof(int) * (size_t)(total + 1));
    a->next = calloc((size_t)a->c.n_configs + 1, sizeof *a->next);
    a->need = calloc((size_t)a->c.n_configs + 1, sizeof *a->need);
    a->look = calloc((size_t)nc + 1, sizeof *a->look);
    a->verdict = calloc((size_t)nc + 1, sizeof *a->verdict);
    a->last = calloc((size_t)nc + 1, sizeof *a->last);
    a->d = calloc((size_t)a->c.n_seeds + 1, sizeof *a->d);
    a->loss = calloc((size_t)a->c.n_configs + 1, sizeof *a->loss);
    if (!a->run_of || !a->next || !a->need || !a->look || !a->verdict || !a->last || !a->d ||
        !a->loss) {
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
    if (cfg->join) {
        if (!(a->rule_text = rule_text(a))) {
            a_close(&a->base);
            return snprintf(err, ABL_ERR_MAX, "out of memory"), NULL;
        }
        /* another rule: refused at its key, with what the sweep's rule has spent */
        if (!(a->inner =
                  sched_joined_under(&a->base, cfg, a->rule_text, a_elsewhere, journal, err))) {
            a_close(&a->base);
            return NULL;
        }
        a->base.ops = &adaptive_joined_ops;
    }
    return &a->base;
}

Scheduler *sched_adaptive_open_gated(const SchedConfig *cfg, const SchedHost *host,
                                     char err[ABL_ERR_MAX]) {
    SchedConfig one = *cfg;
    one.join = 0;
    Adaptive *a = (Adaptive *)sched_adaptive_open(&one, host, NULL, err);
    if (!a) return NULL;
    if (!(a->gate = calloc((size_t)a->c.n_configs + 1, 1)) ||
        (cfg->join && !(a->rule_text = rule_text(a)))) {
        a_close(&a->base);
        return snprintf(err, ABL_ERR_MAX, "out of memory"), NULL;
    }
    return &a->base;
}

const char *sched_adaptive_rule(Scheduler *s) {
    return ((Adaptive *)s)->rule_text;
}

void sched_adaptive_share(Scheduler *s, Scheduler *inner) {
    Adaptive *a = (Adaptive *)s;
    a->inner = inner;
    a->borrowed = 1;
    a->base.ops = &adaptive_joined_ops;
}

void sched_adaptive_release(Scheduler *s, int config) {
    Adaptive *a = (Adaptive *)s;
    if (a->gate && config >= 0 && config < a->c.n_configs) a->gate[config] = 1;
}

void sched_adaptive_heard(Scheduler *s, int run, const JoinResult *res) {
    Adaptive *a = (Adaptive *)s;
    if (!a->st) { /* not started: kept for start() */
        if (GROW(a->early, a->cap_early, a->n_early + 1) != 0) {
            if (a->base.host.fail) a->base.host.fail(a->base.host.ctx, "out of memory");
            return;
        }
        a->early[a->n_early++] = (struct Early){run, *res};
        return;
    }
    heard(a, run, res);
}
