/* The adaptive scheduler of a replicate: sweep (schedule/adaptive.c), driven with
 * made-up results: seeds 1..looks[0] of every configuration first, a look only on seeds
 * 1..n of both arms once they have ended, not_needed runs once a configuration is settled,
 * unstable runs, the budget, and the same decisions replayed from finished runs (a resume);
 * then under --join (over joined.c, in a join/ directory of the test's own): processes that
 * decide from the results in each other's claims, and a process with another rule refused.
 * Uses whatever sequential.c is linked (the rule's own tests are test_sequential.c): the
 * effects here are far from the margins any valid rule draws at 4 pairs (see SPEC). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "orchestrator/plan/id_index.h"
#include "orchestrator/plan/contrast.h"
#include "orchestrator/plan/plan.h"
#include "orchestrator/record/journal.h"
#include "orchestrator/schedule/scheduler.h"
#include "orchestrator/plan/sequential.h"
#include "test_util.h"
#include "util/buf.h"

static char g_data[1024], g_tmp[1024];
static const char *g_data_extra = ""; /* more data: keys (", test_fraction: 0.1") */

/* baseline, far (1 nat worse), same (equal within 1e-5); 8 seeds, looks at 4, 6 and 8.
 * Paired differences spread by 1e-5 at most: at 4 pairs every valid rule settles far
 * (worse) and same (equivalent within 0.05) at its first look, however little alpha it
 * spends there (an interval half-width of 1e-5 x even t = 10^3 is far from the margins). */
static const char *SPEC = "data: {path: \"%s\"%s}\n"
                          "variants: {baseline: {}, far: {model.n_head: 2}, same: "
                          "{model.n_head: 1}}\n"
                          "replicate:\n"
                          "  seeds: {min: 4, max: 8}\n"
                          "  looks: [4, 6, 8]\n"
                          "  resolve: 0.05\n"
                          "  alpha: 0.05\n"
                          "%s";
#define NS        8 /* seeds per configuration */
#define RUN(c, k) ((c)*NS + (k))

typedef struct {
    Spec spec;
    Plan plan;
    SchedRun *runs;
    Scheduler *s;
    JournalDecision dec[64];
    int n_dec;
    int not_needed[64];
    int n_not_needed;
    /* --join: results heard from other processes' claims, and our own journal */
    int n_elsewhere;
    JoinResult elsewhere[64];
    Journal *j;
    int unjournaled; /* decisions not journaled (a process killed before it journaled them) */
} Fx;

static void h_elsewhere(void *ctx, int run, const JoinResult *res) {
    Fx *f = ctx;
    f->n_elsewhere++;
    if (run >= 0 && run < 64) f->elsewhere[run] = *res;
}

static int h_decided(void *ctx, const JournalDecision *d) {
    Fx *f = ctx;
    if (f->n_dec < 64) f->dec[f->n_dec++] = *d;
    if (f->j && !f->unjournaled)
        CHECK_CMP(journal_append_decision(f->j, d), ==, 0); /* as the sweep */
    return 0;
}
static int h_not_needed(void *ctx, int run, const char *why) {
    Fx *f = ctx;
    (void)why;
    if (f->n_not_needed < 64) f->not_needed[f->n_not_needed++] = run;
    return 0;
}

/* The outcome of plan run i: configuration c = i / NS, seed index k = i % NS. The baseline
 * spreads widely over seeds (so only pairing settles anything), far = baseline + 1, same =
 * baseline +- 1e-5. */
static double loss_of(int i) {
    int c = i / NS, k = i % NS;
    double base = 3.0 + 0.3 * ((k * 7) % 5);
    if (c == 1) return base + 1.0 + 1e-5 * (k % 2);
    if (c == 2) return base + 1e-5 * ((k % 2) ? 1 : -1);
    return base;
}

/* join_out: a joined sweep's output, this Fx one process of it (NULL: one process). */
static int open_text(Fx *f, const char *text, const char *join_out, char err[ABL_ERR_MAX]) {
    memset(f, 0, sizeof *f);
    if (spec_load_string(&f->spec, "t.yaml", text, NULL, 0, err) != 0) return -1;
    if (plan_build(&f->spec, &f->plan, err) != 0) return -1;
    f->runs = calloc((size_t)f->plan.n_runs, sizeof *f->runs);
    for (int i = 0; i < f->plan.n_runs; i++)
        f->runs[i] =
            (SchedRun){f->plan.runs[i].id, f->plan.runs[i].name, 1.0, 0, RUN_DONE, NAN, 0, 0, NAN};
    SchedConfig cfg = {join_out ? join_out : "unused.h5", &f->plan, join_out != NULL, 60, 0, NULL};
    SchedHost h = {f, h_elsewhere, NULL, NULL, NULL, h_decided, h_not_needed, NULL, NULL, NULL};
    char journal[ABL_PATH_MAX] = "";
    if (join_out) journal_path_for(join_out, journal, sizeof journal);
    f->s = scheduler_open(&cfg, &h, journal, err);
    if (f->s && join_out && !(f->j = journal_create(journal, err))) return -1; /* as the sweep */
    return f->s ? 0 : -1;
}

static int open_fx(Fx *f, const char *extra, const char *join_out, char err[ABL_ERR_MAX]) {
    char text[2048];
    snprintf(text, sizeof text, SPEC, g_data, g_data_extra, extra);
    return open_text(f, text, join_out, err);
}

static void close_fx(Fx *f) {
    sched_close(f->s);
    if (f->j) journal_close(f->j);
    free(f->runs);
    plan_free(&f->plan);
    spec_free(&f->spec);
}

static EndEvent end_of(int i, double seconds) {
    EndEvent e;
    memset(&e, 0, sizeof e);
    e.status = RUN_DONE;
    e.final_val_loss = loss_of(i);
    e.train_seconds = seconds;
    return e;
}

TEST(first_look_settles) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_fx(&f, "", NULL, err) == 0, "%s", err);
    if (!f.s) return;
    CHECK_CMP(sched_start(f.s, f.runs, f.plan.n_runs), ==, 0);
    /* seeds 1..4 of every configuration, lowest seed index first */
    int took[12], n = 0;
    for (int run; n < 12 && (run = sched_take(f.s, 0)) >= 0;)
        took[n++] = run;
    CHECK_CMP(n, ==, 12);
    for (int i = 0; i < n; i++)
        CHECK_MSG(took[i] == RUN(i % 3, i / 3), "take %d: run %d", i, took[i]);
    CHECK(sched_take(f.s, 0) == -1 && !sched_more(f.s)); /* nothing more until a look */
    /* a look only once seeds 1..4 of both arms have ended: the baseline and "same" first */
    int order[12] = {RUN(0, 0), RUN(2, 0), RUN(2, 1), RUN(0, 1), RUN(2, 2), RUN(0, 2),
                     RUN(2, 3), RUN(0, 3), RUN(1, 3), RUN(1, 0), RUN(1, 2), RUN(1, 1)};
    for (int i = 0; i < 12; i++) {
        EndEvent e = end_of(order[i], 1);
        sched_ended(f.s, order[i], &e);
        if (i == 6 || i == 10) CHECK_CMP(f.n_dec, ==, (i == 6 ? 0 : 1));
        if (i == 7) CHECK(f.n_dec == 1 && f.dec[0].contrast == 1);
    }
    CHECK_CMP(f.n_dec, ==, 2);
    if (f.n_dec == 2) {
        CHECK(f.dec[0].contrast == 1 && f.dec[0].look == 0 && f.dec[0].n == 4 &&
              f.dec[0].verdict == SEQ_EQUIVALENT);
        CHECK(f.dec[1].contrast == 0 && f.dec[1].look == 0 && f.dec[1].verdict == SEQ_WORSE);
        CHECK(fabs(f.dec[1].diff - 1.000005) < 1e-9 && f.dec[1].lo > 0 && f.dec[1].hi > 1);
    }
    /* every contrast settled: the 12 runs not taken are not needed, and nothing is left */
    CHECK(f.n_not_needed == 12 && !sched_more(f.s) && sched_take(f.s, 0) == -1);
    close_fx(&f);
}

/* With a test split (data.test_fraction > 0) the verdicts are on it: the validation losses
 * say far is 1 nat worse, the test losses say it is 1 nat better, and the rule reads the
 * test's; "same" is equivalent on test though its validation differs by 1. A plan with a
 * test split in some configurations only is refused (its verdicts would mix splits). */
TEST(test_split_verdicts) {
    Fx f;
    char err[ABL_ERR_MAX];
    g_data_extra = ", test_fraction: 0.1";
    int rc = open_fx(&f, "", NULL, err);
    g_data_extra = "";
    CHECK_MSG(rc == 0, "%s", err);
    if (!f.s) return;
    CHECK_CMP(sched_start(f.s, f.runs, f.plan.n_runs), ==, 0);
    for (int run; (run = sched_take(f.s, 0)) >= 0;) {
        EndEvent e = end_of(run, 1);
        int c = run / NS;
        /* test: far = baseline - 1, same as loss_of; validation: loss_of, same + 1 */
        e.final_test_loss = c == 1 ? 2 * loss_of(RUN(0, run % NS)) - loss_of(run) : loss_of(run);
        if (c == 2) e.final_val_loss += 1.0;
        sched_ended(f.s, run, &e);
    }
    CHECK_CMP(f.n_dec, ==, 2);
    for (int i = 0; i < f.n_dec; i++) {
        const JournalDecision *d = &f.dec[i];
        if (d->contrast == 0)
            CHECK_MSG(d->verdict == SEQ_BETTER && fabs(d->diff + 1.0) < 1e-4,
                      "far: verdict %d, difference %g (the test split's is -1)", d->verdict,
                      d->diff);
        else
            CHECK_MSG(d->verdict == SEQ_EQUIVALENT && fabs(d->diff) < 1e-4,
                      "same: verdict %d, difference %g (the test split's is 0)", d->verdict,
                      d->diff);
    }
    close_fx(&f);

    Spec s;
    Plan p;
    char text[2048];
    snprintf(text, sizeof text,
             "data: {path: \"%s\"}\nvariants: {baseline: {}, t: {data.test_fraction: 0.1}}\n"
             "replicate: {seeds: {min: 4, max: 8}, looks: [4, 8], resolve: 0.05}\n",
             g_data);
    CHECK_MSG(spec_load_string(&s, "m.yaml", text, NULL, 0, err) == 0, "%s", err);
    CHECK_CMP(plan_build(&s, &p, err), ==, -1); /* the planner builds the contrasts */
    CHECK_MSG(strstr(err, "m.yaml:3:") && strstr(err, "data.test_fraction"), "%s", err);
    spec_free(&s);
}

/* The same decisions from runs a resumed sweep finished before; results of seeds beyond a
 * look never enter it. */
TEST(replay) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_fx(&f, "", NULL, err) == 0, "%s", err);
    if (!f.s) return;
    for (int i = 0; i < f.plan.n_runs; i++) {
        int k = i % NS;
        if (k > 4) continue; /* seeds 1..5 ended; seed 5 with a wild result */
        f.runs[i].finished = 1;
        f.runs[i].final_val_loss = k == 4 ? 100.0 * (i + 1) : loss_of(i);
    }
    CHECK_CMP(sched_start(f.s, f.runs, f.plan.n_runs), ==, 0);
    CHECK_CMP(f.n_dec, ==, 2);
    if (f.n_dec == 2) {
        CHECK(f.dec[0].contrast == 0 && f.dec[0].n == 4 && f.dec[0].verdict == SEQ_WORSE &&
              fabs(f.dec[0].diff - 1.000005) < 1e-9);
        CHECK(f.dec[1].contrast == 1 && f.dec[1].n == 4 && f.dec[1].verdict == SEQ_EQUIVALENT);
    }
    CHECK(f.n_not_needed == 9 && !sched_more(f.s));
    close_fx(&f);
}

/* The replay when the journal's indices are not the plan's (a spec changed between
 * sessions): the same decisions, each run found by id in a hash index, not by a search per
 * run (a search per run was quadratic at 10^5 runs); counted through id_index_total_compares. */
TEST(replay_reordered) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_fx(&f, "", 0, err) == 0, "%s", err);
    if (!f.s) return;
    int n = f.plan.n_runs;
    for (int j = 0; j < n; j++) { /* journal index j holds plan run n - 1 - j */
        int i = n - 1 - j, k = i % NS;
        f.runs[j].id = f.plan.runs[i].id;
        f.runs[j].name = f.plan.runs[i].name;
        if (k > 4) continue;
        f.runs[j].finished = 1;
        f.runs[j].final_val_loss = k == 4 ? 100.0 * (i + 1) : loss_of(i);
    }
    long before = id_index_total_compares();
    CHECK_CMP(sched_start(f.s, f.runs, n), ==, 0);
    long compares = id_index_total_compares() - before;
    CHECK_MSG(compares <= 2 * n, "%ld id comparisons for %d journal runs", compares, n);
    CHECK_CMP(f.n_dec, ==, 2);
    if (f.n_dec == 2) {
        CHECK(f.dec[0].contrast == 0 && f.dec[0].n == 4 && f.dec[0].verdict == SEQ_WORSE);
        CHECK(f.dec[1].contrast == 1 && f.dec[1].n == 4 && f.dec[1].verdict == SEQ_EQUIVALENT);
    }
    CHECK(f.n_not_needed == 9 && !sched_more(f.s));
    for (int k = 0; k < f.n_not_needed; k++) /* journal indices of seeds 6..8 */
        CHECK(f.not_needed[k] >= 0 && (n - 1 - f.not_needed[k]) % NS > 4);
    close_fx(&f);
}

/* Ends the first 12 runs (seeds 1..4), "same" seed 2 far off: "same" stays open. */
static void first_look_same_open(Fx *f) {
    for (int i = 0; i < 12; i++) {
        int run = sched_take(f->s, 0);
        EndEvent e = end_of(run, 1);
        if (run == RUN(2, 1)) e.final_val_loss += 0.5;
        sched_ended(f->s, run, &e);
    }
}

/* An open contrast gets its next look's seeds (and the baseline's); a flagged run of the
 * configuration drops that pair from its contrast, and the next seed index replaces it. */
TEST(next_look_and_unstable) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_fx(&f, "", NULL, err) == 0, "%s", err);
    if (!f.s) return;
    CHECK_CMP(sched_start(f.s, f.runs, f.plan.n_runs), ==, 0);
    first_look_same_open(&f);
    CHECK(f.n_dec == 2 && f.dec[1].contrast == 1 && f.dec[1].verdict == SEQ_OPEN);
    /* seeds 5 and 6 of "same" and of the baseline, nothing of "far" (settled) */
    int t[4];
    for (int i = 0; i < 4; i++)
        t[i] = sched_take(f.s, 0);
    CHECK(t[0] == RUN(0, 4) && t[1] == RUN(2, 4) && t[2] == RUN(0, 5) && t[3] == RUN(2, 5));
    CHECK_CMP(sched_take(f.s, 0), ==, -1);
    CHECK_CMP(f.n_not_needed, ==, 4); /* far's seeds 5..8 */
    for (int i = 0; i < 4; i++) {
        EndEvent e = end_of(t[i], 1);
        if (i == 3) e.instability = INSTAB_ABOVE_UNIFORM; /* flagged, though done */
        sched_ended(f.s, t[i], &e);
    }
    /* no look yet: seed index 5 of "same" is dropped, seed index 6 replaces it */
    CHECK_CMP(f.n_dec, ==, 2);
    int a = sched_take(f.s, 0), b = sched_take(f.s, 0);
    CHECK_MSG(a == RUN(0, 6) && b == RUN(2, 6), "took %d, %d", a, b);
    CHECK_CMP(sched_take(f.s, 0), ==, -1);
    EndEvent e = end_of(a, 1);
    sched_ended(f.s, a, &e);
    e = end_of(b, 1);
    sched_ended(f.s, b, &e);
    CHECK(f.n_dec == 3 && f.dec[2].contrast == 1 && f.dec[2].look == 1 && f.dec[2].n == 6 &&
          f.dec[2].verdict != SEQ_UNSTABLE &&
          !strcmp(f.dec[2].note, "dropped: same/seed5 unstable"));
    close_fx(&f);
}

/* A resumed sweep keeps the rule version it began with (from its
 * journal, sched_adaptive_rule_version): "same" settles as equivalent under both, but version 1
 * reads it off the two-sided interval and this binary's off the TOST one (the one-sided critical
 * value): the interval's width goes as crit to crit_eq of the rule (sequential.h). */
TEST(rule_version_kept) {
    double width[2] = {0, 0};
    for (int v = 0; v < 2; v++) {
        Fx f;
        char err[ABL_ERR_MAX];
        CHECK_MSG(open_fx(&f, "", NULL, err) == 0, "%s", err);
        if (!f.s) return;
        if (v == 0) CHECK(sched_adaptive_rule_version(f.s, 1) == 0);
        CHECK_CMP(sched_start(f.s, f.runs, f.plan.n_runs), ==, 0);
        for (int run; (run = sched_take(f.s, 0)) >= 0;) {
            EndEvent e = end_of(run, 1);
            sched_ended(f.s, run, &e);
        }
        for (int i = 0; i < f.n_dec; i++)
            if (f.dec[i].contrast == 1 && f.dec[i].verdict == SEQ_EQUIVALENT && f.dec[i].n == 4)
                width[v] = f.dec[i].hi - f.dec[i].lo;
        close_fx(&f);
    }
    SeqRule r;
    char err[ABL_ERR_MAX];
    static const int looks[3] = {4, 6, 8};
    CHECK(seq_rule_init(&r, looks, 3, 0.05, 0.05, 2, err) == 0);
    CHECK_MSG(width[0] > 0 && width[1] > 0 &&
                  fabs(width[1] / width[0] - r.crit_eq[0] / r.crit[0]) < 1e-9,
              "widths %g (version 1) and %g (this binary's); crit %g, crit_eq %g", width[0],
              width[1], r.crit[0], r.crit_eq[0]);
}

/* A flagged baseline seed drops its index from every contrast: each look takes the next
 * seed index instead, the configurations' runs of the dropped index are not trained (their
 * pair is dropped whatever they give), and the decision's note names the dropped run. */
TEST(baseline_seed_dropped) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_fx(&f, "", NULL, err) == 0, "%s", err);
    if (!f.s) return;
    /* a resumed sweep: seeds 1..4 ended, the baseline's seed index 1 flagged unstable, the
     * configurations' seed index 1 not trained yet */
    for (int c = 0; c < 3; c++)
        for (int k = 0; k < 4; k++) {
            if (c > 0 && k == 1) continue;
            f.runs[RUN(c, k)].finished = 1;
            f.runs[RUN(c, k)].final_val_loss = loss_of(RUN(c, k));
        }
    f.runs[RUN(0, 1)].unstable = 1;
    CHECK_CMP(sched_start(f.s, f.runs, f.plan.n_runs), ==, 0);
    CHECK_MSG(f.n_dec == 0, "%d decisions, the first %s (%s)", f.n_dec,
              f.n_dec ? seq_verdict_name((SeqVerdict)f.dec[0].verdict) : "", f.dec[0].note);
    /* seed index 4 of every configuration replaces index 1; index 1 is not trained */
    int t[3];
    for (int i = 0; i < 3; i++)
        t[i] = sched_take(f.s, 0);
    CHECK_MSG(t[0] == RUN(0, 4) && t[1] == RUN(1, 4) && t[2] == RUN(2, 4), "took %d %d %d", t[0],
              t[1], t[2]);
    /* nothing more until a look (the configurations' seed index 1 is not wanted) */
    CHECK(sched_take(f.s, 0) == -1 && !sched_more(f.s));
    for (int i = 0; i < 3; i++) {
        EndEvent e = end_of(t[i], 1);
        sched_ended(f.s, t[i], &e);
    }
    CHECK_CMP(f.n_dec, ==, 2);
    for (int i = 0; i < f.n_dec && i < 2; i++) {
        const JournalDecision *d = &f.dec[i];
        CHECK_MSG(d->look == 0 && d->n == 4 && !strcmp(d->note, "dropped: baseline/seed1 unstable"),
                  "contrast %d look %d n %d note '%s'", d->contrast, d->look, d->n, d->note);
        /* far: the pairs of seed indices 0, 2, 3, 4 (1 + 1e-5 at odd ones) */
        if (d->contrast == 0)
            CHECK(d->verdict == SEQ_WORSE && fabs(d->diff - 1.0000025) < 1e-9);
        else
            CHECK(d->verdict == SEQ_EQUIVALENT);
    }
    /* settled: the configurations' seed index 1 is not needed, and nothing is left */
    int idx1 = 0;
    for (int i = 0; i < f.n_not_needed; i++)
        idx1 += f.not_needed[i] == RUN(1, 1) || f.not_needed[i] == RUN(2, 1);
    CHECK(idx1 == 2 && !sched_more(f.s) && sched_take(f.s, 0) == -1);
    close_fx(&f);
}

/* Replacements are bounded by the seeds planned (replicate.seeds.max): with 5 of the 8
 * baseline seeds flagged no look can have 4 pairs, and every contrast ends unstable, the
 * note saying how many were dropped and which. */
TEST(replacements_bounded) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_fx(&f, "", NULL, err) == 0, "%s", err);
    if (!f.s) return;
    for (int i = 0; i < f.plan.n_runs; i++) {
        f.runs[i].finished = 1;
        f.runs[i].final_val_loss = loss_of(i);
        f.runs[i].unstable = i / NS == 0 && i % NS < 5;
    }
    f.runs[RUN(0, 2)].status = RUN_DIVERGED;
    CHECK_CMP(sched_start(f.s, f.runs, f.plan.n_runs), ==, 0);
    CHECK_CMP(f.n_dec, ==, 2);
    for (int i = 0; i < f.n_dec && i < 2; i++)
        CHECK_MSG(
            f.dec[i].verdict == SEQ_UNSTABLE && f.dec[i].look == 0 &&
                !strncmp(f.dec[i].note, "unstable: 5 of 8 seeds dropped: baseline/seed0", 46) &&
                strstr(f.dec[i].note, "baseline/seed2 diverged"),
            "note '%s'", f.dec[i].note);
    CHECK(!sched_more(f.s));
    close_fx(&f);
}

/* The budget: no new run once spent, the open contrasts end unresolved (said in the note). */
TEST(budget) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_fx(&f, "  budget: {core_hours: 0.001}\n", NULL, err) == 0, "%s", err);
    if (!f.s) return;
    CHECK_CMP(sched_start(f.s, f.runs, f.plan.n_runs), ==, 0);
    int run = sched_take(f.s, 0), other = sched_take(f.s, 0), third = sched_take(f.s, 0);
    EndEvent e = end_of(run, 4.0); /* 3.6 s is the budget */
    sched_ended(f.s, run, &e);
    CHECK(f.n_dec == 2 && f.dec[0].verdict == SEQ_UNRESOLVED && !strcmp(f.dec[0].note, "budget"));
    CHECK(f.n_dec == 2 && f.dec[1].verdict == SEQ_UNRESOLVED && f.dec[1].look == -1);
    CHECK(sched_take(f.s, 0) == -1 && !sched_more(f.s));
    CHECK_CMP(f.n_not_needed, ==, f.plan.n_runs - 3); /* the ones still training are kept */
    /* one of them interrupted on its own is not needed any more: not taken again */
    sched_requeue(f.s, third);
    CHECK(f.n_not_needed == f.plan.n_runs - 2 && f.not_needed[f.n_not_needed - 1] == third);
    CHECK(sched_take(f.s, 0) == -1 && !sched_more(f.s));
    e = end_of(other, 1);
    sched_ended(f.s, other, &e); /* changes nothing */
    CHECK_CMP(f.n_dec, ==, 2);
    close_fx(&f);
}

/* A resume with a larger budget: runs the first session did not need (its budget ran out)
 * train when a look needs them; the others stay not needed. */
TEST(budget_raised) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_fx(&f, "  budget: {core_hours: 10}\n", NULL, err) == 0, "%s", err);
    if (!f.s) return;
    for (int i = 0; i < f.plan.n_runs; i++) {
        int k = i % NS;
        f.runs[i].finished = 1;
        f.runs[i].status = k < 4 ? RUN_DONE : RUN_NOT_NEEDED;
        f.runs[i].final_val_loss = loss_of(i) + (i == RUN(2, 1) ? 0.5 : 0); /* same: open */
    }
    CHECK_CMP(sched_start(f.s, f.runs, f.plan.n_runs), ==, 0);
    CHECK(f.n_dec == 2 && f.dec[1].contrast == 1 && f.dec[1].verdict == SEQ_OPEN);
    CHECK_CMP(f.n_not_needed, ==, 4); /* far's seeds 5..8 (the host keeps their status) */
    int a = sched_take(f.s, 0), b = sched_take(f.s, 0);
    CHECK(a == RUN(0, 4) && b == RUN(2, 4));
    close_fx(&f);
}

/* A requeued or cancelled run is taken again first. */
TEST(requeue) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_fx(&f, "", NULL, err) == 0, "%s", err);
    if (!f.s) return;
    CHECK_CMP(sched_start(f.s, f.runs, f.plan.n_runs), ==, 0);
    int a = sched_take(f.s, 0), b = sched_take(f.s, 0);
    sched_requeue(f.s, a);
    CHECK(sched_more(f.s) && sched_take(f.s, 0) == a && sched_take(f.s, 0) != b);
    sched_cancel(f.s, b);
    CHECK(sched_take(f.s, 0) == b && f.n_not_needed == 0);
    close_fx(&f);
}

/* ------------------------------------------------------------------ factorial */

/* A 2x2x2 grid (activation x norm x position, base relu/pre/learned), contrasts:
 * interactions: 3 main effects, then the act x norm, act x pos and norm x pos interactions. */
static const char *GRID = "data: {path: \"%s\"}\n"
                          "grid: {model.activation: [relu, gelu], model.norm: [pre, post],\n"
                          "       model.position: [learned, rope]}\n"
                          "replicate:\n"
                          "  seeds: {min: 4, max: 8}\n"
                          "  looks: [4, 6, 8]\n"
                          "  resolve: 0.05\n"
                          "  baseline: {model.activation: relu, model.norm: pre, "
                          "model.position: learned}\n"
                          "contrasts: interactions\n";

/* The loss of seed k in cell (act, norm, pos): seeds spread widely, gelu +1, post +0.5, gelu
 * and post together another +0.3 (an interaction), position nothing, a little noise. wild:
 * position adds +-0.3 at seeds 1..4 (its main effect open at the first look). */
static double cell_loss(int act, int norm, int pos, int k, int wild) {
    double x = 3.0 + 0.3 * ((k * 7) % 5) + 1.0 * act + 0.5 * norm + 0.3 * act * norm;
    x += 1e-6 * ((k + 3 * act + 5 * norm + 7 * pos) % 4);
    if (wild && pos && k < 4) x += (k % 2) ? 0.3 : -0.3;
    return x;
}

static double grid_loss(const Fx *f, int run, int wild) {
    const PlannedRun *r = &f->plan.runs[run];
    return cell_loss(r->point[0], r->point[1], r->point[2], (int)r->seed, wild);
}

/* The hand computation of contrast j's mean paired difference over seeds 0..n-1 (per seed:
 * the mean over the other factor's levels of the effect; the mean over seeds). */
static double hand_diff(int j, int n, int wild) {
    double sum = 0;
    for (int k = 0; k < n; k++) {
        double d = 0;
        for (int o = 0; o < 2; o++) {
            double v;
            switch (j) {
            case 0:
                v = cell_loss(1, o, 0, k, wild) - cell_loss(0, o, 0, k, wild); /* act */
                v = (v + cell_loss(1, o, 1, k, wild) - cell_loss(0, o, 1, k, wild)) / 2;
                break;
            case 1:
                v = (cell_loss(o, 1, 0, k, wild) - cell_loss(o, 0, 0, k, wild) +
                     cell_loss(o, 1, 1, k, wild) - cell_loss(o, 0, 1, k, wild)) /
                    2;
                break;
            case 2:
                v = (cell_loss(o, 0, 1, k, wild) - cell_loss(o, 0, 0, k, wild) +
                     cell_loss(o, 1, 1, k, wild) - cell_loss(o, 1, 0, k, wild)) /
                    2;
                break;
            case 3:
                v = cell_loss(1, 1, o, k, wild) - cell_loss(1, 0, o, k, wild) -
                    cell_loss(0, 1, o, k, wild) + cell_loss(0, 0, o, k, wild);
                break;
            case 4:
                v = cell_loss(1, o, 1, k, wild) - cell_loss(1, o, 0, k, wild) -
                    cell_loss(0, o, 1, k, wild) + cell_loss(0, o, 0, k, wild);
                break;
            default:
                v = cell_loss(o, 1, 1, k, wild) - cell_loss(o, 1, 0, k, wild) -
                    cell_loss(o, 0, 1, k, wild) + cell_loss(o, 0, 0, k, wild);
            }
            /* main effects average over the 4 cells of the other two factors: the loop over
             * o covers the second of them; interactions over the one remaining factor */
            d += v / 2;
        }
        sum += d;
    }
    return sum / n;
}

static int open_grid(Fx *f, char err[ABL_ERR_MAX]) {
    char text[2048];
    snprintf(text, sizeof text, GRID, g_data);
    return open_text(f, text, NULL, err);
}

/* Main effects and interactions equal their hand computation, every cell trains (each one
 * enters every main effect), and the sweep stops once all six are settled. */
TEST(factorial_first_look) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_grid(&f, err) == 0, "%s", err);
    if (!f.s) return;
    CHECK_CMP(f.plan.n_runs, ==, 64);
    CHECK_CMP(sched_start(f.s, f.runs, f.plan.n_runs), ==, 0);
    int took[40], n = 0;
    for (int run; n < 40 && (run = sched_take(f.s, 0)) >= 0;)
        took[n++] = run;
    CHECK_CMP(n, ==, 32); /* seeds 1..4 of all 8 cells */
    for (int i = 0; i < n; i++)
        CHECK(f.plan.runs[took[i]].seed < 4);
    for (int i = 0; i < n; i++) {
        CHECK_MSG(f.n_dec == 0, "a decision after %d of 32 runs", i);
        EndEvent e = end_of(0, 1);
        e.final_val_loss = grid_loss(&f, took[i], 0);
        sched_ended(f.s, took[i], &e);
    }
    CHECK_CMP(f.n_dec, ==, 6);
    const int want[6] = {SEQ_WORSE, SEQ_WORSE,      SEQ_EQUIVALENT,
                         SEQ_WORSE, SEQ_EQUIVALENT, SEQ_EQUIVALENT};
    for (int i = 0; i < f.n_dec && i < 6; i++) {
        const JournalDecision *d = &f.dec[i];
        int j = d->contrast;
        CHECK_MSG(j >= 0 && j < 6 && d->look == 0 && d->n == 4 && d->verdict == want[j],
                  "contrast %d: look %d n %d verdict %d", j, d->look, d->n, d->verdict);
        if (j >= 0 && j < 6)
            CHECK_MSG(fabs(d->diff - hand_diff(j, 4, 0)) < 1e-12, "contrast %d: %.15g, hand %.15g",
                      j, d->diff, hand_diff(j, 4, 0));
    }
    /* act: 1 + 0.3/2, norm 0.5 + 0.3/2, act x norm 0.3 */
    CHECK(fabs(hand_diff(0, 4, 0) - 1.15) < 1e-5 && fabs(hand_diff(3, 4, 0) - 0.3) < 1e-5);
    CHECK(f.n_not_needed == 32 && !sched_more(f.s) && sched_take(f.s, 0) == -1);
    close_fx(&f);
}

/* One main effect open (position, noisy at the first look): its next seeds go to every cell,
 * since every cell enters it; the settled ones stay as they were. */
TEST(factorial_open_main_effect) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_grid(&f, err) == 0, "%s", err);
    if (!f.s) return;
    for (int i = 0; i < f.plan.n_runs; i++) /* a resumed sweep: seeds 1..4 ended */
        if (f.plan.runs[i].seed < 4) {
            f.runs[i].finished = 1;
            f.runs[i].final_val_loss = grid_loss(&f, i, 1);
        }
    CHECK_CMP(sched_start(f.s, f.runs, f.plan.n_runs), ==, 0);
    CHECK_CMP(f.n_dec, ==, 6);
    int open = -1;
    for (int i = 0; i < f.n_dec; i++) {
        if (f.dec[i].verdict == SEQ_OPEN) open = f.dec[i].contrast;
        CHECK(fabs(f.dec[i].diff - hand_diff(f.dec[i].contrast, 4, 1)) < 1e-12);
    }
    CHECK_CMP(open, ==, 2);
    int cells[8] = {0}, n = 0;
    for (int run; (run = sched_take(f.s, 0)) >= 0 && n < 20; n++) {
        const PlannedRun *r = &f.plan.runs[run];
        CHECK(r->seed == 4 || r->seed == 5);
        cells[r->point[0] * 4 + r->point[1] * 2 + r->point[2]]++;
    }
    CHECK_CMP(n, ==, 16);
    for (int c = 0; c < 8; c++)
        CHECK_CMP(cells[c], ==, 2);
    CHECK_CMP(f.n_not_needed, ==, 0); /* seeds 7, 8 of every cell wait on the next look */
    close_fx(&f);
}

/* A flagged run of one cell drops its seed index from every contrast using that cell (here
 * all six: each enters every main effect and interaction): the next seed index of every cell
 * replaces it, the other cells' runs of the dropped index are not trained, and each look's
 * difference is the hand computation over the seed indices kept. */
TEST(factorial_seed_dropped) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_grid(&f, err) == 0, "%s", err);
    if (!f.s) return;
    int flagged = -1;
    for (int i = 0; i < f.plan.n_runs; i++) {
        const PlannedRun *r = &f.plan.runs[i];
        int gelu_post_rope = r->point[0] == 1 && r->point[1] == 1 && r->point[2] == 1;
        if (r->seed == 2 && gelu_post_rope) flagged = i;
        /* a resumed sweep: seeds 1..4 ended, but of seed index 2 only gelu/post/rope's,
         * flagged unstable */
        if (r->seed < 4 && (r->seed != 2 || gelu_post_rope)) {
            f.runs[i].finished = 1;
            f.runs[i].final_val_loss = grid_loss(&f, i, 0);
        }
    }
    CHECK(flagged >= 0);
    if (flagged < 0) return;
    f.runs[flagged].unstable = 1;
    CHECK_CMP(sched_start(f.s, f.runs, f.plan.n_runs), ==, 0);
    CHECK_CMP(f.n_dec, ==, 0);
    int took[16], n = 0;
    for (int run; n < 16 && (run = sched_take(f.s, 0)) >= 0;)
        took[n++] = run;
    CHECK_CMP(n, ==, 8); /* seed index 4 of every cell, none of seed index 2 */
    for (int i = 0; i < n; i++)
        CHECK_MSG(f.plan.runs[took[i]].seed == 4, "took %s", f.plan.runs[took[i]].name);
    for (int i = 0; i < n; i++) {
        EndEvent e = end_of(0, 1);
        e.final_val_loss = grid_loss(&f, took[i], 0);
        sched_ended(f.s, took[i], &e);
    }
    CHECK_CMP(f.n_dec, ==, 6);
    char note[JOURNAL_NOTE_MAX];
    snprintf(note, sizeof note, "dropped: %s unstable", f.plan.runs[flagged].name);
    for (int i = 0; i < f.n_dec && i < 6; i++) {
        const JournalDecision *d = &f.dec[i];
        int j = d->contrast;
        /* seed indices 0, 1, 3, 4: all four minus index 2, plus index 4 */
        double want =
            j >= 0 && j < 6
                ? (hand_diff(j, 5, 0) * 5 - hand_diff(j, 3, 0) * 3 + hand_diff(j, 2, 0) * 2) / 4
                : 0;
        CHECK_MSG(d->look == 0 && d->n == 4 && !strcmp(d->note, note) &&
                      fabs(d->diff - want) < 1e-9,
                  "contrast %d: look %d n %d note '%s' diff %.12g (hand %.12g)", j, d->look, d->n,
                  d->note, d->diff, want);
    }
    /* every contrast settled: the seed index 2 runs never trained are not needed */
    int idx2 = 0;
    for (int i = 0; i < f.n_not_needed; i++)
        idx2 += f.plan.runs[f.not_needed[i]].seed == 2;
    CHECK_CMP(idx2, ==, 7);
    CHECK(!sched_more(f.s) && sched_take(f.s, 0) == -1);
    close_fx(&f);
}

/* ------------------------------------------------------------------ --join */

static int same_bits(double x, double y) {
    return !memcmp(&x, &y, sizeof x);
}

/* Both processes made the same decisions (each contrast's, in look order; the order between
 * contrasts follows when each heard the results). */
static void check_same_decisions(const Fx *a, const Fx *b) {
    CHECK_MSG(a->n_dec == b->n_dec, "%d and %d decisions", a->n_dec, b->n_dec);
    for (int i = 0; i < a->n_dec; i++) {
        const JournalDecision *x = &a->dec[i], *y = NULL;
        for (int k = 0; k < b->n_dec && !y; k++)
            if (b->dec[k].contrast == x->contrast && b->dec[k].look == x->look) y = &b->dec[k];
        CHECK_MSG(y != NULL, "contrast %d look %d: only in one process", x->contrast, x->look);
        if (!y) continue;
        CHECK(x->n == y->n && x->verdict == y->verdict && !strcmp(x->note, y->note));
        CHECK(same_bits(x->diff, y->diff) && same_bits(x->sd, y->sd) && same_bits(x->lo, y->lo) &&
              same_bits(x->hi, y->hi) && same_bits(x->level, y->level));
    }
}

/* OUT.h5.d/join/NAME under this test's output out. */
static void join_path(const char *out, const char *name, char *buf, size_t n) {
    char dir[ABL_PATH_MAX];
    journal_dir_for(out, dir, sizeof dir);
    snprintf(buf, n, "%s/join/%s", dir, name);
}

/* A third process, "other", alive (its journal locked here, its heartbeat fresh) and
 * holding run id. */
static Journal *other_holds(const char *out, const char *id) {
    char dir[ABL_PATH_MAX + 64], path[ABL_PATH_MAX + 128], err[ABL_ERR_MAX];
    join_path(out, "procs/20260101T000000Z-other-1", dir, sizeof dir);
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/alive", dir);
    test_write_text(path, "");
    snprintf(path, sizeof path, "%s/journal", dir);
    Journal *j = journal_create(path, err);
    CHECK_MSG(j != NULL, "%s", err);
    join_path(out, "claims/", path, sizeof path);
    strcat(path, id);
    test_write_text(path, "held 20260101T000000Z-other-1\n");
    return j;
}

/* Two joined processes: A trains seeds 1..4 of every configuration, B (which could claim
 * none of them) decides from the results in A's done claims, and makes exactly A's
 * decisions; A gives up the runs no look needs (B finds them done, not_needed), except one
 * a third process holds: kept there as speculative, both wait for it, and its result
 * changes nothing. */
TEST(joined_decides_from_claims) {
    Fx a, b;
    char err[ABL_ERR_MAX], out[1200];
    snprintf(out, sizeof out, "%s/claims.h5", g_tmp);
    CHECK_MSG(open_fx(&a, "", out, err) == 0, "%s", err);
    CHECK_MSG(open_fx(&b, "", out, err) == 0, "%s", err);
    if (!a.s || !b.s) return;
    CHECK(a.s->ops->shared && !strcmp(a.s->ops->continue_flag, "--join"));
    const int spec = RUN(1, 5); /* far/seed6: held by "other" */
    Journal *other = other_holds(out, a.plan.runs[spec].id);
    CHECK_CMP(sched_start(a.s, a.runs, a.plan.n_runs), ==, 0);
    CHECK_CMP(sched_start(b.s, b.runs, b.plan.n_runs), ==, 0);
    for (int i = 0; i < 12; i++) {
        int run = sched_take(a.s, 0);
        CHECK_MSG(run == RUN(i % 3, i / 3), "take %d: run %d", i, run);
    }
    CHECK(sched_take(a.s, 0) == -1 && !sched_more(a.s));
    CHECK(sched_take(b.s, 0) == -1 && sched_more(b.s)); /* A holds them: B waits */
    for (int i = 0; i < 12; i++) {
        EndEvent e = end_of(RUN(i % 3, i / 3), 1);
        sched_ended(a.s, RUN(i % 3, i / 3), &e);
    }
    CHECK(a.n_dec == 2 && a.n_not_needed == 11 && a.n_elsewhere == 0);
    CHECK(sched_more(a.s)); /* the speculative run, held elsewhere */
    CHECK_CMP(sched_take(b.s, 10), ==, -1);
    check_same_decisions(&a, &b);
    CHECK_MSG(b.n_not_needed == 0 && b.n_elsewhere == 23, "%d not needed, %d heard", b.n_not_needed,
              b.n_elsewhere);
    CHECK(same_bits(b.elsewhere[RUN(1, 2)].final_val_loss, loss_of(RUN(1, 2))) &&
          b.elsewhere[RUN(1, 2)].status == RUN_DONE);
    CHECK_CMP(b.elsewhere[RUN(2, 6)].status, ==, RUN_NOT_NEEDED);
    CHECK(sched_more(b.s));
    /* "other" finishes its run: both stop waiting; it decides nothing */
    char path[ABL_PATH_MAX + 64];
    join_path(out, "claims/", path, sizeof path);
    strcat(path, a.plan.runs[spec].id);
    test_write_text(path, "done 20260101T000000Z-other-1\nresult done 0x1p+9 0 0x1p+0\n");
    CHECK(sched_take(a.s, 20) == -1 && !sched_more(a.s));
    CHECK(sched_take(b.s, 20) == -1 && !sched_more(b.s));
    CHECK(a.n_dec == 2 && b.n_dec == 2 && a.n_elsewhere == 1 && b.n_elsewhere == 24);
    CHECK_CMP(a.elsewhere[spec].final_val_loss, ==, 512.0);
    close_fx(&a);
    close_fx(&b);
    journal_close(other);
}

/* The result of run in joined_shared: "same" seed 2 far off, so that "same" stays open
 * past its first look. */
static EndEvent shared_end(int run) {
    EndEvent e = end_of(run, 1);
    if (run == RUN(2, 1)) e.final_val_loss += 0.5;
    return e;
}

/* Two processes share the runs (each claims what the other has not) and end them in turn:
 * both make the decisions one process makes from the same results (look by look, every
 * number identical), and the runs that one process gives up are given up here too, each
 * by exactly one of the two. */
TEST(joined_shared) {
    Fx ref, a, b;
    char err[ABL_ERR_MAX], out[1200];
    CHECK_MSG(open_fx(&ref, "", NULL, err) == 0, "%s", err);
    if (!ref.s) return;
    CHECK_CMP(sched_start(ref.s, ref.runs, ref.plan.n_runs), ==, 0);
    for (int run; (run = sched_take(ref.s, 0)) >= 0;) {
        EndEvent e = shared_end(run);
        sched_ended(ref.s, run, &e);
    }
    CHECK(!sched_more(ref.s) && ref.n_dec >= 3); /* "same" looked at more than once */
    snprintf(out, sizeof out, "%s/shared.h5", g_tmp);
    CHECK_MSG(open_fx(&a, "", out, err) == 0, "%s", err);
    CHECK_MSG(open_fx(&b, "", out, err) == 0, "%s", err);
    if (!a.s || !b.s) return;
    CHECK_CMP(sched_start(a.s, a.runs, a.plan.n_runs), ==, 0);
    CHECK_CMP(sched_start(b.s, b.runs, b.plan.n_runs), ==, 0);
    int mine[2][12], n[2] = {0, 0};
    Fx *p[2] = {&a, &b};
    for (int i = 0; i < 12; i++) {
        int run = sched_take(p[i % 2]->s, 0);
        CHECK(run >= 0 && run < 24 && run % NS < 4);
        if (run >= 0) mine[i % 2][n[i % 2]++] = run;
    }
    CHECK(n[0] == 6 && n[1] == 6);
    double now = 0;
    for (int i = 0; i < 6; i++)
        for (int w = 0; w < 2; w++) {
            EndEvent e = shared_end(mine[w][i]);
            sched_ended(p[w]->s, mine[w][i], &e);
        }
    /* "same" is open at seed 4: seeds 5, 6 of it and the baseline, shared out again */
    for (int round = 0; round < 20 && (sched_more(a.s) || sched_more(b.s)); round++) {
        now += 2;
        for (int w = 0; w < 2; w++) {
            int run;
            while ((run = sched_take(p[w]->s, now)) >= 0) {
                EndEvent e = shared_end(run);
                sched_ended(p[w]->s, run, &e);
            }
        }
    }
    CHECK(!sched_more(a.s) && !sched_more(b.s));
    check_same_decisions(&ref, &a);
    check_same_decisions(&ref, &b);
    int given[64] = {0}, ref_given[64] = {0};
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < p[w]->n_not_needed; i++)
            given[p[w]->not_needed[i]]++;
    for (int i = 0; i < ref.n_not_needed; i++)
        ref_given[ref.not_needed[i]]++;
    for (int r = 0; r < 24; r++)
        CHECK_MSG(given[r] == ref_given[r], "run %d given up %d times, by one process %d", r,
                  given[r], ref_given[r]);
    close_fx(&ref);
    close_fx(&a);
    close_fx(&b);
}

/* The budget under --join: once spent, the runs nobody holds are given up, and a run
 * another process holds is waited for (its result changes nothing). */
TEST(joined_budget) {
    Fx a;
    char err[ABL_ERR_MAX], out[1200], path[ABL_PATH_MAX + 64];
    snprintf(out, sizeof out, "%s/budget.h5", g_tmp);
    CHECK_MSG(open_fx(&a, "  budget: {core_hours: 0.001}\n", out, err) == 0, "%s", err);
    if (!a.s) return;
    Journal *other = other_holds(out, a.plan.runs[RUN(0, 1)].id);
    CHECK_CMP(sched_start(a.s, a.runs, a.plan.n_runs), ==, 0);
    int run = sched_take(a.s, 0), second = sched_take(a.s, 0);
    CHECK(run == RUN(0, 0) && second == RUN(1, 0));
    EndEvent e = end_of(run, 4.0); /* 3.6 s is the budget */
    sched_ended(a.s, run, &e);
    CHECK(a.n_dec == 2 && a.dec[0].verdict == SEQ_UNRESOLVED);
    CHECK_CMP(a.n_not_needed, ==, a.plan.n_runs - 3); /* ours training and the other's are kept */
    CHECK(sched_take(a.s, 10) == -1 && sched_more(a.s));
    join_path(out, "claims/", path, sizeof path);
    strcat(path, a.plan.runs[RUN(0, 1)].id);
    test_write_text(path, "done 20260101T000000Z-other-1\nresult done 0x1p+2 0 0x1p+2\n");
    CHECK(sched_take(a.s, 20) == -1 && !sched_more(a.s) && a.n_elsewhere == 1);
    e = end_of(second, 1);
    sched_ended(a.s, second, &e);
    CHECK_CMP(a.n_dec, ==, 2);
    close_fx(&a);
    journal_close(other);
}

/* One process trains the whole sweep (journaling its decisions unless unjournaled; with
 * left_one, killed before it gave up its last run no look needs); then another joins the
 * complete sweep: it replays the same decisions (and gives that run up), and its journal
 * goes (1) when the first one's journal holds all it recorded, else stays (0). */
/* join/done without the line of run id */
static void drop_done_line(const char *out, const char *id) {
    char path[ABL_PATH_MAX + 64], line[256];
    join_path(out, "done", path, sizeof path);
    FILE *f = fopen(path, "r");
    Buf keep = {0};
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, id, strlen(id)) != 0) buf_adds(&keep, line);
    if (f) fclose(f);
    CHECK(!keep.oom);
    test_write_text(path, keep.p ? keep.p : "");
    buf_free(&keep);
}

static int late_join_leaves(const char *name, int unjournaled, int left_one) {
    Fx a, b;
    char err[ABL_ERR_MAX], out[1200], procs[ABL_PATH_MAX + 16];
    snprintf(out, sizeof out, "%s/%s.h5", g_tmp, name);
    CHECK_MSG(open_fx(&a, "", out, err) == 0, "%s", err);
    if (!a.s) return -1;
    a.unjournaled = unjournaled;
    CHECK_CMP(sched_start(a.s, a.runs, a.plan.n_runs), ==, 0);
    for (int run; (run = sched_take(a.s, 0)) >= 0;) {
        EndEvent e = end_of(run, 1);
        sched_ended(a.s, run, &e);
    }
    CHECK(!sched_more(a.s) && a.n_dec == 2 && a.n_not_needed == 12);
    CHECK_CMP(journal_sync(a.j), ==, 0);
    if (left_one) { /* its claim still held by A, which is gone (no heartbeat, no journal) */
        char path[ABL_PATH_MAX + 64];
        join_path(out, "claims/", path, sizeof path);
        const char *id = a.plan.runs[a.not_needed[11]].id;
        strcat(path, id);
        test_write_text(path, "held 20260101T000000Z-gone-1\n");
        drop_done_line(out, id); /* A never wrote its done claim, so never its line */
    }
    CHECK_MSG(open_fx(&b, "", out, err) == 0, "%s", err);
    if (!b.s) return -1;
    CHECK_CMP(sched_start(b.s, b.runs, b.plan.n_runs), ==, 0);
    check_same_decisions(&a, &b);
    CHECK(b.n_elsewhere == b.plan.n_runs - left_one && b.n_not_needed == left_one);
    CHECK(!sched_more(b.s));
    join_path(out, "procs", procs, sizeof procs);
    CHECK_CMP(test_dir_entries(procs), ==, 2);
    CHECK_CMP(b.s->ops->complete_on_start(b.s, b.plan.n_runs, out), ==, 1);
    int left = test_dir_entries(procs);
    close_fx(&a);
    close_fx(&b);
    return left == 1;
}

/* Joining a complete sweep leaves nothing, unless it recorded what no journal held (a
 * decision, or a run given up, left by processes killed first): then its journal keeps it. */
TEST(joined_complete) {
    CHECK_CMP(late_join_leaves("complete", 0, 0), ==, 1);
    CHECK_CMP(late_join_leaves("complete-lost", 1, 0), ==, 0);
    CHECK_CMP(late_join_leaves("complete-given", 0, 1), ==, 0);
}

/* A process whose replicate: rule differs from the first process's is refused in one line,
 * before it leaves any file. */
TEST(joined_rule_refused) {
    Fx a, b;
    char err[ABL_ERR_MAX], out[1200], procs[ABL_PATH_MAX + 16];
    snprintf(out, sizeof out, "%s/rule.h5", g_tmp);
    CHECK_MSG(open_fx(&a, "", out, err) == 0, "%s", err);
    join_path(out, "procs", procs, sizeof procs);
    CHECK_CMP(test_dir_entries(procs), ==, 1);
    /* the first process takes its first looks (two contrasts settled at 4 seeds) */
    if (a.s) {
        CHECK_CMP(sched_start(a.s, a.runs, a.plan.n_runs), ==, 0);
        for (int i = 0, run; i < 12 && (run = sched_take(a.s, 0)) >= 0; i++) {
            EndEvent e = end_of(run, 1);
            sched_ended(a.s, run, &e);
        }
        CHECK_CMP(a.n_dec, ==, 2);
        CHECK(a.j && journal_sync(a.j) == 0);
    }
    /* another rule is refused in one line at its key, with what the sweep's rule spent */
    CHECK(open_fx(&b, "  budget: {core_hours: 10}\n", out, err) != 0 && !b.s);
    CHECK_MSG(strstr(err, "different replicate: section") && !strchr(err, '\n'), "%s", err);
    char spent[160];
    snprintf(spent, sizeof spent, "spent %.4g of alpha 0.05 in 2 looks",
             a.n_dec == 2 ? a.dec[0].level + a.dec[1].level : NAN);
    CHECK_MSG(!strncmp(err, "t.yaml:", 7) && strstr(err, ": replicate.budget: cannot join") &&
                  strstr(err, spent),
              "%s (want '%s')", err, spent);
    CHECK_CMP(test_dir_entries(procs), ==, 1);
    close_fx(&a);
    close_fx(&b);
}

/* Joined processes must decide the same family of contrasts: one with contrasts:
 * main_effects cannot join a factorial sweep begun with interactions. */
TEST(joined_family_refused) {
    Fx a, b;
    char err[ABL_ERR_MAX], out[1200], text[2048];
    snprintf(out, sizeof out, "%s/family.h5", g_tmp);
    snprintf(text, sizeof text, GRID, g_data);
    CHECK_MSG(open_text(&a, text, out, err) == 0, "%s", err);
    char *fam = strstr(text, "contrasts: interactions");
    CHECK(fam != NULL);
    if (fam) memcpy(fam + 11, "main_effects", 12); /* as long as "interactions" */
    CHECK(open_text(&b, text, out, err) != 0 && !b.s);
    CHECK_MSG(strstr(err, "different replicate: section") && !strchr(err, '\n'), "%s", err);
    close_fx(&a);
    close_fx(&b);
}

int main(int argc, char **argv) {
    const char *tmp = test_tmpdir();
    if (!tmp) return 1;
    snprintf(g_data, sizeof g_data, "%s/small.txt", tmp);
    snprintf(g_tmp, sizeof g_tmp, "%s", tmp);
    if (test_write_corpus(g_data, 4000) != 0) return 1;
    return test_main(argc, argv, "test_adaptive");
}
