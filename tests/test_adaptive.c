/* The adaptive scheduler of a replicate: sweep (schedule/adaptive.c, issue 20), driven with
 * made-up results: seeds 1..looks[0] of every configuration first, a look only on seeds
 * 1..n of both arms once they have ended, not_needed runs once a configuration is settled,
 * unstable runs, the budget, and the same decisions replayed from finished runs (a resume).
 * Uses whatever sequential.c is linked (the rule's own tests are test_sequential.c): the
 * effects here are far from the margins any valid rule draws at 4 pairs (see SPEC). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/plan/id_index.h"
#include "orchestrator/plan/contrast.h"
#include "orchestrator/plan/plan.h"
#include "orchestrator/schedule/scheduler.h"
#include "orchestrator/schedule/sequential.h"
#include "test_util.h"

static char g_data[1024];

/* baseline, far (1 nat worse), same (equal within 1e-5); 8 seeds, looks at 4, 6 and 8.
 * Paired differences spread by 1e-5 at most: at 4 pairs every valid rule settles far
 * (worse) and same (equivalent within 0.05) at its first look, however little alpha it
 * spends there (an interval half-width of 1e-5 x even t = 10^3 is far from the margins). */
static const char *SPEC = "data: {path: \"%s\"}\n"
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
} Fx;

static int h_decided(void *ctx, const JournalDecision *d) {
    Fx *f = ctx;
    if (f->n_dec < 64) f->dec[f->n_dec++] = *d;
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

static int open_fx(Fx *f, const char *extra, int join, char err[ABL_ERR_MAX]) {
    memset(f, 0, sizeof *f);
    char text[2048];
    snprintf(text, sizeof text, SPEC, g_data, extra);
    if (spec_load_string(&f->spec, "t.yaml", text, NULL, 0, err) != 0) return -1;
    if (plan_build(&f->spec, &f->plan, err) != 0) return -1;
    f->runs = calloc((size_t)f->plan.n_runs, sizeof *f->runs);
    for (int i = 0; i < f->plan.n_runs; i++)
        f->runs[i] =
            (SchedRun){f->plan.runs[i].id, f->plan.runs[i].name, 1.0, 0, RUN_DONE, NAN, 0, 0};
    SchedConfig cfg = {"unused.h5", &f->plan, join, 60, 0};
    SchedHost h = {f, NULL, NULL, NULL, NULL, h_decided, h_not_needed};
    char journal[ABL_PATH_MAX] = "";
    f->s = scheduler_open(&cfg, &h, journal, err);
    return f->s ? 0 : -1;
}

static void close_fx(Fx *f) {
    sched_close(f->s);
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
    CHECK_MSG(open_fx(&f, "", 0, err) == 0, "%s", err);
    if (!f.s) return;
    CHECK(sched_start(f.s, f.runs, f.plan.n_runs) == 0);
    /* seeds 1..4 of every configuration, lowest seed index first */
    int took[12], n = 0;
    for (int run; n < 12 && (run = sched_take(f.s, 0)) >= 0;)
        took[n++] = run;
    CHECK(n == 12);
    for (int i = 0; i < n; i++)
        CHECK_MSG(took[i] == RUN(i % 3, i / 3), "take %d: run %d", i, took[i]);
    CHECK(sched_take(f.s, 0) == -1 && !sched_more(f.s)); /* nothing more until a look */
    /* a look only once seeds 1..4 of both arms have ended: the baseline and "same" first */
    int order[12] = {RUN(0, 0), RUN(2, 0), RUN(2, 1), RUN(0, 1), RUN(2, 2), RUN(0, 2),
                     RUN(2, 3), RUN(0, 3), RUN(1, 3), RUN(1, 0), RUN(1, 2), RUN(1, 1)};
    for (int i = 0; i < 12; i++) {
        EndEvent e = end_of(order[i], 1);
        sched_ended(f.s, order[i], &e);
        if (i == 6 || i == 10) CHECK(f.n_dec == (i == 6 ? 0 : 1));
        if (i == 7) CHECK(f.n_dec == 1 && f.dec[0].contrast == 1);
    }
    CHECK(f.n_dec == 2);
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

/* The same decisions from runs a resumed sweep finished before; results of seeds beyond a
 * look never enter it. */
TEST(replay) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_fx(&f, "", 0, err) == 0, "%s", err);
    if (!f.s) return;
    for (int i = 0; i < f.plan.n_runs; i++) {
        int k = i % NS;
        if (k > 4) continue; /* seeds 1..5 ended; seed 5 with a wild result */
        f.runs[i].finished = 1;
        f.runs[i].final_val_loss = k == 4 ? 100.0 * (i + 1) : loss_of(i);
    }
    CHECK(sched_start(f.s, f.runs, f.plan.n_runs) == 0);
    CHECK(f.n_dec == 2);
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
 * run (issue 18: quadratic at 10^5 runs); counted through id_index_total_compares. */
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
    CHECK(sched_start(f.s, f.runs, n) == 0);
    long compares = id_index_total_compares() - before;
    CHECK_MSG(compares <= 2 * n, "%ld id comparisons for %d journal runs", compares, n);
    CHECK(f.n_dec == 2);
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

/* An open contrast gets its next look's seeds (and the baseline's); an unstable run of
 * seeds 1..n ends its contrast as unstable. */
TEST(next_look_and_unstable) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_fx(&f, "", 0, err) == 0, "%s", err);
    if (!f.s) return;
    CHECK(sched_start(f.s, f.runs, f.plan.n_runs) == 0);
    first_look_same_open(&f);
    CHECK(f.n_dec == 2 && f.dec[1].contrast == 1 && f.dec[1].verdict == SEQ_OPEN);
    /* seeds 5 and 6 of "same" and of the baseline, nothing of "far" (settled) */
    int t[4];
    for (int i = 0; i < 4; i++)
        t[i] = sched_take(f.s, 0);
    CHECK(t[0] == RUN(0, 4) && t[1] == RUN(2, 4) && t[2] == RUN(0, 5) && t[3] == RUN(2, 5));
    CHECK(sched_take(f.s, 0) == -1);
    CHECK(f.n_not_needed == 4); /* far's seeds 5..8 */
    for (int i = 0; i < 4; i++) {
        EndEvent e = end_of(t[i], 1);
        if (i == 3) e.instability = INSTAB_ABOVE_UNIFORM; /* flagged, though done */
        sched_ended(f.s, t[i], &e);
    }
    CHECK(f.n_dec == 3 && f.dec[2].contrast == 1 && f.dec[2].look == 1 &&
          f.dec[2].verdict == SEQ_UNSTABLE && strstr(f.dec[2].note, "same/seed5"));
    CHECK(f.n_not_needed == 8 && !sched_more(f.s));
    close_fx(&f);
}

/* The budget: no new run once spent, the open contrasts end unresolved (said in the note). */
TEST(budget) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_fx(&f, "  budget: {core_hours: 0.001}\n", 0, err) == 0, "%s", err);
    if (!f.s) return;
    CHECK(sched_start(f.s, f.runs, f.plan.n_runs) == 0);
    int run = sched_take(f.s, 0), other = sched_take(f.s, 0), third = sched_take(f.s, 0);
    EndEvent e = end_of(run, 4.0); /* 3.6 s is the budget */
    sched_ended(f.s, run, &e);
    CHECK(f.n_dec == 2 && f.dec[0].verdict == SEQ_UNRESOLVED && !strcmp(f.dec[0].note, "budget"));
    CHECK(f.n_dec == 2 && f.dec[1].verdict == SEQ_UNRESOLVED && f.dec[1].look == -1);
    CHECK(sched_take(f.s, 0) == -1 && !sched_more(f.s));
    CHECK(f.n_not_needed == f.plan.n_runs - 3); /* the ones still training are kept */
    /* one of them interrupted on its own is not needed any more: not taken again */
    sched_requeue(f.s, third);
    CHECK(f.n_not_needed == f.plan.n_runs - 2 && f.not_needed[f.n_not_needed - 1] == third);
    CHECK(sched_take(f.s, 0) == -1 && !sched_more(f.s));
    e = end_of(other, 1);
    sched_ended(f.s, other, &e); /* changes nothing */
    CHECK(f.n_dec == 2);
    close_fx(&f);
}

/* A resume with a larger budget: runs the first session did not need (its budget ran out)
 * train when a look needs them; the others stay not needed. */
TEST(budget_raised) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_fx(&f, "  budget: {core_hours: 10}\n", 0, err) == 0, "%s", err);
    if (!f.s) return;
    for (int i = 0; i < f.plan.n_runs; i++) {
        int k = i % NS;
        f.runs[i].finished = 1;
        f.runs[i].status = k < 4 ? RUN_DONE : RUN_NOT_NEEDED;
        f.runs[i].final_val_loss = loss_of(i) + (i == RUN(2, 1) ? 0.5 : 0); /* same: open */
    }
    CHECK(sched_start(f.s, f.runs, f.plan.n_runs) == 0);
    CHECK(f.n_dec == 2 && f.dec[1].contrast == 1 && f.dec[1].verdict == SEQ_OPEN);
    CHECK(f.n_not_needed == 4); /* far's seeds 5..8 (the host keeps their status) */
    int a = sched_take(f.s, 0), b = sched_take(f.s, 0);
    CHECK(a == RUN(0, 4) && b == RUN(2, 4));
    close_fx(&f);
}

/* A requeued or cancelled run is taken again first. */
TEST(requeue) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK_MSG(open_fx(&f, "", 0, err) == 0, "%s", err);
    if (!f.s) return;
    CHECK(sched_start(f.s, f.runs, f.plan.n_runs) == 0);
    int a = sched_take(f.s, 0), b = sched_take(f.s, 0);
    sched_requeue(f.s, a);
    CHECK(sched_more(f.s) && sched_take(f.s, 0) == a && sched_take(f.s, 0) != b);
    sched_cancel(f.s, b);
    CHECK(sched_take(f.s, 0) == b && f.n_not_needed == 0);
    close_fx(&f);
}

/* --join cannot decide from one journal's share yet: refused in one line. */
TEST(join_refused) {
    Fx f;
    char err[ABL_ERR_MAX];
    CHECK(open_fx(&f, "", 1, err) != 0 && !f.s);
    CHECK_MSG(strstr(err, "cannot be joined") && !strchr(err, '\n'), "%s", err);
    close_fx(&f);
}

int main(int argc, char **argv) {
    const char *tmp = test_tmpdir();
    if (!tmp) return 1;
    snprintf(g_data, sizeof g_data, "%s/small.txt", tmp);
    if (test_write_corpus(g_data, 4000) != 0) return 1;
    return test_main(argc, argv, "test_adaptive");
}
