/* The tune: section (plan/spec_tune.h): its parsing and errors, the tuning runs the planner
 * adds to each configuration, the comparison runs' "tuned" ids, and the successive-halving
 * arithmetic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orchestrator/plan/contrast.h"
#include "orchestrator/plan/plan.h"
#include "orchestrator/plan/run_id.h"
#include "orchestrator/plan/spec.h"
#include "orchestrator/plan/spec_tune.h"
#include "orchestrator/record/journal_tune.h"
#include "orchestrator/schedule/scheduler.h"
#include "util/buf.h"
#include "util/le.h"
#include "test_util.h"

static char g_data[1024];
static char g_err[ABL_ERR_MAX];

static int load_plan(const char *text, Spec *s, Plan *p) {
    memset(p, 0, sizeof *p);
    if (spec_load_string(s, "t.yaml", test_with_data(text, g_data), NULL, 0, g_err) != 0) return -1;
    if (plan_build(s, p, g_err) != 0) {
        spec_free(s);
        return -1;
    }
    return 0;
}

static void done(Spec *s, Plan *p) {
    plan_free(p);
    spec_free(s);
}

/* The spec must be refused with an error that starts with prefix ("t.yaml:L:C: ") and
 * contains word. */
static void refused(int line, const char *text, const char *prefix, const char *word) {
    Spec s;
    Plan p;
    if (load_plan(text, &s, &p) == 0) {
        fprintf(stderr, "test_tune.c:%d: expected an error, got %d runs\n", line, p.n_runs);
        test_failures++;
        done(&s, &p);
        return;
    }
    if (strncmp(g_err, prefix, strlen(prefix)) != 0 || !strstr(g_err, word) ||
        strchr(g_err, '\n')) {
        fprintf(stderr, "test_tune.c:%d: want '%s...%s', got:\n  %s\n", line, prefix, word, g_err);
        test_failures++;
    }
}
#define REFUSED(text, prefix, word) refused(__LINE__, text, prefix, word)

static const char VARIANTS[] =
    "data: {path: \"@DATA@\"}\n"
    "base: {preset: micro, train: {steps: 30, lr: 1.0e-2}}\n"
    "variants:\n"
    "  baseline: {}\n"
    "  rope: {model.position: rope}\n"
    "seeds: 3\n"
    "tune: {knobs: {train.lr: [3.0e-3, 1.0e-2, 3.0e-2]}, seeds: [1000]}\n";

TEST(plan_order_and_ids) {
    Spec s;
    Plan p;
    CHECK_MSG(load_plan(VARIANTS, &s, &p) == 0, "%s", g_err);
    if (p.n_runs == 0) return;
    CHECK(s.tune.on && s.tune.n_knobs == 1 && s.tune.n_candidates == 3 && s.tune.eta == 3);
    /* per configuration: 3 candidates x 1 tuning seed, then its 3 comparison runs */
    CHECK_MSG(p.n_runs == 12, "%d runs", p.n_runs);
    if (p.n_runs != 12) {
        done(&s, &p);
        return;
    }
    CHECK(!strcmp(p.runs[0].name, "baseline/tune/lr=3.0e-3/seed1000"));
    CHECK(!strcmp(p.runs[2].name, "baseline/tune/lr=3.0e-2/seed1000"));
    CHECK(!strcmp(p.runs[3].name, "baseline/seed0"));
    CHECK(!strcmp(p.runs[6].name, "rope/tune/lr=3.0e-3/seed1000"));
    CHECK(!strcmp(p.runs[11].name, "rope/seed2"));
    double want[3] = {3e-3, 1e-2, 3e-2};
    for (int c = 0; c < 3; c++) {
        CHECK(p.runs[c].tune_candidate == c && p.runs[c].seed == 1000);
        CHECK(p.runs[c].cfg.train.lr == want[c]);
        char id[RUN_ID_CHARS];
        plan_run_id(&p.runs[c].cfg, 1000, id); /* a tuning run's id is any run's */
        CHECK(!strcmp(id, p.runs[c].id));
    }
    for (int i = 0; i < 12; i++)
        CHECK(p.runs[i].config == i / 6);
    for (int i = 3; i < 6; i++) {
        CHECK(p.runs[i].tune_candidate == -1);
        /* a comparison run's id says "tuned", whatever value the choice gives it */
        char untuned[RUN_ID_CHARS];
        plan_run_id(&p.runs[i].cfg, p.runs[i].seed, untuned);
        CHECK(strcmp(untuned, p.runs[i].id) != 0);
        RunConfig other = p.runs[i].cfg;
        other.train.lr = 0.123;
        char again[RUN_ID_CHARS];
        run_id_format(run_id_hash_tuned(&other, s.tune.knobs, 1, &p.runs[i].seed), again);
        CHECK(!strcmp(again, p.runs[i].id));
    }
    done(&s, &p);

    /* the base's value of the tuned knob does not enter the comparison ids */
    char text[2048];
    snprintf(text, sizeof text, "%s", VARIANTS);
    char *lr = strstr(text, "lr: 1.0e-2");
    memcpy(lr, "lr: 5.0e-2", 10);
    Spec s2;
    Plan p2;
    CHECK_MSG(load_plan(text, &s2, &p2) == 0, "%s", g_err);
    Spec s1;
    Plan p1;
    CHECK_MSG(load_plan(VARIANTS, &s1, &p1) == 0, "%s", g_err);
    if (p1.n_runs == 12 && p2.n_runs == 12)
        for (int i = 0; i < 12; i++)
            CHECK_MSG(!strcmp(p1.runs[i].id, p2.runs[i].id), "run %d", i);
    done(&s1, &p1);
    done(&s2, &p2);
}

/* Without tune: the plan is what it was: the same ids (plan_run_id), every run a comparison
 * run, configurations counted in plan order. */
TEST(no_tune_unchanged) {
    const char *y = "data: {path: \"@DATA@\"}\n"
                    "base: {preset: micro, train: {steps: 30}}\n"
                    "grid: {model.n_head: [1, 2]}\n"
                    "seeds: 2\n";
    Spec s;
    Plan p;
    CHECK_MSG(load_plan(y, &s, &p) == 0, "%s", g_err);
    CHECK(!s.tune.on && p.n_runs == 4);
    for (int i = 0; i < p.n_runs; i++) {
        char id[RUN_ID_CHARS];
        plan_run_id(&p.runs[i].cfg, p.runs[i].seed, id);
        CHECK(!strcmp(id, p.runs[i].id));
        CHECK(p.runs[i].tune_candidate == -1 && p.runs[i].config == i / 2);
    }
    done(&s, &p);
}

TEST(seeds_disjoint) {
    /* seed 2 is a comparison seed of seeds: 3 (0, 1, 2): refused at the tuning seed */
    REFUSED("data: {path: \"@DATA@\"}\n"
            "base: {preset: micro}\n"
            "seeds: 3\n"
            "tune:\n"
            "  knobs: {train.lr: [1.0e-3, 1.0e-2]}\n"
            "  seeds: [1000, 2]\n",
            "t.yaml:6:17: ", "seed 2 is also a comparison seed (seeds at line 3)");
    REFUSED("data: {path: \"@DATA@\"}\n"
            "seeds: [7, 9]\n"
            "tune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}, seeds: [9]}\n",
            "t.yaml:3:53: ", "disjoint");
    /* the default seed (0) counts too */
    REFUSED("data: {path: \"@DATA@\"}\n"
            "tune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}, seeds: [0]}\n",
            "t.yaml:2:53: ", "seed 0 is also a comparison seed");
    REFUSED("data: {path: \"@DATA@\"}\n"
            "tune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}, seeds: [5, 5]}\n",
            "t.yaml:2:56: ", "duplicate seed 5");
}

TEST(errors) {
    REFUSED("data: {path: \"@DATA@\"}\ntune: {seeds: [9]}\n",
            "t.yaml:2:1: ", "tune.knobs is required");
    REFUSED("data: {path: \"@DATA@\"}\ntune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}}\n",
            "t.yaml:2:1: ", "tune.seeds is required");
    REFUSED("data: {path: \"@DATA@\"}\ntune: {knobs: {train.lr: [1.0e-3]}, seeds: [9]}\n",
            "t.yaml:2:15: ", "one candidate only");
    REFUSED("data: {path: \"@DATA@\"}\ntune: {knobs: {train.lr: [1.0e-3, 1e-3]}, seeds: [9]}\n",
            "t.yaml:2:35: ", "listed twice");
    REFUSED("data: {path: \"@DATA@\"}\ntune: {knobs: {train.lrr: [1, 2]}, seeds: [9]}\n",
            "t.yaml:2:16: ", "did you mean 'train.lr'");
    REFUSED("data: {path: \"@DATA@\"}\ntune: {knobs: {train.steps: [10, 20]}, seeds: [9]}\n",
            "t.yaml:2:16: ", "is a budget");
    REFUSED("data: {path: \"@DATA@\"}\ngrid: {train.lr: [1.0e-3, 2.0e-3]}\n"
            "tune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}, seeds: [9]}\n",
            "t.yaml:3:16: ", "is a grid axis (line 2)");
    REFUSED("data: {path: \"@DATA@\"}\nvariants: {baseline: {}, hot: {train.lr: 0.1}}\n"
            "tune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}, seeds: [9]}\n",
            "t.yaml:3:16: ", "variant 'hot' sets train.lr");
    /* selection reads the validation loss only: the test split never picks a value */
    REFUSED("data: {path: \"@DATA@\"}\n"
            "tune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}, seeds: [9], metric: test_loss}\n",
            "t.yaml:2:65: ", "only val_loss");
    REFUSED("data: {path: \"@DATA@\"}\n"
            "tune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}, seeds: [9], eta: 1}\n",
            "t.yaml:2:62: ", "tune.eta");
    REFUSED("data: {path: \"@DATA@\"}\n"
            "tune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}, seeds: [9], first_rung: 1.5}\n",
            "t.yaml:2:69: ", "tune.first_rung: expected the fraction");
    /* 2 candidates make one rung: no first cut to place */
    REFUSED("data: {path: \"@DATA@\"}\n"
            "tune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}, seeds: [9], first_rung: 0.1}\n",
            "t.yaml:2:69: ", "make one rung");
    /* 10 candidates, eta 3: rungs at f, 3f and 1: 3f must stay below the full budget */
    REFUSED("data: {path: \"@DATA@\"}\n"
            "tune: {knobs: {train.lr: {log: [1.0e-3, 1.0e-1], n: 10}}, seeds: [9], "
            "first_rung: 0.4}\n",
            "t.yaml:2:83: ", "give less than 0.3333");
    REFUSED("data: {path: \"@DATA@\"}\ntune: {knobs: {train.lr: [1, 2]}, seeds: [9], rungs: 2}\n",
            "t.yaml:2:47: ", "unknown key 'tune.rungs'");
    REFUSED("data: {path: \"@DATA@\"}\n"
            "tune: {knobs: {train.lr: {log: [1.0e-2, 1.0e-3], n: 3}}, seeds: [9]}\n",
            "t.yaml:2:41: ", "HI must be above its LO");
    REFUSED("data: {path: \"@DATA@\"}\n"
            "tune: {knobs: {model.activation: {log: [1, 2], n: 3}}, seeds: [9]}\n",
            "t.yaml:2:34: ", "numeric knob");
    /* a candidate that makes an invalid run is refused at its value */
    REFUSED("data: {path: \"@DATA@\"}\n"
            "tune: {knobs: {train.lr: [1.0e-3, -1]}, seeds: [9]}\n",
            "t.yaml:2:35: ", "tuning run");
    /* replicate: plans seeds 0..max-1: a tuning seed among them is refused */
    REFUSED("data: {path: \"@DATA@\"}\nvariants: {baseline: {}, b: {model.n_head: 2}}\n"
            "replicate: {seeds: {min: 2, max: 4}, resolve: 0.01}\n"
            "tune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}, seeds: [2]}\n",
            "t.yaml:4:53: ", "also a comparison seed (replicate.seeds");
}

/* tune: with replicate: each configuration plans its tuning runs, then replicate.seeds.max
 * comparison runs; the contrasts read the comparison runs alone */
TEST(replicate_layout) {
    const char *y = "data: {path: \"@DATA@\"}\n"
                    "base: {preset: micro}\n"
                    "variants: {baseline: {}, b: {model.n_head: 2}, c: {model.n_layer: 1}}\n"
                    "replicate: {seeds: {min: 2, max: 3}, resolve: 0.01}\n"
                    "tune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}, seeds: [7, 8]}\n";
    Spec s;
    Plan p;
    CHECK_MSG(load_plan(y, &s, &p) == 0, "%s", g_err);
    CHECK(p.n_runs == 3 * (4 + 3));
    Contrasts c;
    CHECK_MSG(contrasts_build(&p, &c, g_err) == 0, "%s", g_err);
    CHECK(c.n_configs == 3 && c.n_seeds == 3 && c.per == 7 && c.first == 4);
    CHECK(c.n_contrasts == 2 && c.baseline == 0);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 3; i++) {
            const PlannedRun *r = &p.runs[contrasts_run(&c, k, i)];
            CHECK(r->tune_candidate < 0 && r->seed == (uint64_t)i);
            CHECK(contrasts_config_of(&c, contrasts_run(&c, k, i)) == k);
            CHECK(contrasts_seed_of(&c, contrasts_run(&c, k, i)) == i);
        }
    for (int i = 0; i < p.n_runs; i++)
        CHECK((p.runs[i].tune_candidate >= 0) == (contrasts_seed_of(&c, i) < 0));
    CHECK(!strcmp(c.config_name[1], "b") && !strcmp(c.list[0].label, "b"));
    contrasts_free(&c);
    plan_free(&p);
    spec_free(&s);
}

TEST(log_range_and_product) {
    const char *y = "data: {path: \"@DATA@\"}\n"
                    "base: {preset: micro}\n"
                    "seeds: 2\n"
                    "tune:\n"
                    "  knobs:\n"
                    "    train.lr: {log: [1.0e-3, 1.0e-1], n: 3}\n"
                    "    train.warmup_steps: [0, 10]\n"
                    "  seeds: [100, 101]\n"
                    "  eta: 2\n";
    Spec s;
    Plan p;
    CHECK_MSG(load_plan(y, &s, &p) == 0, "%s", g_err);
    if (!s.tune.on) return;
    CHECK(s.tune.n_candidates == 6 && s.tune.eta == 2 && s.tune.n_seeds == 2);
    CHECK(!strcmp(s.tune.values[0][1].text, "0.01"));
    CHECK(p.n_runs == 6 * 2 + 2);
    /* candidates: last knob fastest; each at both tuning seeds */
    if (p.n_runs == 14) {
        CHECK(!strcmp(p.runs[0].name, "baseline/tune/lr=0.001/warmup_steps=0/seed100"));
        CHECK(!strcmp(p.runs[1].name, "baseline/tune/lr=0.001/warmup_steps=0/seed101"));
        CHECK(!strcmp(p.runs[2].name, "baseline/tune/lr=0.001/warmup_steps=10/seed100"));
        CHECK(p.runs[11].cfg.train.lr == 0.1 && p.runs[11].cfg.train.warmup_steps == 10);
        CHECK(p.runs[11].tune_candidate == 5 && p.runs[12].tune_candidate == -1);
    }
    done(&s, &p);
}

TEST(rungs) {
    int keep[SPEC_TUNE_MAX_RUNGS];
    double frac[SPEC_TUNE_MAX_RUNGS];
    /* 6 candidates, eta 3: all 6 at 1/9 of the budget (standard successive halving's first
     * rung: 6 -> 2 -> 1 ends at the full budget from there), the best 2 at the full budget */
    int n = spec_tune_rungs(6, 3, 0, keep, frac);
    CHECK(n == 2 && keep[0] == 6 && keep[1] == 2);
    CHECK(fabs(frac[0] - 1.0 / 9) < 1e-12 && frac[1] == 1.0);
    CHECK(fabs(spec_tune_budgets(6, 3, 0) - (6.0 / 9 + 2 * 8.0 / 9)) < 1e-12);
    /* 4 to 6 candidates at eta 3 train at most 2.5 full runs a tuning seed: below the 3 of a
     * comparison's three seeds */
    for (int c = 4; c <= 6; c++)
        CHECK(spec_tune_budgets(c, 3, 0) < 2.5);
    /* 9 candidates: 9 at 1/9 of the budget, the best 3 at the full budget */
    n = spec_tune_rungs(9, 3, 0, keep, frac);
    CHECK(n == 2 && keep[0] == 9 && keep[1] == 3 && fabs(frac[0] - 1.0 / 9) < 1e-12);
    CHECK(frac[1] == 1.0);
    n = spec_tune_rungs(10, 3, 0, keep, frac);
    CHECK(n == 3 && keep[0] == 10 && keep[1] == 4 && keep[2] == 2);
    CHECK(fabs(frac[0] - 1.0 / 27) < 1e-12 && fabs(frac[1] - 1.0 / 9) < 1e-12 && frac[2] == 1);
    /* tune.first_rung moves the first rung, the others follow by eta */
    n = spec_tune_rungs(10, 3, 0.05, keep, frac);
    CHECK(n == 3 && frac[0] == 0.05 && fabs(frac[1] - 0.15) < 1e-12 && frac[2] == 1);
    CHECK(fabs(spec_tune_budgets(6, 3, 1.0 / 3) - (6.0 / 3 + 2 * 2.0 / 3)) < 1e-12);
    /* 2 or 3 candidates: one rung, every candidate at the full budget */
    CHECK(spec_tune_rungs(3, 3, 0, keep, frac) == 1 && frac[0] == 1.0);
    CHECK(spec_tune_budgets(3, 3, 0) == 3.0);
    /* successive halving never spends more than every candidate at the full budget, and its
     * rungs rise to the full budget */
    for (int c = 2; c <= SPEC_TUNE_MAX_CANDIDATES; c++)
        for (int e = 2; e <= 16; e++) {
            CHECK(spec_tune_budgets(c, e, 0) <= c + 1e-9);
            n = spec_tune_rungs(c, e, 0, keep, frac);
            CHECK(frac[n - 1] == 1.0);
            for (int r = 1; r < n; r++)
                CHECK(frac[r] > frac[r - 1] && keep[r] < keep[r - 1]);
        }
}

/* The choice: the lowest metric, a tie to the lower candidate, +inf (diverged) last. */
TEST(best) {
    double a[] = {2.5, 2.4, 2.4, 3.0};
    CHECK(spec_tune_best(a, 4) == 1);
    double b[] = {INFINITY, 2.9, INFINITY};
    CHECK(spec_tune_best(b, 3) == 1);
    double c[] = {INFINITY, INFINITY};
    CHECK(spec_tune_best(c, 2) == 0);
    double d[] = {1.0};
    CHECK(spec_tune_best(d, 1) == 0);
}

/* A rung's step: its fraction of the run's own step budget, rounded, at least 1; the last
 * rung (fraction 1) is the full budget (so is a time budget's unknown one). */
TEST(rung_steps) {
    CHECK(spec_tune_rung_step(30, 1.0 / 3) == 10 && spec_tune_rung_step(30, 1) == 30);
    CHECK(spec_tune_rung_step(200, 1.0 / 9) == 22 && spec_tune_rung_step(200, 1.0 / 3) == 67);
    CHECK(spec_tune_rung_step(200, 1) == 200);
    CHECK(spec_tune_rung_step(100, 0.5) == 50 && spec_tune_rung_step(2, 1.0 / 9) == 1);
    CHECK(spec_tune_rung_step(-1, 1.0 / 3) == -1 && spec_tune_rung_step(40, 1) == 40);
}

/* Promotion keeps the best `keep` alive candidates, ties to the lower index, +inf last. */
TEST(promote) {
    double m[] = {2.5, 2.4, 2.4, 3.0, INFINITY, 2.0};
    unsigned char alive[] = {1, 1, 1, 1, 1, 0}, got[6];
    CHECK(spec_tune_promote(m, alive, 6, 2, got) == 2);
    CHECK(!got[0] && got[1] && got[2] && !got[3] && !got[4] && !got[5]);
    CHECK(spec_tune_promote(m, alive, 6, 3, got) == 3 && got[0] && got[1] && got[2]);
    double inf[] = {INFINITY, INFINITY, INFINITY};
    unsigned char all[] = {1, 1, 1};
    CHECK(spec_tune_promote(inf, all, 3, 1, got) == 1 && got[0] && !got[1] && !got[2]);
    CHECK(spec_tune_promote(m, alive, 6, 9, got) == 5 && !got[5]);
}

/* The tune scheduler as the sweep drives it (schedule/tune.c): what a host hears. */
typedef struct {
    Scheduler *s;
    JournalTune rec[8];
    int n_rec;
    int stopped[32], stopped_rung[32], n_stopped;
    const JournalTune *journaled; /* a resumed sweep's records */
    int n_journaled;
} TuneHost;

static int th_tuned(void *ctx, const JournalTune *t) {
    TuneHost *h = ctx;
    if (h->n_rec < 8) h->rec[h->n_rec++] = *t;
    return 0;
}

static const JournalTune *th_journaled(void *ctx, int config, const char *name, int rung) {
    TuneHost *h = ctx;
    for (int i = 0; i < h->n_journaled; i++)
        if (h->journaled[i].config == config && !strcmp(h->journaled[i].name, name) &&
            h->journaled[i].decided == rung)
            return &h->journaled[i];
    return NULL;
}

static int th_stopped(void *ctx, int run, int rung, double loss) {
    TuneHost *h = ctx;
    (void)loss;
    if (h->n_stopped < 32) {
        h->stopped_rung[h->n_stopped] = rung;
        h->stopped[h->n_stopped++] = run;
    }
    return 0;
}

/* The record of configuration k deciding rung r, or NULL. */
static const JournalTune *find_rec(const TuneHost *h, int k, int r) {
    for (int i = 0; i < h->n_rec; i++)
        if (h->rec[i].config == k && h->rec[i].decided == r) return &h->rec[i];
    return NULL;
}

static Scheduler *tune_sched(TuneHost *h, const Plan *p, SchedRun *runs) {
    SchedConfig cfg = {"unused.h5", p, 0, 0, 0, NULL};
    SchedHost host = {h, NULL, NULL, NULL, NULL, NULL, NULL, th_tuned, th_journaled, th_stopped};
    char err[ABL_ERR_MAX] = "", journal[ABL_PATH_MAX] = "";
    Scheduler *s = sched_tune_open(&cfg, &host, journal, err);
    CHECK_MSG(s, "%s", err);
    if (s && sched_start(s, runs, p->n_runs) != 0) {
        sched_close(s);
        return NULL;
    }
    return s;
}

/* 4 candidates, eta 3: two rungs, 1/9 of the budget then the full one. Losses per candidate
 * at rung 0 make candidates 1 and 3 the best two (2 and 1 tie behind them; 1 wins the tie
 * over 2 only if it were needed); at the full budget candidate 3 wins. */
static double rung_loss(int cand, int seed_index, int rung) {
    static const double r0[4] = {3.0, 2.5, 2.6, 2.4}, r1[4] = {9, 2.2, 9, 2.1};
    return (rung ? r1[cand] : r0[cand]) + 0.01 * seed_index;
}

static const char HALVING[] = "data: {path: \"@DATA@\"}\n"
                              "base: {preset: micro, train: {steps: 30}}\n"
                              "variants:\n"
                              "  baseline: {}\n"
                              "  rope: {model.position: rope}\n"
                              "seeds: 1\n"
                              "tune: {knobs: {train.lr: [1.0e-3, 3.0e-3, 1.0e-2, 3.0e-2]}, "
                              "seeds: [1000, 1001]}\n";

/* Takes every run the scheduler hands out and ends it as the sweep would: a tuning run
 * stops at its rung (paused) or, at the last rung, ends done; a comparison run ends done.
 * Returns how many attempts were handed out; *order gets the runs in order. */
static double g_frac[64]; /* per attempt of the last drive(): its rung's fraction */

static int drive(TuneHost *h, const Plan *p, int stop_after, int *order) {
    int n = 0;
    for (int run; n < stop_after && (run = sched_take(h->s, 0)) >= 0; n++) {
        order[n] = run;
        int n_rungs = 0, rung = h->s->ops->rung(h->s, run, &n_rungs, &g_frac[n < 64 ? n : 63]);
        EndEvent e;
        memset(&e, 0, sizeof e);
        const PlannedRun *pr = &p->runs[run];
        if (rung < 0) {
            e.status = RUN_DONE;
            e.final_val_loss = 2.0;
            sched_ended(h->s, run, &e);
        } else if (rung < n_rungs - 1) {
            e.status = RUN_INTERRUPTED;
            e.final_val_loss = rung_loss(pr->tune_candidate, pr->seed == 1001, rung);
            h->s->ops->paused(h->s, run, &e);
        } else {
            e.status = RUN_DONE;
            e.final_val_loss = rung_loss(pr->tune_candidate, pr->seed == 1001, rung);
            sched_ended(h->s, run, &e);
        }
    }
    return n;
}

TEST(halving_schedule) {
    Spec s;
    Plan p;
    CHECK_MSG(load_plan(HALVING, &s, &p) == 0, "%s", g_err);
    if (p.n_runs != 18) {
        CHECK_MSG(0, "%d runs", p.n_runs);
        if (p.n_runs) done(&s, &p);
        return;
    }
    static SchedRun runs[18];
    for (int i = 0; i < 18; i++)
        runs[i] = (SchedRun){p.runs[i].id, p.runs[i].name, 1, 0, RUN_DONE, NAN, 0, 0, NAN};
    static TuneHost h;
    memset(&h, 0, sizeof h);
    h.s = tune_sched(&h, &p, runs);
    if (!h.s) {
        done(&s, &p);
        return;
    }
    int order[64];
    int n = drive(&h, &p, 64, order);
    /* 8 tuning runs to rung 0 per configuration, 4 on to the full budget, 1 comparison run */
    CHECK_MSG(n == 2 * (8 + 4 + 1), "%d attempts", n);
    CHECK_MSG(h.n_rec == 4, "%d records", h.n_rec);
    for (int k = 0; k < 2; k++) {
        const JournalTune *r0 = find_rec(&h, k, 0), *r1 = find_rec(&h, k, 1);
        CHECK(r0 && r1);
        if (!r0 || !r1) continue;
        CHECK(r0->config == k && r0->decided == 0 && r0->chosen == -1 && r0->n_rungs == 2);
        CHECK(fabs(r0->frac[0] - 1.0 / 9) < 1e-12);
        /* rung 0: 3 and 1 (2.4, 2.5) go on; 2 (2.6) and 0 stop */
        CHECK(r0->rung[0] == 0 && r0->rung[1] == 1 && r0->rung[2] == 0 && r0->rung[3] == 1);
        CHECK(fabs(r0->at[2][0] - 2.605) < 1e-12 && isnan(r0->at[2][1]));
        CHECK(r1->decided == 1 && r1->chosen == 3 && fabs(r1->metric[3] - 2.105) < 1e-12);
        CHECK(r1->rung[0] == 0 && r1->rung[3] == 1 && fabs(r1->at[3][0] - 2.405) < 1e-12);
        CHECK(fabs(r1->metric[2] - 2.605) < 1e-12); /* a stopped one's: at its last rung */
    }
    /* the runs of candidates 0 and 2 stopped at rung 0, each once */
    CHECK_MSG(h.n_stopped == 8, "%d stopped", h.n_stopped);
    for (int i = 0; i < h.n_stopped; i++) {
        int c = p.runs[h.stopped[i]].tune_candidate;
        CHECK((c == 0 || c == 2) && h.stopped_rung[i] == 0);
    }
    /* a comparison run is handed out only after its configuration's choice */
    for (int i = 0; i < n; i++)
        if (p.runs[order[i]].tune_candidate < 0) {
            int k = p.runs[order[i]].config, promoted_after = 0;
            for (int j = i + 1; j < n; j++)
                promoted_after +=
                    p.runs[order[j]].config == k && p.runs[order[j]].tune_candidate >= 0;
            CHECK(promoted_after == 0);
        }
    CHECK(!sched_more(h.s));
    sched_close(h.s);

    /* the first rung is at 1/9 of the budget: 30 steps -> 3 */
    for (int i = 0; i < n; i++) {
        int rung0 = p.runs[order[i]].tune_candidate >= 0 && i < 16;
        CHECK_MSG(fabs(g_frac[i] - (rung0 ? 1.0 / 9 : 1.0)) < 1e-12, "attempt %d: %g", i,
                  g_frac[i]);
    }

    /* resumed after baseline's rung 0 was decided (and its stopped runs ended) while its
     * promoted runs trained on, and rope's rung-0 runs were stopped at the rung: the journal's
     * record stands for the runs that trained on, and the same choices come. The record
     * says rung 0 was at 1/3 of the budget (an older binary's rungs): the resumed sweep
     * keeps them, so rope's candidates are judged where baseline's were. */
    static JournalTune journaled[1];
    if (find_rec(&h, 0, 0)) journaled[0] = *find_rec(&h, 0, 0);
    journaled[0].frac[0] = 1.0 / 3;
    static TuneHost g;
    memset(&g, 0, sizeof g);
    g.journaled = journaled;
    g.n_journaled = 1;
    for (int i = 0; i < 18; i++) {
        int c = p.runs[i].tune_candidate;
        if (p.runs[i].config == 0 && (c == 0 || c == 2)) { /* stopped at rung 0 before */
            runs[i].finished = 1;
            runs[i].final_val_loss = rung_loss(c, p.runs[i].seed == 1001, 0);
        }
    }
    g.s = tune_sched(&g, &p, runs);
    if (!g.s) {
        done(&s, &p);
        return;
    }
    n = drive(&g, &p, 64, order);
    CHECK_MSG(n == 4 + 1 + 8 + 4 + 1, "%d attempts after the resume", n);
    CHECK_MSG(g.n_rec == 4 && g.n_stopped == 4, "%d records, %d stopped", g.n_rec, g.n_stopped);
    for (int i = 0; i < 4; i++) { /* baseline's rung 0 is the journaled one, replayed */
        const JournalTune *a = find_rec(&h, i / 2, i % 2), *b = find_rec(&g, i / 2, i % 2);
        static JournalTune same_rungs;
        if (a) same_rungs = *a;
        same_rungs.frac[0] = 1.0 / 3;
        CHECK_MSG(a && b && journal_tune_same(&same_rungs, b), "record %d differs", i);
    }
    for (int i = 0; i < n; i++)
        if (p.runs[order[i]].config == 1 && p.runs[order[i]].tune_candidate >= 0 && i < 13)
            CHECK_MSG(fabs(g_frac[i] - 1.0 / 3) < 1e-12, "resumed attempt %d: %g", i, g_frac[i]);
    CHECK(!sched_more(g.s));
    sched_close(g.s);

    /* candidate 3 (the best at rung 0 otherwise) diverges before rung 0 in one seed: its
     * mean is +inf, candidates 1 and 2 go on; its runs are no stopped ones (the diverged one
     * ended, and the other's pause is ended by the host) */
    for (int i = 0; i < 18; i++) {
        runs[i].finished = 0;
        runs[i].final_val_loss = NAN;
    }
    static TuneHost e;
    memset(&e, 0, sizeof e);
    e.s = tune_sched(&e, &p, runs);
    if (!e.s) {
        done(&s, &p);
        return;
    }
    int diverged = -1;
    for (int run; (run = sched_take(e.s, 0)) >= 0;) {
        double frac;
        int n_rungs = 0, rung = e.s->ops->rung(e.s, run, &n_rungs, &frac);
        const PlannedRun *pr = &p.runs[run];
        EndEvent end;
        memset(&end, 0, sizeof end);
        end.final_val_loss = rung < 0 ? 2.0 : rung_loss(pr->tune_candidate, pr->seed == 1001, rung);
        if (pr->tune_candidate == 3 && pr->seed == 1000 && pr->config == 0) {
            end.status = RUN_DIVERGED;
            end.final_val_loss = NAN;
            diverged = run;
            sched_ended(e.s, run, &end);
        } else if (rung >= 0 && rung < n_rungs - 1) {
            end.status = RUN_INTERRUPTED;
            e.s->ops->paused(e.s, run, &end);
        } else {
            end.status = RUN_DONE;
            sched_ended(e.s, run, &end);
        }
    }
    const JournalTune *d0 = find_rec(&e, 0, 0), *d1 = find_rec(&e, 0, 1);
    CHECK(d0 && d1 && diverged >= 0);
    if (d0 && d1) {
        CHECK(d0->at[3][0] == INFINITY && d0->rung[1] == 1 && d0->rung[2] == 1 &&
              d0->rung[3] == 0 && d0->rung[0] == 0);
        CHECK(d1->chosen == 1); /* 2.2 against candidate 2's 9 */
    }
    int stopped_div = 0, stopped_c3 = 0;
    for (int i = 0; i < e.n_stopped; i++) {
        stopped_div += e.stopped[i] == diverged;
        stopped_c3 += p.runs[e.stopped[i]].config == 0 && p.runs[e.stopped[i]].tune_candidate == 3;
    }
    CHECK(stopped_div == 0 && stopped_c3 == 1);
    sched_close(e.s);
    done(&s, &p);
}

/* A TUNE record reads back as written, and a changed result or choice is not the same. */
TEST(tune_record) {
    static JournalTune t, back, other;
    memset(&t, 0, sizeof t);
    t.config = 3;
    snprintf(t.name, sizeof t.name, "rope/n_head=2");
    t.n_knobs = 2;
    snprintf(t.knob[0], sizeof t.knob[0], "train.lr");
    snprintf(t.knob[1], sizeof t.knob[1], "train.warmup_steps");
    t.n_rungs = 2;
    t.frac[0] = 1.0 / 3, t.frac[1] = 1;
    t.n_cand = 3;
    for (int c = 0; c < 3; c++) {
        snprintf(t.value[c][0], sizeof t.value[c][0], "%de-3", c + 1);
        snprintf(t.value[c][1], sizeof t.value[c][1], "%d", 10 * c);
        t.seeds[c] = 2;
        t.rung[c] = c == 1;
        t.metric[c] = c == 2 ? INFINITY : 2.5 - 0.1 * c;
    }
    t.chosen = 1;
    t.decided = 1;
    for (int c = 0; c < 3; c++)
        for (int r = 0; r < SPEC_TUNE_MAX_RUNGS; r++)
            t.at[c][r] = r > t.rung[c] ? NAN : r == t.rung[c] ? t.metric[c] : 3.0 + c;
    char path[1024], err[ABL_ERR_MAX];
    test_path(path, sizeof path, "tune.journal");
    unlink(path);
    Journal *j = journal_create(path, err);
    CHECK_MSG(j, "%s", err);
    if (!j) return;
    CHECK(journal_append_tune(j, &t) == 0);
    CHECK(journal_close(j) == 0);
    JournalReader *r = journal_reader_open(path, err);
    CHECK_MSG(r, "%s", err);
    if (!r) return;
    JournalRecord rec;
    int found = 0;
    while (journal_reader_next(r, &rec) == 1)
        if (rec.type == JREC_TUNE) {
            found++;
            CHECK(journal_decode_tune(&rec, &back) == 0);
        }
    journal_reader_close(r);
    CHECK(found == 1);
    CHECK(journal_tune_same(&t, &back));
    CHECK(!strcmp(back.value[2][1], "20") && back.metric[2] == INFINITY && back.rung[1] == 1);
    other = back;
    other.metric[0] = nextafter(other.metric[0], 0);
    CHECK(!journal_tune_same(&t, &other));
    other = back;
    other.chosen = 0;
    CHECK(!journal_tune_same(&t, &other));
    /* the rung results read back, and a changed one is not the same */
    CHECK(back.decided == 1 && back.at[1][0] == 4.0 && isnan(back.at[0][1]));
    other = back;
    other.at[1][0] = 4.5;
    CHECK(!journal_tune_same(&t, &other));
}

/* A TUNE record written before successive halving (no rung results after the choice) still
 * reads: one rung, decided, each candidate's metric its result there; a record deciding a
 * rung before the last has no choice, and one claiming a choice there is refused. */
TEST(tune_record_old_format) {
    Buf b = {0};
    le_buf_u32(&b, 1); /* config */
    le_buf_str(&b, "rope", 4);
    le_buf_u32(&b, 1);
    le_buf_str(&b, "train.lr", 8);
    le_buf_u32(&b, 1); /* one rung, the full budget */
    uint8_t f[8];
    le_put_f64(f, 1.0);
    buf_add(&b, f, 8);
    le_buf_u32(&b, 2);
    for (int c = 0; c < 2; c++) {
        le_buf_str(&b, c ? "3.0e-2" : "1.0e-2", 6);
        le_buf_u32(&b, 1); /* seeds */
        le_buf_u32(&b, 0); /* rung */
        le_put_f64(f, 2.5 - 0.25 * c);
        buf_add(&b, f, 8);
    }
    le_buf_u32(&b, 1); /* chosen */
    CHECK(!b.oom);
    JournalRecord rec;
    memset(&rec, 0, sizeof rec);
    rec.type = JREC_TUNE;
    rec.payload = (const uint8_t *)b.p;
    rec.len = (uint32_t)b.len;
    static JournalTune t;
    CHECK(journal_decode_tune(&rec, &t) == 0);
    CHECK(t.decided == 0 && t.chosen == 1 && t.n_rungs == 1 && t.at[0][0] == 2.5);
    CHECK(t.at[1][0] == 2.25 && isnan(t.at[1][1]));
    /* the new form: two rungs, deciding rung 0, no choice yet */
    static JournalTune w, back;
    w = t;
    w.n_rungs = 2;
    w.frac[0] = 1.0 / 3, w.frac[1] = 1;
    w.decided = 0;
    w.chosen = -1;
    w.rung[1] = 1;
    char path[1024], err[ABL_ERR_MAX];
    test_path(path, sizeof path, "tune_rung.journal");
    unlink(path);
    Journal *j = journal_create(path, err);
    CHECK_MSG(j, "%s", err);
    if (j) {
        CHECK(journal_append_tune(j, &w) == 0);
        w.chosen = 0; /* a choice at a rung before the last: malformed */
        CHECK(journal_append_tune(j, &w) == 0);
        CHECK(journal_close(j) == 0);
        JournalReader *r = journal_reader_open(path, err);
        int n = 0, ok = 0;
        while (r && journal_reader_next(r, &rec) == 1)
            if (rec.type == JREC_TUNE) ok += (n++ == 0) == (journal_decode_tune(&rec, &back) == 0);
        if (r) journal_reader_close(r);
        CHECK_MSG(n == 2 && ok == 2, "%d records, %d as expected", n, ok);
    }
    free(b.p);
}

int main(int argc, char **argv) {
    const char *tmp = test_tmpdir();
    if (!tmp) return 1;
    snprintf(g_data, sizeof g_data, "%s/small.txt", tmp);
    if (test_write_corpus(g_data, 4000) != 0) return 1;
    return test_main(argc, argv, "test_tune");
}
