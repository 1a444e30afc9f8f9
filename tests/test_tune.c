/* The tune: section (plan/spec_tune.h): its parsing and errors, the tuning runs the planner
 * adds to each configuration, the comparison runs' "tuned" ids, and the successive-halving
 * arithmetic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orchestrator/plan/plan.h"
#include "orchestrator/plan/run_id.h"
#include "orchestrator/plan/spec.h"
#include "orchestrator/plan/spec_tune.h"
#include "orchestrator/record/journal_tune.h"
#include "test_util.h"

static char g_data[1024];
static char g_err[ABL_ERR_MAX];

/* text with "@DATA@" replaced by the corpus path (static buffer). */
static const char *with_data(const char *text) {
    static char out[8192];
    size_t o = 0;
    for (const char *p = text; *p && o + 1100 < sizeof out;) {
        if (!strncmp(p, "@DATA@", 6)) {
            o += (size_t)snprintf(out + o, sizeof out - o, "%s", g_data);
            p += 6;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    return out;
}

static int load_plan(const char *text, Spec *s, Plan *p) {
    memset(p, 0, sizeof *p);
    if (spec_load_string(s, "t.yaml", with_data(text), NULL, 0, g_err) != 0) return -1;
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
    REFUSED("data: {path: \"@DATA@\"}\nvariants: {baseline: {}, b: {model.n_head: 2}}\n"
            "replicate: {seeds: {min: 2, max: 4}, resolve: 0.01}\n"
            "tune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}, seeds: [9]}\n",
            "t.yaml:4:1: ", "not supported yet");
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
    /* 6 candidates, eta 3: 6 at 1/3 of the budget, the best 2 at the full budget */
    int n = spec_tune_rungs(6, 3, keep, frac);
    CHECK(n == 2 && keep[0] == 6 && keep[1] == 2);
    CHECK(fabs(frac[0] - 1.0 / 3) < 1e-12 && frac[1] == 1.0);
    CHECK(fabs(spec_tune_budgets(6, 3) - (6.0 / 3 + 2 * 2.0 / 3)) < 1e-12);
    /* 9 candidates: 9 at 1/3 of the budget, the best 3 at the full budget */
    n = spec_tune_rungs(9, 3, keep, frac);
    CHECK(n == 2 && keep[0] == 9 && keep[1] == 3 && frac[1] == 1.0);
    n = spec_tune_rungs(10, 3, keep, frac);
    CHECK(n == 3 && keep[0] == 10 && keep[1] == 4 && keep[2] == 2);
    CHECK(fabs(frac[0] - 1.0 / 9) < 1e-12);
    /* 2 or 3 candidates: one rung, every candidate at the full budget */
    CHECK(spec_tune_rungs(3, 3, keep, frac) == 1 && frac[0] == 1.0);
    CHECK(spec_tune_budgets(3, 3) == 3.0);
    /* successive halving never spends more than every candidate at the full budget */
    for (int c = 2; c <= SPEC_TUNE_MAX_CANDIDATES; c++)
        for (int e = 2; e <= 16; e++)
            CHECK(spec_tune_budgets(c, e) <= c + 1e-9);
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
}

int main(int argc, char **argv) {
    const char *tmp = test_tmpdir();
    if (!tmp) return 1;
    snprintf(g_data, sizeof g_data, "%s/small.txt", tmp);
    if (test_write_corpus(g_data, 4000) != 0) return 1;
    return test_main(argc, argv, "test_tune");
}
