/* The spec language and the planner: expansion counts and order, names, ids, ${VAR}, --set,
 * and every error pointing at FILE:LINE:COL. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/plan/contrast.h"
#include "orchestrator/plan/id_index.h"
#include "orchestrator/plan/plan.h"
#include "orchestrator/plan/plan_cost.h"
#include "orchestrator/plan/run_id.h"
#include "orchestrator/record/resume.h"
#include "orchestrator/plan/spec.h"
#include "util/clock.h"
#include "test_util.h"

static char g_data[1024]; /* a small generated corpus */
static const char *g_tmp;
static char g_err[ABL_ERR_MAX];

static int g_cost; /* load_plan also costs the plan (reading the data, as `ablate plan`) */

/* Loads text as "t.yaml" and plans it; 0 on success (g_err holds the error otherwise). */
static int load_plan(const char *text, const char *const *sets, int n_sets, Spec *s, Plan *p) {
    memset(p, 0, sizeof *p);
    if (spec_load_string(s, "t.yaml", test_with_data(text, g_data), sets, n_sets, g_err) != 0)
        return -1;
    PlanCost *cost = NULL;
    if (plan_build(s, p, g_err) != 0 || (g_cost && !(cost = plan_cost_compute(p, g_err)))) {
        plan_free(p);
        spec_free(s);
        return -1;
    }
    free(cost);
    return 0;
}

static void done(Spec *s, Plan *p) {
    plan_free(p);
    spec_free(s);
}

/* The spec must fail (at load or plan time) with an error starting with prefix and
 * containing every word (NULL-terminated), on one line. */
static void expect_error(int line, const char *text, const char *const *sets, int n_sets,
                         const char *prefix, ...) {
    Spec s;
    Plan p;
    if (load_plan(text, sets, n_sets, &s, &p) == 0) {
        fprintf(stderr, "test_spec.c:%d: expected an error, got %d runs\n", line, p.n_runs);
        test_failures++;
        done(&s, &p);
        return;
    }
    if (getenv("TEST_SPEC_VERBOSE")) fprintf(stderr, "  [%d] %s\n", line, g_err);
    int ok = strncmp(g_err, prefix, strlen(prefix)) == 0 && !strchr(g_err, '\n');
    va_list ap;
    va_start(ap, prefix);
    for (const char *w; (w = va_arg(ap, const char *));)
        if (!strstr(g_err, w)) ok = 0;
    va_end(ap);
    if (!ok) {
        fprintf(stderr, "test_spec.c:%d: unexpected error text (want prefix '%s'):\n  %s\n", line,
                prefix, g_err);
        test_failures++;
    }
}
#define EXPECT_ERROR(text, sets, n_sets, prefix, ...)                                              \
    expect_error(__LINE__, text, sets, n_sets, prefix, __VA_ARGS__, (const char *)NULL)

TEST(grid_counts) {
    const char *y = "data: {path: \"@DATA@\"}\n"
                    "grid:\n"
                    "  model.n_head: [1, 4, 8]\n"
                    "  model.activation: [gelu, relu]\n"
                    "seeds: 3\n";
    Spec s;
    Plan p;
    CHECK_MSG(load_plan(y, NULL, 0, &s, &p) == 0, "%s", g_err);
    CHECK(s.n_axes == 2 && s.n_seeds == 3 && s.n_variants == 0);
    CHECK(p.n_runs == 18 && p.n_excluded == 0);
    if (p.n_runs == 18) {
        CHECK(!strcmp(p.runs[0].name, "n_head=1/activation=gelu/seed0"));
        CHECK(!strcmp(p.runs[1].name, "n_head=1/activation=gelu/seed1"));
        CHECK(!strcmp(p.runs[3].name, "n_head=1/activation=relu/seed0"));
        CHECK(!strcmp(p.runs[6].name, "n_head=4/activation=gelu/seed0"));
        CHECK(!strcmp(p.runs[17].name, "n_head=8/activation=relu/seed2"));
        CHECK(p.runs[6].cfg.model.n_head == 4 && p.runs[6].cfg.model.activation == ACT_GELU);
        CHECK(p.runs[17].cfg.model.n_head == 8 && p.runs[17].cfg.model.activation == ACT_RELU);
        CHECK(p.runs[17].seed == 2 && p.runs[17].index == 17);
        CHECK(p.runs[6].point[0] == 1 && p.runs[6].point[1] == 0 && p.runs[6].variant == -1);
        CHECK(!strcmp(p.runs[6].overrides, "model.n_head=4 model.activation=gelu"));
        CHECK(!strcmp(p.runs[0].cfg.data.path, g_data));
        for (int i = 0; i < p.n_runs; i++)
            CHECK(plan_find_id(&p, p.runs[i].id) == i);
        CHECK(plan_find_id(&p, "0000000000000000") == -1);
    }
    done(&s, &p);

    /* exclude drops n_head=8 with relu: 3 seeds of one grid point */
    const char *x = "data: {path: \"@DATA@\"}\n"
                    "grid:\n"
                    "  model.n_head: [1, 4, 8]\n"
                    "  model.activation: [gelu, relu]\n"
                    "  exclude:\n"
                    "    - {model.n_head: 8, model.activation: relu}\n"
                    "    - {base.model.n_head: 1, model.activation: gelu}\n"
                    "seeds: 3\n";
    CHECK_MSG(load_plan(x, NULL, 0, &s, &p) == 0, "%s", g_err);
    CHECK(p.n_runs == 12 && p.n_excluded == 2 && s.n_excludes == 2);
    for (int i = 0; i < p.n_runs; i++) {
        const ModelConfig *m = &p.runs[i].cfg.model;
        CHECK(!(m->n_head == 8 && m->activation == ACT_RELU));
        CHECK(!(m->n_head == 1 && m->activation == ACT_GELU));
    }
    if (p.n_runs == 12) {
        CHECK(!strcmp(p.runs[0].name, "n_head=1/activation=relu/seed0"));
        CHECK(!strcmp(p.runs[9].name, "n_head=8/activation=gelu/seed0"));
    }
    done(&s, &p);

    /* no grid, no variants: one baseline run per seed */
    CHECK_MSG(load_plan("data: {path: \"@DATA@\"}\n", NULL, 0, &s, &p) == 0, "%s", g_err);
    CHECK(p.n_runs == 1 && !strcmp(p.runs[0].name, "baseline/seed0") &&
          !strcmp(p.runs[0].overrides, "") && p.runs[0].point == NULL);
    done(&s, &p);
}

TEST(zip_and_variants) {
    const char *z = "data: {path: \"@DATA@\"}\n"
                    "grid:\n"
                    "  model.activation: [gelu, relu]\n"
                    "  zip:\n"
                    "    - {model.d_model: [32, 64, 96], model.n_head: [2, 4, 6]}\n";
    Spec s;
    Plan p;
    CHECK_MSG(load_plan(z, NULL, 0, &s, &p) == 0, "%s", g_err);
    CHECK(s.n_axes == 2 && s.axes[1].zip && s.axes[1].n_keys == 2 && s.axes[1].n_points == 3);
    CHECK(p.n_runs == 6);
    for (int i = 0; i < p.n_runs; i++)
        CHECK(p.runs[i].cfg.model.d_model == 16 * p.runs[i].cfg.model.n_head);
    if (p.n_runs == 6) {
        CHECK(!strcmp(p.runs[0].name, "activation=gelu/d_model=32/n_head=2/seed0"));
        CHECK(!strcmp(p.runs[4].name, "activation=relu/d_model=64/n_head=4/seed0"));
    }
    done(&s, &p);

    /* variants (baseline first regardless of file order) x grid x a seed list */
    const char *v = "data: {path: \"@DATA@\"}\n"
                    "grid:\n"
                    "  model.n_head: [2, 4]\n"
                    "variants:\n"
                    "  ctx32: {model.context: 32}\n"
                    "  post: {base.model.norm: post, train.lr: 3e-3}\n"
                    "  baseline: {}\n"
                    "seeds: [1, 7]\n";
    CHECK_MSG(load_plan(v, NULL, 0, &s, &p) == 0, "%s", g_err);
    CHECK(s.n_variants == 3 && !strcmp(s.variants[0].name, "baseline"));
    CHECK(p.n_runs == 12);
    if (p.n_runs == 12) {
        CHECK(!strcmp(p.runs[0].name, "baseline/n_head=2/seed1"));
        CHECK(!strcmp(p.runs[1].name, "baseline/n_head=2/seed7") && p.runs[1].seed == 7);
        CHECK(!strcmp(p.runs[4].name, "ctx32/n_head=2/seed1"));
        CHECK(p.runs[4].cfg.model.context == 32 && p.runs[0].cfg.model.context == 16);
        CHECK(!strcmp(p.runs[4].overrides, "model.context=32 model.n_head=2"));
        CHECK(!strcmp(p.runs[11].name, "post/n_head=4/seed7"));
        CHECK(p.runs[11].cfg.model.norm == NORM_POST && p.runs[11].cfg.train.lr == 3e-3);
        CHECK(!strcmp(p.runs[11].overrides, "model.norm=post train.lr=0.003 model.n_head=4"));
        CHECK(p.runs[0].variant == 0 && p.runs[11].variant == 2);
    }
    done(&s, &p);

    /* variants without a baseline run only the named ones */
    const char *nb = "data: {path: \"@DATA@\"}\n"
                     "variants:\n"
                     "  gqa: {model.n_kv_head: 2}\n";
    CHECK_MSG(load_plan(nb, NULL, 0, &s, &p) == 0, "%s", g_err);
    CHECK(p.n_runs == 1 && !strcmp(p.runs[0].name, "gqa/seed0"));
    done(&s, &p);
}

TEST(base_sections) {
    const char *y = "description: base sections\n"
                    "data: {path: \"@DATA@\", tokenizer: byte, val_fraction: 0.2}\n"
                    "base:\n"
                    "  preset: book\n"
                    "  model: {n_head: 8, activation: relu, vocab_size: 0}\n"
                    "  train: {lr: 1e-3, batch_size: 4, tokens: 100000, schedule: linear}\n"
                    "  stats: {every: 7}\n"
                    "  sample: {prompt: \"ROMEO:\", tokens: 11}\n"
                    "  save_weights: true\n"
                    "  train.warmup_steps: 3\n";
    Spec s;
    Plan p;
    CHECK_MSG(load_plan(y, NULL, 0, &s, &p) == 0, "%s", g_err);
    if (p.n_runs == 1) {
        const RunConfig *c = &p.runs[0].cfg;
        CHECK(c->model.d_model == 128 && c->model.norm_type == NORMTYPE_LAYER); /* book */
        CHECK(c->model.n_head == 8 && c->model.activation == ACT_RELU);
        CHECK(c->train.lr == 1e-3 && c->train.batch_size == 4 && c->train.schedule == SCHED_LINEAR);
        CHECK(c->train.tokens == 100000 && c->train.steps == 0); /* budget switched */
        CHECK(c->train.warmup_steps == 3 && c->stats.every == 7 && c->save_weights == 1);
        CHECK(!strcmp(c->sample.prompt, "ROMEO:") && c->sample.tokens == 11);
        CHECK(c->data.tokenizer == TOK_BYTE && c->data.val_fraction == 0.2);
        CHECK(!strcmp(s.preset, "book") && s.preset_mark.line == 4 && s.preset_mark.col == 11);
        CHECK(s.description && !strcmp(s.description, "base sections"));
        CHECK(!strncmp(s.text, "description:", 12) && s.text_len == strlen(s.text));
        const Knob *k = knob_find("model.n_head");
        CHECK(s.base_src[k - knob_table].line == 5 && s.base_src[k - knob_table].col == 19);
        k = knob_find("model.d_model");
        CHECK(s.base_src[k - knob_table].line == 4); /* from the preset */
    }
    done(&s, &p);
}

/* FNV-1a 64 over "name=value\n" for every knob, then "seed=N\n" (docs/spec.md). */
/* Id scheme 2 (run_id.h): only the knobs that differ from their defaults, then the seed. */
static void reference_id(const RunConfig *c, uint64_t seed, char id[17]) {
    uint64_t h = 0xcbf29ce484222325ULL;
    char line[2048];
    RunConfig def;
    run_config_default(&def);
    for (int i = 0; i <= knob_count; i++) {
        if (i < knob_count) {
            if (knob_equal(c, &def, &knob_table[i])) continue;
            char val[1100];
            knob_format(c, &knob_table[i], val, sizeof val);
            snprintf(line, sizeof line, "%s=%s\n", knob_table[i].name, val);
        } else {
            snprintf(line, sizeof line, "seed=%llu\n", (unsigned long long)seed);
        }
        for (const char *q = line; *q; q++)
            h = (h ^ (unsigned char)*q) * 0x100000001b3ULL;
    }
    snprintf(id, 17, "%016llx", (unsigned long long)h);
}

TEST(ids) {
    /* the same config written three ways gives the same id */
    const char *a = "data: {path: \"@DATA@\"}\n"
                    "base:\n"
                    "  model: {n_head: 2}\n"
                    "  train: {lr: 1e-2, steps: 1000}\n"
                    "seeds: [5]\n";
    const char *b = "data: {path: \"@DATA@\"}\n"
                    "grid:\n"
                    "  model.n_head: [2, 8]\n"
                    "  train.lr: [0.01]\n"
                    "seeds: [5, 6]\n";
    const char *sets[] = {"model.n_head=2", "base.train.lr=0.0100"};
    Spec s1, s2, s3;
    Plan p1, p2, p3;
    CHECK_MSG(load_plan(a, NULL, 0, &s1, &p1) == 0, "%s", g_err);
    CHECK_MSG(load_plan(b, NULL, 0, &s2, &p2) == 0, "%s", g_err);
    CHECK_MSG(load_plan("data: {path: \"@DATA@\"}\nseeds: [5]\n", sets, 2, &s3, &p3) == 0, "%s",
              g_err);
    if (p1.n_runs == 1 && p2.n_runs == 4 && p3.n_runs == 1) {
        CHECK(strlen(p1.runs[0].id) == 16 && strspn(p1.runs[0].id, "0123456789abcdef") == 16);
        CHECK(!strcmp(p1.runs[0].id, p2.runs[0].id));
        CHECK(!strcmp(p1.runs[0].id, p3.runs[0].id));
        CHECK(strcmp(p2.runs[0].id, p2.runs[1].id) != 0); /* seed 5 vs 6 */
        CHECK(strcmp(p2.runs[0].id, p2.runs[2].id) != 0); /* n_head 2 vs 8 */
        CHECK(plan_find_id(&p2, p1.runs[0].id) == 0);
        char ref[17];
        reference_id(&p1.runs[0].cfg, 5, ref);
        CHECK_MSG(!strcmp(ref, p1.runs[0].id), "%s vs %s", ref, p1.runs[0].id);
        plan_run_id(&p2.runs[1].cfg, 6, ref);
        CHECK(!strcmp(ref, p2.runs[1].id));
    }
    done(&s1, &p1);
    done(&s2, &p2);
    done(&s3, &p3);
}

TEST(env_and_sets) {
    setenv("ABL_T_HEADS", "8", 1);
    setenv("ABL_T_EMPTY", "", 1);
    unsetenv("ABL_T_UNSET");
    const char *y = "data: {path: \"${ABL_T_DATA}\"}\n"
                    "base:\n"
                    "  model:\n"
                    "    n_head: \"${ABL_T_HEADS}\"\n"
                    "    n_layer: ${ABL_T_UNSET:-3}\n"
                    "  train: {batch_size: \"${ABL_T_EMPTY:-${ABL_T_HEADS}}\"}\n"
                    "  sample: {prompt: \"$${HOME} costs $5 ${ABL_T_UNSET:-}\"}\n";
    setenv("ABL_T_DATA", g_data, 1);
    Spec s;
    Plan p;
    CHECK_MSG(load_plan(y, NULL, 0, &s, &p) == 0, "%s", g_err);
    if (p.n_runs == 1) {
        const RunConfig *c = &p.runs[0].cfg;
        CHECK(c->model.n_head == 8 && c->model.n_layer == 3 && c->train.batch_size == 8);
        CHECK_MSG(!strcmp(c->sample.prompt, "${HOME} costs $5 "), "'%s'", c->sample.prompt);
        CHECK(!strcmp(c->data.path, g_data));
    }
    done(&s, &p);

    char msg[ABL_ERR_MAX];
    char *e = spec_expand("a${ABL_T_UNSET:-b${ABL_T_HEADS}c}d", msg);
    CHECK(e && !strcmp(e, "ab8cd"));
    free(e);
    CHECK(spec_expand("${ABL_T_HEADS", msg) == NULL);
    CHECK(spec_expand("${1X}", msg) == NULL);

    /* unset without a default: error at the scalar, naming the variable */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  train: {lr: \"${ABL_T_UNSET}\"}\n",
                 NULL, 0, "t.yaml:3:15: ", "ABL_T_UNSET", "not set");

    /* --set applies after the file */
    const char *sets[] = {"model.n_head=2", "base.train.lr=0.003", "sample.prompt=a=b"};
    const char *f = "data: {path: \"@DATA@\"}\n"
                    "base:\n"
                    "  model: {n_head: 8}\n";
    CHECK_MSG(load_plan(f, sets, 3, &s, &p) == 0, "%s", g_err);
    if (p.n_runs == 1) {
        CHECK(p.runs[0].cfg.model.n_head == 2 && p.runs[0].cfg.train.lr == 0.003);
        CHECK(!strcmp(p.runs[0].cfg.sample.prompt, "a=b"));
        CHECK(s.n_sets == 3 && !strcmp(s.sets[1], "base.train.lr=0.003"));
        const Knob *k = knob_find("model.n_head");
        CHECK(!strcmp(s.base_src[k - knob_table].file, "--set") &&
              s.base_src[k - knob_table].line == 1);
    }
    done(&s, &p);
    const char *bad1[] = {"model.n_head=2", "model.n_haed=4"};
    EXPECT_ERROR(f, bad1, 2, "--set:2:1: ", "unknown key 'model.n_haed'",
                 "did you mean 'model.n_head'?");
    const char *bad2[] = {"model.n_head=four"};
    EXPECT_ERROR(f, bad2, 1, "--set:1:14: ", "expected an integer for model.n_head, got 'four'");
    const char *bad3[] = {"model.n_head"};
    EXPECT_ERROR(f, bad3, 1, "--set:1:1: ", "key=value");
    const char *bad4[] = {"model.n_head=3"}; /* valid type, invalid run */
    EXPECT_ERROR(f, bad4, 1, "--set:1:14: ", "run 'baseline/seed0'", "must divide");
    const char *bad5[] = {"model.activation=gelu"};
    EXPECT_ERROR("data: {path: \"@DATA@\"}\ngrid:\n  model.activation: [relu, gelu]\n", bad5, 1,
                 "--set:1:1: ", "grid axis", "t.yaml:3:3");
}

/* A budget given with --set replaces the spec's budget, whatever its kind. */
TEST(set_budget) {
    const char *y = "data: {path: \"@DATA@\"}\nbase: {train: {steps: 300}}\n";
    const char *sets[] = {"train.tokens=20000"};
    Spec s;
    Plan p;
    CHECK_MSG(load_plan(y, sets, 1, &s, &p) == 0, "%s", g_err);
    if (p.n_runs == 1)
        CHECK(p.runs[0].cfg.train.tokens == 20000 && p.runs[0].cfg.train.steps == 0 &&
              p.runs[0].cfg.train.seconds == 0);
    done(&s, &p);
}

/* train.calibrate needs a time budget: the error names the file, line and key. */
TEST(calibrate_errors) {
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  train: {steps: 50, calibrate: 3}\n",
                 NULL, 0, "t.yaml:3:", "train.calibrate 3 needs a time budget", "train.seconds");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  train: {seconds: 5}\n"
                 "grid:\n"
                 "  train.calibrate: [2, -1]\n",
                 NULL, 0, "t.yaml:5:", "train.calibrate must be >= 0");
    /* a budget round(tokens/s x seconds / tokens a step) that cannot be
     * counted is refused here, not failed in the run (or trained by the clock) */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  train: {seconds: 1.0e+30, calibrate: 2}\n",
                 NULL, 0, "t.yaml:3:", "train.seconds 1e+30 with train.calibrate is more than");
    const char *y = "data: {path: \"@DATA@\"}\nbase: {train: {seconds: 5, calibrate: 2}}\n";
    Spec s;
    Plan p;
    CHECK_MSG(load_plan(y, NULL, 0, &s, &p) == 0, "%s", g_err);
    if (p.n_runs == 1)
        CHECK(p.runs[0].cfg.train.calibrate == 2 && p.runs[0].cfg.train.seconds == 5 &&
              p.runs[0].cfg.train.calibrated_steps == 0);
    done(&s, &p);
}

TEST(errors) {
    /* a spec that is not a mapping, an unknown top-level key: every top-level key named
     * (description and replicate were once missing from that list) */
    EXPECT_ERROR("- base: {}\n- seeds: [1]\n", NULL, 0, "t.yaml:1:1: ", "a spec is a mapping",
                 "data, base, grid, variants, seeds, description, replicate, contrasts, ladder and "
                 "tune; got a list");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\nzzzzqqq: 1\n", NULL, 0,
                 "t.yaml:2:1: ", "unknown key 'zzzzqqq'",
                 "seeds, description, replicate, contrasts, ladder or tune)");
    /* YAML syntax error with libyaml's mark */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  model: {n_head: 4\n"
                 "  train: {lr: 1}\n",
                 NULL, 0, "t.yaml:4:8: ", "YAML syntax error");
    EXPECT_ERROR("base:\n"
                 "  model:\n"
                 "    n_head: 4\n"
                 "   n_layer: 2\n",
                 NULL, 0, "t.yaml:4:4: ", "YAML syntax error");
    /* unknown keys, with suggestions */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  model:\n"
                 "    n_haed: 4\n",
                 NULL, 0,
                 "t.yaml:4:5: ", "unknown key 'model.n_haed' (did you mean 'model.n_head'?)");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  model.actvation: [relu]\n",
                 NULL, 0, "t.yaml:3:3: ", "unknown key 'model.actvation'",
                 "did you mean 'model.activation'?");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grdi:\n"
                 "  model.n_head: [1]\n",
                 NULL, 0, "t.yaml:2:1: ", "unknown key 'grdi' (did you mean 'grid'?)");
    EXPECT_ERROR("data: {pth: \"@DATA@\"}\n", NULL, 0,
                 "t.yaml:1:8: ", "unknown key 'data.pth' (did you mean 'data.path'?)");
    EXPECT_ERROR("base:\n  modle: {n_head: 4}\n", NULL, 0,
                 "t.yaml:2:3: ", "unknown key 'modle' (did you mean 'model'?)");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "variants:\n"
                 "  x: {model.n_heads: 2}\n",
                 NULL, 0, "t.yaml:3:7: ", "unknown key 'model.n_heads'", "model.n_head");
    /* wrong type */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  model: {n_head: four}\n",
                 NULL, 0, "t.yaml:3:19: ", "expected an integer for model.n_head, got 'four'");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  train.lr: [1e-2, fast]\n",
                 NULL, 0, "t.yaml:3:20: ", "expected a number for train.lr, got 'fast'");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  model: {n_head: [4]}\n",
                 NULL, 0, "t.yaml:3:19: ", "expected a single value for model.n_head");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  model.n_head: 4\n",
                 NULL, 0, "t.yaml:3:17: ", "expected a list of values", "model.n_head");
    /* invalid enum value lists the choices */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  model:\n"
                 "    activation: gelu3\n",
                 NULL, 0, "t.yaml:4:17: ", "invalid value 'gelu3' for model.activation",
                 "relu, gelu, gelu_tanh", "swiglu");
    /* unknown preset */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base: {preset: tiny}\n",
                 NULL, 0, "t.yaml:2:16: ", "unknown preset 'tiny'", "micro");
    /* n_head not dividing d_model in one grid run: the error names the run and the value */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  model.activation: [relu]\n"
                 "  model.n_head: [4, 3]\n"
                 "seeds: 2\n",
                 NULL, 0, "t.yaml:4:21: ", "run 'activation=relu/n_head=3/seed0'",
                 "model.n_head (3) must divide model.d_model (32)");
    /* a grid value that breaks a base which is fine on its own */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base: {model: {n_head: 3, d_model: 48}}\n"
                 "grid:\n"
                 "  model.d_model: [48, 96, 32]\n",
                 NULL, 0, "t.yaml:4:27: ", "run 'd_model=32/seed0'", "must divide");
    /* the base itself wrong: points at the base key */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  model: {d_model: 30}\n"
                 "grid:\n"
                 "  model.activation: [relu, gelu]\n",
                 NULL, 0, "t.yaml:3:20: ", "run 'activation=relu/seed0'", "must divide");
    /* n_kv_head not dividing n_head, from a variant entry */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "variants:\n"
                 "  baseline: {}\n"
                 "  gqa3: {model.n_kv_head: 3}\n",
                 NULL, 0, "t.yaml:4:27: ", "run 'gqa3/seed0'",
                 "model.n_kv_head (3) must divide model.n_head (4)");
    /* rope with an odd head dimension: d_model 48 / 16 heads = 3 */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  model: {d_model: 48, position: rope}\n"
                 "grid:\n"
                 "  model.n_head: [4, 16]\n",
                 NULL, 0, "t.yaml:5:21: ", "run 'n_head=16/seed0'", "rope", "even head dimension");
    /* two budgets in base: points at a line of the base */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  train:\n"
                 "    steps: 100\n"
                 "    tokens: 50000\n",
                 NULL, 0, "t.yaml:4:12: ", "train.steps", "train.tokens", "exactly one");
    /* ... and a variant adding a second budget points at the variant entry */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base: {train: {steps: 100}}\n"
                 "variants:\n"
                 "  baseline: {}\n"
                 "  tok: {train.tokens: 50000}\n",
                 NULL, 0, "t.yaml:5:23: ", "run 'tok/seed0'", "exactly one");
    /* missing data file */
    EXPECT_ERROR("data:\n"
                 "  path: /nonexistent/ablate/x.txt\n",
                 NULL, 0, "t.yaml:2:9: ", "/nonexistent/ablate/x.txt", "not readable");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  data.path: [\"@DATA@\", /nonexistent/y.txt]\n",
                 NULL, 0, "t.yaml:3:", "run 'path=_nonexistent_y.txt/seed0'", "not readable");
    EXPECT_ERROR("seeds: 1\n", NULL, 0, "t.yaml:1:1: ", "data.path is required");
    /* duplicate keys */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  model:\n"
                 "    n_head: 4\n"
                 "    n_head: 8\n",
                 NULL, 0, "t.yaml:5:5: ", "duplicate key 'n_head'");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  model: {n_head: 4}\n"
                 "  model.n_head: 8\n",
                 NULL, 0, "t.yaml:4:3: ", "model.n_head is set twice");
    /* a variant equal to the baseline: two runs with one id */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "variants:\n"
                 "  baseline: {}\n"
                 "  same: {model.n_head: 4}\n",
                 NULL, 0, "t.yaml:4:3: ", "'baseline/seed0'", "'same/seed0'", "same configuration");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  train.lr: [1e-2, 0.01]\n",
                 NULL, 0, "t.yaml:3:20: ", "'lr=1e-2/seed0'", "'lr=0.01/seed0'");
    /* structure errors */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  zip:\n"
                 "    - {model.d_model: [32, 64], model.n_head: [2, 4, 8]}\n",
                 NULL, 0, "t.yaml:4:47: ", "same length");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  model.n_head: [2, 4]\n"
                 "  zip:\n"
                 "    - {model.d_model: [32, 64], model.n_head: [2, 4]}\n",
                 NULL, 0, "t.yaml:5:33: ", "already a grid axis");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  model.n_head: [2, 4]\n"
                 "variants:\n"
                 "  h8: {model.n_head: 8}\n",
                 NULL, 0, "t.yaml:5:8: ", "grid axis");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "variants:\n"
                 "  baseline: {model.n_head: 2}\n",
                 NULL, 0, "t.yaml:3:14: ", "must be empty");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "seeds: [1, 2, 1]\n",
                 NULL, 0, "t.yaml:2:15: ", "duplicate seed 1");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\nseeds: 0\n", NULL, 0, "t.yaml:2:8: ", "seeds");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  model.n_head: [2]\n"
                 "  exclude:\n"
                 "    - {model.n_head: 2}\n",
                 NULL, 0, "t.yaml:5:7: ", "no runs");
    EXPECT_ERROR("", NULL, 0, "t.yaml:1:1: ", "empty");
    EXPECT_ERROR("- 1\n- 2\n", NULL, 0, "t.yaml:1:1: ", "mapping");
    EXPECT_ERROR("a: &x [1]\nb: *y\n", NULL, 0, "t.yaml:2:4: ", "unknown alias");

    /* a spec that is not there; a real file's errors carry its path */
    Spec s;
    char path[1100];
    CHECK(spec_load(&s, "/nonexistent/spec.yaml", NULL, 0, g_err) != 0);
    CHECK(strstr(g_err, "/nonexistent/spec.yaml") != NULL);
    snprintf(path, sizeof path, "%s/bad.yaml", g_tmp);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("base:\n  train: {lr: -1}\n", f);
        fclose(f);
    }
    CHECK(spec_load(&s, path, NULL, 0, g_err) == 0);
    Plan p;
    char want[1200];
    snprintf(want, sizeof want, "%s:2:15: ", path);
    CHECK_MSG(plan_build(&s, &p, g_err) != 0 && !strncmp(g_err, want, strlen(want)), "%s", g_err);
    spec_free(&s);
}

TEST(aliases) {
    const char *y = "data: {path: \"@DATA@\"}\n"
                    "grid:\n"
                    "  zip:\n"
                    "    - {model.n_head: &heads [2, 4], model.n_kv_head: *heads}\n";
    Spec s;
    Plan p;
    CHECK_MSG(load_plan(y, NULL, 0, &s, &p) == 0, "%s", g_err);
    CHECK(p.n_runs == 2);
    if (p.n_runs == 2) {
        CHECK(p.runs[1].cfg.model.n_head == 4 && p.runs[1].cfg.model.n_kv_head == 4);
        CHECK(!strcmp(p.runs[1].name, "n_head=4/n_kv_head=4/seed0"));
    }
    done(&s, &p);
}

TEST(fixture) {
    char path[1100];
    snprintf(path, sizeof path, "%s/example.yaml", ABLATE_SPECS_DIR);
    setenv("ABLATE_DATA", g_data, 1);
    Spec s;
    Plan p;
    memset(&p, 0, sizeof p);
    CHECK_MSG(spec_load(&s, path, NULL, 0, g_err) == 0, "%s", g_err);
    CHECK_MSG(plan_build(&s, &p, g_err) == 0, "%s", g_err);
    CHECK(p.n_runs == 40 && p.n_excluded == 4);
    if (p.n_runs == 40) {
        CHECK(!strcmp(p.runs[0].name,
                      "baseline/n_head=1/activation=gelu/d_model=32/mlp_ratio=4/seed1"));
        CHECK(
            !strcmp(p.runs[39].name, "post/n_head=8/activation=gelu/d_model=64/mlp_ratio=2/seed7"));
        CHECK(p.runs[39].cfg.model.norm == NORM_POST && p.runs[39].cfg.model.mlp_ratio == 2.0);
        CHECK(p.runs[0].cfg.train.steps == 50 && !strcmp(p.runs[0].cfg.sample.prompt, "ROMEO:"));
    }
    /* planning is deterministic */
    Plan q;
    CHECK(plan_build(&s, &q, g_err) == 0);
    for (int i = 0; i < p.n_runs && i < q.n_runs; i++)
        CHECK(!strcmp(p.runs[i].id, q.runs[i].id) && !strcmp(p.runs[i].name, q.runs[i].name));
    plan_free(&q);
    done(&s, &p);
    unsetenv("ABLATE_DATA");
}

/* Limits and inputs that used to be caught late or wrongly. */
TEST(bom) {
    /* a UTF-8 byte order mark is skipped (libyaml failed on the second line of a mapping
     * after it) and columns count from the first character after it */
    Spec s;
    Plan p;
    CHECK_MSG(load_plan("\xEF\xBB\xBF"
                        "description: with a BOM\n"
                        "data: {path: \"@DATA@\"}\n",
                        NULL, 0, &s, &p) == 0,
              "%s", g_err);
    if (p.n_runs) done(&s, &p);
    EXPECT_ERROR("\xEF\xBB\xBF"
                 "base: {model: {n_head: four}}\n"
                 "data: {path: \"@DATA@\"}\n",
                 NULL, 0, "t.yaml:1:24: ", "expected an integer for model.n_head");
}

TEST(data_file_kind) {
    /* a FIFO as data.path hung the planner (reading it blocks): refused where it is set */
    char fifo[1100], text[1400];
    snprintf(fifo, sizeof fifo, "%s/fifo", g_tmp);
    CHECK(mkfifo(fifo, 0600) == 0);
    snprintf(text, sizeof text, "data:\n  path: \"%s\"\n", fifo);
    EXPECT_ERROR(text, NULL, 0, "t.yaml:2:9: ", "not a regular file", fifo);
    snprintf(text, sizeof text,
             "data: {path: \"@DATA@\"}\ngrid:\n  data.path: [\"@DATA@\", \"%s\"]\n", fifo);
    EXPECT_ERROR(text, NULL, 0, "t.yaml:3:", "not a regular file");
    unlink(fifo);
}

TEST(budget_overflow) {
    /* steps x batch x context past int64 planned negative tokens and PFLOP: refused where
     * the budget is written */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  train: {steps: 9223372036854775807}\n",
                 NULL, 0, "t.yaml:3:18: ", "train.steps", "2^63-1");
    /* train.tokens at INT64_MAX rounded up to whole steps overflowed to 0 steps ("done") */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  train.tokens: [1000, 9223372036854775807]\n",
                 NULL, 0, "t.yaml:3:24: ", "train.tokens", "2^63-1");
    /* the rounding itself never overflows */
    RunConfig c;
    run_config_default(&c);
    c.train.steps = 0;
    c.train.tokens = LONG_MAX;
    c.train.batch_size = 2;
    c.model.context = 1;
    CHECK(run_config_total_steps(&c) == LONG_MAX / 2 + 1);
    c.train.tokens = 5;
    CHECK(run_config_total_steps(&c) == 3);
    c.train.tokens = 6;
    CHECK(run_config_total_steps(&c) == 3);
}

TEST(run_names) {
    /* names were cut at 255 bytes in the journal, so two runs could share one: a name past
     * PLAN_NAME_MAX is refused at the value that makes it long */
    char text[2048], a[300];
    memset(a, 'x', 250);
    a[250] = '\0';
    snprintf(text, sizeof text,
             "data: {path: \"@DATA@\"}\ngrid:\n  sample.prompt: [\"%s1\", \"%s2\"]\n", a, a);
    EXPECT_ERROR(text, NULL, 0, "t.yaml:3:19: ", "run name", "more than 255");
    /* names write '/' and spaces as '_': two values that differ only there collide */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  sample.prompt: [\"a/b\", \"a b\"]\n",
                 NULL, 0, "t.yaml:3:26: ", "two runs would be named 'prompt=a_b/seed0'");
    /* a name of exactly 255 bytes is fine */
    memset(a, 'y', 255 - strlen("prompt=/seed0"));
    a[255 - strlen("prompt=/seed0")] = '\0';
    snprintf(text, sizeof text, "data: {path: \"@DATA@\"}\ngrid:\n  sample.prompt: [\"%s\"]\n", a);
    Spec s;
    Plan p;
    CHECK_MSG(load_plan(text, NULL, 0, &s, &p) == 0, "%s", g_err);
    if (p.n_runs) {
        CHECK(strlen(p.runs[0].name) == 255);
        done(&s, &p);
    }
}

/* What needs the data is checked when the plan is costed (before
 * `ablate run` writes anything), each error at the spec entry responsible. */
TEST(plan_data) {
    g_cost = 1;
    /* a prompt character outside the corpus was silently dropped from the samples */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base: {sample: {prompt: \"the KING\"}}\n",
                 NULL, 0, "t.yaml:2:25: ", "sample.prompt", "'K'", "not in the corpus vocabulary");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  sample.prompt: [\"the king\", \"the king!\"]\n",
                 NULL, 0, "t.yaml:3:31: ", "run 'prompt=the_king!/seed0'", "'!'");
    /* ... but a prompt that is never used is no error */
    Spec s;
    Plan p;
    CHECK_MSG(load_plan("data: {path: \"@DATA@\"}\n"
                        "base: {sample: {prompt: \"KING\", tokens: 0}}\n",
                        NULL, 0, &s, &p) == 0,
              "%s", g_err);
    if (p.n_runs) done(&s, &p);
    /* model.vocab_size below the corpus's vocabulary failed only when the run started */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base: {model: {vocab_size: 8}}\n",
                 NULL, 0, "t.yaml:2:28: ", "model.vocab_size 8 is smaller than the vocabulary");
    /* data errors carry the line of data.path (or of the grid value that broke the data) */
    char empty[1100], text[2400];
    snprintf(empty, sizeof empty, "%s/empty.txt", g_tmp);
    fclose(fopen(empty, "w"));
    snprintf(text, sizeof text, "data:\n  path: \"%s\"\n", empty);
    EXPECT_ERROR(text, NULL, 0, "t.yaml:2:9: ", "the file is empty");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  model.context: [16, 4000]\n",
                 NULL, 0, "t.yaml:3:23: ", "run 'context=4000/seed0'", "too short");
    /* a .bin whose tokens exceed data.vocab_size: at data.vocab_size, even when
     * model.vocab_size is given (the data was then never read before training) */
    char bin[1100];
    snprintf(bin, sizeof bin, "%s/t.bin", g_tmp);
    FILE *f = fopen(bin, "wb");
    int32_t header[256] = {20240520, 1, 2000};
    fwrite(header, sizeof header, 1, f);
    for (int i = 0; i < 2000; i++) {
        uint16_t t = (uint16_t)(i * 7 % 1000);
        fwrite(&t, 2, 1, f);
    }
    fclose(f);
    snprintf(text, sizeof text,
             "data: {path: \"%s\", tokenizer: tokens, vocab_size: 500}\n"
             "base: {model: {vocab_size: 600}, sample: {prompt: \"1 2\"}}\n",
             bin);
    char at[32];
    snprintf(at, sizeof at, "t.yaml:1:%d: ", (int)(strstr(text, "500") - text) + 1);
    EXPECT_ERROR(text, NULL, 0, at, "out of range for vocab_size 500");
    g_cost = 0;
}

TEST(memory_limit) {
    g_cost = 1;
    /* a run needing terabytes passed plan and failed after the output was created */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base:\n"
                 "  train: {batch_size: 100000000}\n",
                 NULL, 0, "t.yaml:3:23: ", "needs about", "TiB of memory", "more than the limit");
    /* the limit is configurable and blames the grid value that makes a run too large */
    Spec s;
    Plan p;
    CHECK_MSG(load_plan("data: {path: \"@DATA@\"}\ngrid: {train.batch_size: [1, 64]}\n", NULL, 0,
                        &s, &p) == 0,
              "%s", g_err);
    PlanCost *c = p.n_runs == 2 ? plan_cost_compute(&p, g_err) : NULL;
    CHECK(c && c[1].c.memory > c[0].c.memory && c[0].c.memory > 4.0 * 4 * (double)c[0].c.params);
    if (c) {
        plan_cost_set_memory_limit((c[0].c.memory + c[1].c.memory) / 2);
        EXPECT_ERROR("data: {path: \"@DATA@\"}\ngrid: {train.batch_size: [1, 64]}\n", NULL, 0,
                     "t.yaml:2:30: ", "run 'batch_size=64/seed0'", "(--max-run-memory)");
        plan_cost_set_memory_limit(0);
    }
    free(c);
    if (p.n_runs) done(&s, &p);
    g_cost = 0;
}

/* Rank 0 keeps one config a run: the plan's. The cost of a run holds only the vocabulary it
 * resolves (a second resolved copy was 1.6 KB a run, 160 MB at 10^5 runs), and the config
 * the journal and the worker get is the plan's with that vocabulary. */
TEST(one_config_a_run) {
    g_cost = 0;
    CHECK(sizeof(PlanCost) * 8 < sizeof(RunConfig));
    Spec s;
    Plan p;
    CHECK_MSG(load_plan("data: {path: \"@DATA@\"}\ngrid: {model.n_head: [2, 4]}\n"
                        "variants: {baseline: {}, big: {model.vocab_size: 300}}\n",
                        NULL, 0, &s, &p) == 0,
              "%s", g_err);
    CHECK_MSG(p.n_runs == 4, "%d runs", p.n_runs);
    PlanCost *c = p.n_runs == 4 ? plan_cost_compute(&p, g_err) : NULL;
    CHECK_MSG(c || p.n_runs != 4, "%s", g_err);
    for (int i = 0; c && i < p.n_runs; i++) {
        RunConfig r, want = p.runs[i].cfg;
        plan_cost_config(&p, c, i, &r);
        int given = p.runs[i].cfg.model.vocab_size; /* the plan keeps what was specified */
        CHECK(given == (i < 2 ? 0 : 300));
        CHECK(r.model.vocab_size == (i < 2 ? c[i].vocab_size : 300) && r.model.vocab_size > 0);
        want.model.vocab_size = r.model.vocab_size;
        CHECK(!memcmp(&r, &want, sizeof r));
    }
    free(c);
    if (p.n_runs) done(&s, &p);
}

/* Resuming maps the journal's runs onto the new plan by id: linear, counted in id
 * comparisons rather than timed (a 100,000-run resume took 56 s against 6 s fresh). */
static long match_compares(int n) {
    char text[256];
    snprintf(text, sizeof text, "data: {path: \"@DATA@\"}\nseeds: %d\n", n);
    Spec s;
    Plan p;
    if (load_plan(text, NULL, 0, &s, &p) != 0) {
        fprintf(stderr, "match_compares: %s\n", g_err);
        test_failures++;
        return -1;
    }
    /* the journal: the first half of the plan in reverse order, an index never planned
     * (a lost record) in the middle */
    ResumeState st = {0};
    st.n_runs = n / 2 + 1;
    st.runs = calloc((size_t)st.n_runs, sizeof *st.runs);
    for (int k = 0, i = n / 2 - 1; k < st.n_runs; k++)
        if (k != n / 4) memcpy(st.runs[k].id, p.runs[i--].id, sizeof st.runs[k].id);
    ResumeMatch m;
    CHECK(resume_match(&st, &p, &m) == 0);
    int ok = m.missing == -1 && m.n_fresh == n - n / 2 && m.plan_of[n / 4] == -1;
    for (int k = 0, i = n / 2 - 1; k < st.n_runs && ok; k++)
        if (k != n / 4) ok = m.plan_of[k] == i--;
    for (int j = 0; j < m.n_fresh && ok; j++)
        ok = m.fresh[j] == n / 2 + j;
    CHECK_MSG(ok, "resume_match mapped %d runs wrongly", n);
    long compares = m.id_compares;
    resume_match_free(&m);
    /* a journal run the plan lacks is reported */
    snprintf(st.runs[n / 4].id, sizeof st.runs[n / 4].id, "0123456789abcdef");
    CHECK(resume_match(&st, &p, &m) == 0 && m.missing == n / 4);
    resume_match_free(&m);
    free(st.runs);
    done(&s, &p);
    return compares;
}

TEST(resume_match) {
    long small = match_compares(1000), large = match_compares(40000);
    /* about one comparison per journaled run, whatever the size (a scan makes n^2 / 8) */
    CHECK_MSG(small >= 0 && small <= 2 * 500, "%ld id comparisons for 500 journal runs", small);
    CHECK_MSG(large >= 0 && large <= 2 * 20000, "%ld id comparisons for 20000 journal runs", large);
}

/* --resume of a journal written under id scheme 1 gives each planned run
 * its old id (run_id_adopt). The journal: the first half of the plan under scheme-1 ids in
 * reverse order, one scheme-2 id among them, one lost index. Counted, not timed: id
 * comparisons (id_index_total_compares, plan_find_id's included) per journaled run. */
static long adopt_compares(int n) {
    char text[256];
    snprintf(text, sizeof text, "data: {path: \"@DATA@\"}\nseeds: %d\n", n);
    Spec s;
    Plan p;
    if (load_plan(text, NULL, 0, &s, &p) != 0) {
        fprintf(stderr, "adopt_compares: %s\n", g_err);
        test_failures++;
        return -1;
    }
    char(*v2)[17] = malloc(sizeof *v2 * (size_t)n);
    for (int i = 0; i < n; i++)
        memcpy(v2[i], p.runs[i].id, 17);
    ResumeState st = {0};
    st.n_runs = n / 2 + 1;
    st.runs = calloc((size_t)st.n_runs, sizeof *st.runs);
    for (int k = 0, i = n / 2 - 1; k < st.n_runs; k++) {
        if (k == n / 4) continue; /* its PLAN record lost */
        if (k == n / 8)
            memcpy(st.runs[k].id, p.runs[i].id, 17); /* already a scheme-2 id */
        else
            run_id_format(run_id_hash_v1(&p.runs[i].cfg, p.runs[i].seed), st.runs[k].id);
        i--;
    }
    long before = id_index_total_compares();
    int adopted = run_id_adopt(&p, &st);
    long compares = id_index_total_compares() - before;
    CHECK_MSG(adopted == n / 2 - 1, "%d runs adopted of %d", adopted, n / 2 - 1);
    int ok = 1;
    for (int k = 0, i = n / 2 - 1; k < st.n_runs && ok; k++)
        if (k != n / 4) ok = !strcmp(p.runs[i--].id, st.runs[k].id);
    for (int i = n / 2; i < n && ok; i++) /* runs the journal does not know keep theirs */
        ok = !strcmp(p.runs[i].id, v2[i]);
    CHECK_MSG(ok, "run_id_adopt gave %d runs wrong ids", n);
    free(v2);
    free(st.runs);
    done(&s, &p);
    return compares;
}

TEST(run_id_adopt_linear) {
    long small = adopt_compares(1000), large = adopt_compares(20000);
    /* two lookups per journaled run at most, about one comparison each (a scan: n^2 / 4) */
    CHECK_MSG(small >= 0 && small <= 4 * 500, "%ld id comparisons for 500 journal runs", small);
    CHECK_MSG(large >= 0 && large <= 4 * 10000, "%ld id comparisons for 10000 journal runs", large);
}

/* The run limit applies after grid.exclude. 7 axes of 10 values
 * (10,000,000 points) that exclude down to one run plan that run; a grid that keeps more
 * than the limit is refused without building it; n_excluded counts what exclusion dropped. */
TEST(exclude_limit) {
    static const char *axes[7] = {"train.lr",           "train.beta1",  "train.weight_decay",
                                  "train.warmup_steps", "train.min_lr", "train.grad_clip",
                                  "train.eval_tokens"};
    static const char *vals[7][10] = {
        {"0.001", "0.002", "0.003", "0.004", "0.005", "0.006", "0.007", "0.008", "0.009", "0.01"},
        {"0.80", "0.81", "0.82", "0.83", "0.84", "0.85", "0.86", "0.87", "0.88", "0.89"},
        {"0", "0.01", "0.02", "0.03", "0.04", "0.05", "0.06", "0.07", "0.08", "0.09"},
        {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"},
        {"0", "1e-5", "2e-5", "3e-5", "4e-5", "5e-5", "6e-5", "7e-5", "8e-5", "9e-5"},
        {"0", "0.5", "1", "1.5", "2", "2.5", "3", "3.5", "4", "4.5"},
        {"1024", "1025", "1026", "1027", "1028", "1029", "1030", "1031", "1032", "1033"}};
    for (int keep_last = 0; keep_last < 2; keep_last++) {
        static char text[16384];
        int n = snprintf(text, sizeof text, "data: {path: \"@DATA@\"}\ngrid:\n");
        for (int a = 0; a < 7; a++) {
            n += snprintf(text + n, sizeof text - n, "  %s: [", axes[a]);
            for (int v = 0; v < 10; v++)
                n += snprintf(text + n, sizeof text - n, "%s%s", v ? ", " : "", vals[a][v]);
            n += snprintf(text + n, sizeof text - n, "]\n");
        }
        n += snprintf(text + n, sizeof text - n, "  exclude:\n");
        /* every value but the first of each axis; keep_last: the last axis keeps all 10,
         * and the first axis's exclusions go away: 10 x 10 points x 1001 seeds remain */
        for (int a = keep_last; a < (keep_last ? 6 : 7); a++)
            for (int v = 1; v < 10; v++)
                n += snprintf(text + n, sizeof text - n, "    - {%s: %s}\n", axes[a], vals[a][v]);
        snprintf(text + n, sizeof text - n, "seeds: %d\n", keep_last ? 1001 : 1);
        Spec s;
        Plan p;
        double t0 = clock_seconds();
        int rc = load_plan(text, NULL, 0, &s, &p);
        double dt = clock_seconds() - t0;
        if (!keep_last) {
            CHECK_MSG(rc == 0, "%s", g_err);
            CHECK(p.n_runs == 1 && p.n_excluded == 10000000 - 1);
            CHECK(rc != 0 || (p.runs[0].cfg.train.lr == 0.001 && p.runs[0].cfg.train.beta1 == 0.8));
            done(&s, &p);
        } else {
            CHECK_MSG(rc != 0 && strstr(g_err, "more than 100000 runs after grid.exclude"), "%s",
                      g_err); /* load_plan freed the spec */
        }
        CHECK_MSG(dt < 10, "planning took %.1f s", dt);
    }
}

/* replicate: instead of seeds: plans every configuration x max seeds (seeds
 * 0..max-1, the ids `seeds: max` gives), with the rule's settings and the baseline. */
TEST(replicate) {
    Spec s;
    Plan p;
    const char *y = "data: {path: \"@DATA@\"}\n"
                    "variants:\n"
                    "  baseline: {}\n"
                    "  h2: {model.n_head: 2}\n"
                    "replicate:\n"
                    "  seeds: {min: 3, max: 8}\n"
                    "  resolve: 0.01\n"
                    "  looks: [3, 5, 8]\n"
                    "  alpha: 0.1\n"
                    "  budget: {core_hours: 2.5}\n";
    CHECK_MSG(load_plan(y, NULL, 0, &s, &p) == 0, "%s", g_err);
    if (p.n_runs) {
        const SpecReplicate *r = &s.replicate;
        CHECK(r->on && r->min == 3 && r->max == 8 && r->n_looks == 3 && r->looks[1] == 5);
        CHECK(r->delta == 0.01 && r->alpha == 0.1 && r->core_hours == 2.5);
        CHECK(p.n_runs == 16 && s.n_seeds == 8 && p.runs[7].seed == 7 && p.runs[8].seed == 0);
        done(&s, &p);
    }
    /* the same ids as seeds: 8 (fixed seeds today) */
    const char *fixed = "data: {path: \"@DATA@\"}\n"
                        "variants:\n"
                        "  baseline: {}\n"
                        "  h2: {model.n_head: 2}\n"
                        "seeds: 8\n";
    Spec s2;
    Plan p2;
    CHECK_MSG(load_plan(y, NULL, 0, &s, &p) == 0 && load_plan(fixed, NULL, 0, &s2, &p2) == 0, "%s",
              g_err);
    for (int i = 0; i < p.n_runs && i < p2.n_runs; i++)
        CHECK(!strcmp(p.runs[i].id, p2.runs[i].id));
    done(&s, &p);
    done(&s2, &p2);
    /* defaults: alpha 0.05, no budget, looks from min to max growing about x1.5 */
    CHECK_MSG(load_plan("data: {path: \"@DATA@\"}\n"
                        "variants: {baseline: {}, h2: {model.n_head: 2}}\n"
                        "replicate: {seeds: {min: 3, max: 20}, resolve: 0.01}\n",
                        NULL, 0, &s, &p) == 0,
              "%s", g_err);
    if (p.n_runs) {
        const SpecReplicate *r = &s.replicate;
        CHECK(r->alpha == 0.05 && r->core_hours == 0 && r->looks[0] == 3 &&
              r->looks[r->n_looks - 1] == 20);
        for (int i = 1; i < r->n_looks; i++)
            CHECK(r->looks[i] > r->looks[i - 1]);
        CHECK(!s.replicate.baseline_point);
        done(&s, &p);
    }
    /* a grid names its baseline point (a zip group by any of its keys) */
    CHECK_MSG(load_plan("data: {path: \"@DATA@\"}\n"
                        "grid:\n"
                        "  model.activation: [relu, gelu]\n"
                        "  zip:\n"
                        "    - {model.n_head: [2, 4], model.n_kv_head: [2, 4]}\n"
                        "replicate:\n"
                        "  seeds: {min: 2, max: 3}\n"
                        "  resolve: 0.02\n"
                        "  baseline: {model.activation: gelu, model.n_kv_head: 4}\n",
                        NULL, 0, &s, &p) == 0,
              "%s", g_err);
    if (p.n_runs) {
        CHECK(p.n_runs == 12 && s.replicate.baseline_point);
        CHECK(s.replicate.baseline_point && s.replicate.baseline_point[0] == 1 &&
              s.replicate.baseline_point[1] == 1);
        done(&s, &p);
    }
}

TEST(replicate_errors) {
    const char *head = "data: {path: \"@DATA@\"}\n"
                       "variants: {baseline: {}, h2: {model.n_head: 2}}\n";
    char t[2048];
#define REP(body) (snprintf(t, sizeof t, "%s%s", head, body), t)
    EXPECT_ERROR(REP("seeds: 3\nreplicate: {seeds: {min: 3, max: 5}, resolve: 0.01}\n"), NULL, 0,
                 "t.yaml:3:1: ", "seeds: and replicate: exclude each other");
    EXPECT_ERROR(REP("replicate: 5\n"), NULL, 0, "t.yaml:3:12: ", "replicate: expected a mapping");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 3, max: 5}\n  resolv: 0.01\n"), NULL, 0,
                 "t.yaml:5:3: ", "unknown key 'replicate.resolv'",
                 "did you mean 'replicate.resolve'");
    EXPECT_ERROR(REP("replicate:\n  resolve: 0.01\n"), NULL, 0,
                 "t.yaml:3:1: ", "replicate.seeds is required");
    EXPECT_ERROR(REP("replicate:\n  seeds: 5\n  resolve: 0.01\n"), NULL, 0,
                 "t.yaml:4:10: ", "replicate.seeds: expected {min: N, max: M}");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 3}\n  resolve: 0.01\n"), NULL, 0,
                 "t.yaml:4:10: ", "both min and max");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 1, max: 5}\n  resolve: 0.01\n"), NULL, 0,
                 "t.yaml:4:16: ", "replicate.seeds.min", "from 2");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 5, max: 3}\n  resolve: 0.01\n"), NULL, 0,
                 "t.yaml:4:24: ", "replicate.seeds.max: 3 is below min 5");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 3, max: 5}\n  mnx: 1\n"), NULL, 0,
                 "t.yaml:5:3: ", "unknown key 'replicate.mnx'");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 3, max: 5}\n"), NULL, 0,
                 "t.yaml:3:1: ", "replicate.resolve is required");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 3, max: 5}\n  resolve: -1\n"), NULL, 0,
                 "t.yaml:5:12: ", "replicate.resolve: expected a number above 0");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 3, max: 5}\n  resolve: 0.01\n  alpha: 0.5\n"),
                 NULL, 0, "t.yaml:6:10: ", "replicate.alpha", "between 0 and 0.5");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 3, max: 5}\n  resolve: 0.01\n"
                     "  budget: {core_hour: 1}\n"),
                 NULL, 0, "t.yaml:6:12: ", "unknown key 'replicate.budget.core_hour'");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 3, max: 5}\n  resolve: 0.01\n"
                     "  budget: {core_hours: 0}\n"),
                 NULL, 0, "t.yaml:6:24: ", "replicate.budget.core_hours");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 3, max: 8}\n  resolve: 0.01\n"
                     "  looks: [3, 5, 5, 8]\n"),
                 NULL, 0, "t.yaml:6:17: ", "replicate.looks: must increase strictly");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 3, max: 8}\n  resolve: 0.01\n"
                     "  looks: [4, 8]\n"),
                 NULL, 0, "t.yaml:6:11: ", "first look must be at seeds.min (3)");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 3, max: 8}\n  resolve: 0.01\n"
                     "  looks: [3, 5]\n"),
                 NULL, 0, "t.yaml:6:14: ", "last look must be at seeds.max (8)");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 3, max: 8}\n  resolve: 0.01\n"
                     "  looks: 3\n"),
                 NULL, 0, "t.yaml:6:10: ", "replicate.looks: expected a list");
    EXPECT_ERROR(REP("replicate:\n  seeds: {min: 3, max: 8}\n  resolve: 0.01\n"
                     "  baseline: {model.n_head: 2}\n"),
                 NULL, 0, "t.yaml:6:3: ", "no grid");
#undef REP
    /* the baseline: variants need 'baseline', a grid needs replicate.baseline */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "variants: {h2: {model.n_head: 2}, h8: {model.n_head: 8}}\n"
                 "replicate: {seeds: {min: 3, max: 5}, resolve: 0.01}\n",
                 NULL, 0, "t.yaml:3:1: ", "'baseline: {}'");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "replicate: {seeds: {min: 3, max: 5}, resolve: 0.01}\n",
                 NULL, 0, "t.yaml:2:1: ", "at least two configurations");
    const char *grid = "data: {path: \"@DATA@\"}\n"
                       "grid:\n"
                       "  model.n_head: [2, 4]\n"
                       "  model.activation: [relu, gelu]\n"
                       "replicate:\n"
                       "  seeds: {min: 3, max: 5}\n"
                       "  resolve: 0.01\n";
    char g[2048];
    EXPECT_ERROR(grid, NULL, 0, "t.yaml:5:1: ", "replicate.baseline is required with a grid");
    snprintf(g, sizeof g, "%s  baseline: {model.n_head: 4}\n", grid);
    EXPECT_ERROR(g, NULL, 0, "t.yaml:8:13: ", "grid axis model.activation", "no value");
    snprintf(g, sizeof g, "%s  baseline: {model.n_head: 3, model.activation: relu}\n", grid);
    EXPECT_ERROR(g, NULL, 0,
                 "t.yaml:8:28: ", "3 is not one of the values of grid axis model.n_head");
    snprintf(g, sizeof g, "%s  baseline: {model.n_layer: 3, model.activation: relu}\n", grid);
    EXPECT_ERROR(g, NULL, 0, "t.yaml:8:14: ", "model.n_layer is not a grid axis");
}

/* ---- the key lists messages name ---- */

/* The error of loading the spec "%s" filled with word (g_err; "" if it loads and plans). */
static const char *spec_error(const char *fmt, const char *word) {
    char text[2048];
    snprintf(text, sizeof text, fmt, word);
    Spec s;
    Plan p;
    if (load_plan(text, NULL, 0, &s, &p) == 0) {
        done(&s, &p);
        g_err[0] = '\0';
    }
    return g_err;
}

/* The keys in g_err between after and before, as "a b c": a list "a, b and c" (", ", " and ",
 * " or ") or a mapping's form "{a: N, b: M}". "" if after or before is missing. */
static const char *listed_keys(const char *after, const char *before) {
    static char out[256];
    out[0] = '\0';
    const char *a = strstr(g_err, after), *b = a ? strstr(a + strlen(after), before) : NULL;
    if (!b) return out;
    char seg[256];
    snprintf(seg, sizeof seg, "%.*s", (int)(b - a - strlen(after)), a + strlen(after));
    size_t len = 0;
    for (char *w = seg + (seg[0] == '{'); *w && len < sizeof out;) {
        size_t n = strcspn(w, ",:} ");
        len += (size_t)snprintf(out + len, sizeof out - len, "%s%.*s", len ? " " : "", (int)n, w);
        w += n;
        if (*w == ':') w += strcspn(w, ",}"); /* a form: skip the placeholder */
        w += strspn(w, ",} ");
        if (!strncmp(w, "and ", 4) || !strncmp(w, "or ", 3)) w += *w == 'a' ? 4 : 3;
    }
    return out;
}

#define EXPECT_KEYS(got, want)                                                                     \
    CHECK_MSG(!strcmp(got, want), "listed '%s', want '%s' in: %s", got, want, g_err)

/* Every key of "a b c" is accepted where fmt puts it: its spec may fail, but not on an
 * unknown key; and a key that is none of them is refused there (the probe can tell). */
static void expect_accepted(int line, const char *fmt, const char *keys) {
    char words[256];
    snprintf(words, sizeof words, "%s", keys);
    for (char *save = NULL, *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save))
        if (strstr(spec_error(fmt, w), "unknown key")) {
            fprintf(stderr, "test_spec.c:%d: the message lists '%s', the parser refuses it: %s\n",
                    line, w, g_err);
            test_failures++;
        }
    if (!strstr(spec_error(fmt, "zzqqzz"), "unknown key")) {
        fprintf(stderr, "test_spec.c:%d: 'zzqqzz' is not refused: '%s'\n", line, g_err);
        test_failures++;
    }
}

/* A message that lists the keys a mapping takes lists exactly the keys its parser accepts
 * (a hand-written top-level list once lacked description and replicate): every listed key is
 * accepted there, and each list is the documented one (docs/spec.md, "Top-level keys" and
 * "replicate"). */
TEST(key_lists) {
    const char *rep = "data: {path: \"@DATA@\"}\n"
                      "variants: {baseline: {}, h2: {model.n_head: 2}}\n";
    char fmt[1024];
    spec_error("- %s\n", "base");
    EXPECT_KEYS(listed_keys("mapping with keys ", "; got"),
                "data base grid variants seeds description replicate contrasts ladder tune");
    expect_accepted(__LINE__, "%s: {}\n", listed_keys("mapping with keys ", "; got"));
    spec_error("zzzzqqq: %s\n", "1");
    EXPECT_KEYS(listed_keys("(expected ", ")"),
                "data base grid variants seeds description replicate contrasts ladder tune");

    snprintf(fmt, sizeof fmt, "%sreplicate: %%s\n", rep);
    spec_error(fmt, "5");
    EXPECT_KEYS(listed_keys("mapping with ", "; got"), "seeds resolve looks alpha budget baseline");
    snprintf(fmt, sizeof fmt, "%sreplicate: {%%s: {}}\n", rep);
    expect_accepted(__LINE__, fmt, listed_keys("mapping with ", "; got"));

    snprintf(fmt, sizeof fmt, "%sreplicate: {seeds: %%s, resolve: 0.01}\n", rep);
    spec_error(fmt, "5");
    EXPECT_KEYS(listed_keys("expected ", ", got"), "min max");
    spec_error(fmt, "{min: 3}");
    EXPECT_KEYS(listed_keys("both ", " are required"), "min max");
    snprintf(fmt, sizeof fmt, "%sreplicate: {seeds: {%%s: 3}, resolve: 0.01}\n", rep);
    expect_accepted(__LINE__, fmt, "min max");
    snprintf(fmt, sizeof fmt, "%sreplicate: {resolve: 0.01}\n", rep);
    spec_error(fmt, "");
    EXPECT_KEYS(listed_keys("required: ", " seeds per"), "min max");

    snprintf(fmt, sizeof fmt,
             "%sreplicate: {seeds: {min: 3, max: 5}, resolve: 0.01, budget: %%s}\n", rep);
    spec_error(fmt, "1");
    EXPECT_KEYS(listed_keys("expected ", ", got"), "core_hours");
    snprintf(fmt, sizeof fmt,
             "%sreplicate: {seeds: {min: 3, max: 5}, resolve: 0.01, budget: {%%s: 1}}\n", rep);
    expect_accepted(__LINE__, fmt, "core_hours");
}

/* base: suggests its keys from the knob table: a near miss of preset, of any section
 * ("mode" for model) or of an undotted knob ("save_weight") is told the key it missed, so a
 * new section needs no second list. */
TEST(base_key_suggestions) {
    char shown[64], want[96];
    for (int i = -1; i < knob_count; i++) {
        const char *name = i < 0 ? "preset" : knob_table[i].name;
        snprintf(shown, sizeof shown, "%.*s", (int)strcspn(name, ".") - 1, name);
        snprintf(want, sizeof want, "unknown key '%s' (did you mean '%.*s'?)", shown,
                 (int)strcspn(name, "."), name);
        spec_error("base:\n  %s: {}\n", shown);
        CHECK_MSG(strstr(g_err, want), "%s: %s", name, g_err);
    }
}

/* A replicate: sweep's contrasts, defined once in C: every configuration against the baseline,
 * paired by seed index. */
/* Loads yaml's plan and builds its contrasts: 1 when both worked (contrasts_done frees them),
 * else 0 with the failure counted. */
static int contrasts_of(const char *yaml, Spec *s, Plan *p, Contrasts *c) {
    CHECK_MSG(load_plan(yaml, NULL, 0, s, p) == 0, "%s", g_err);
    if (!p->n_runs) return 0;
    if (contrasts_build(p, c, g_err) == 0) return 1;
    CHECK_MSG(0, "%s", g_err);
    done(s, p);
    return 0;
}

static void contrasts_done(Spec *s, Plan *p, Contrasts *c) {
    contrasts_free(c);
    done(s, p);
}

TEST(contrasts) {
    Spec s;
    Plan p;
    Contrasts c;
    if (contrasts_of("data: {path: \"@DATA@\"}\n"
                     "variants: {baseline: {}, h2: {model.n_head: 2}, gelu: "
                     "{model.activation: gelu}}\n"
                     "replicate: {seeds: {min: 2, max: 4}, resolve: 0.01}\n",
                     &s, &p, &c)) {
        CHECK(c.n_configs == 3 && c.n_seeds == 4 && c.baseline == 0 && c.n_contrasts == 2);
        CHECK(c.n_contrasts == 2 && c.list[0].terms[0].config == 1 &&
              c.list[1].terms[0].config == 2);
        CHECK(c.n_configs == 3 && !strcmp(c.config_name[0], "baseline") &&
              !strcmp(c.config_name[1], "h2") && !strcmp(c.config_name[2], "gelu"));
        /* seed index k of configuration 2 is plan run 2 * 4 + k, seed k */
        CHECK(p.runs[contrasts_run(&c, 2, 3)].seed == 3 &&
              p.runs[contrasts_run(&c, 2, 3)].variant == 2);
        contrasts_done(&s, &p, &c);
    }
    /* a grid: the baseline point may be anywhere in plan order */
    if (contrasts_of("data: {path: \"@DATA@\"}\n"
                     "grid: {model.n_head: [2, 4], model.activation: [relu, gelu]}\n"
                     "replicate: {seeds: {min: 2, max: 2}, resolve: 0.01,\n"
                     "            baseline: {model.n_head: 4, model.activation: relu}}\n",
                     &s, &p, &c)) {
        CHECK(c.n_configs == 4 && c.baseline == 2 && c.n_contrasts == 3);
        CHECK(c.n_configs == 4 && !strcmp(c.config_name[2], "n_head=4/activation=relu"));
        CHECK(c.n_contrasts == 3 && c.list[2].terms[0].config == 3);
        contrasts_done(&s, &p, &c);
    }
    /* a ladder: each configuration against the baseline at its own rung, never across
     * model sizes; the rungs' baselines are no contrasts of their own */
    if (contrasts_of("data: {path: \"@DATA@\"}\n"
                     "grid: {model.activation: [relu, gelu]}\n"
                     "ladder: {rungs: {model.d_model: [16, 32]}}\n"
                     "variants: {baseline: {}, rope: {model.position: rope}}\n"
                     "replicate: {seeds: {min: 2, max: 2}, resolve: 0.01,\n"
                     "            baseline: {model.activation: relu}}\n",
                     &s, &p, &c)) {
        /* 8 configurations: 2 variants x 2 activations x 2 rungs; the baselines are
         * baseline/activation=relu at each rung: 6 contrasts */
        CHECK_MSG(c.n_configs == 8 && c.n_contrasts == 6, "%d configs, %d contrasts", c.n_configs,
                  c.n_contrasts);
        for (int j = 0; j < c.n_contrasts; j++) {
            const char *me = c.list[j].label, *base = c.list[j].base_label;
            const char *rung = strstr(me, "d_model="), *base_rung = strstr(base, "d_model=");
            CHECK_MSG(rung && base_rung && !strcmp(rung, base_rung) &&
                          !strncmp(base, "baseline/activation=relu/", 25),
                      "%s against %s", me, base);
            CHECK(!strcmp(c.config_name[c.list[j].terms[1].config], base));
        }
        contrasts_done(&s, &p, &c);
    }
    /* a ladder with variants only needs no replicate.baseline: each rung's baseline variant */
    if (contrasts_of("data: {path: \"@DATA@\"}\n"
                     "ladder: {rungs: {model.d_model: [16, 32, 48]}}\n"
                     "variants: {baseline: {}, rope: {model.position: rope}}\n"
                     "replicate: {seeds: {min: 2, max: 2}, resolve: 0.01}\n",
                     &s, &p, &c)) {
        CHECK_MSG(c.n_configs == 6 && c.n_contrasts == 3 && c.baseline == 0, "%d %d %d",
                  c.n_configs, c.n_contrasts, c.baseline);
        for (int j = 0; j < c.n_contrasts; j++)
            CHECK_MSG(!strcmp(strchr(c.list[j].label, '/'), strchr(c.list[j].base_label, '/')),
                      "%s against %s", c.list[j].label, c.list[j].base_label);
        contrasts_done(&s, &p, &c);
    }
    /* a baseline point that grid.exclude drops is refused where it is named */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  model.n_head: [2, 4]\n"
                 "  exclude: [{model.n_head: 4}]\n"
                 "replicate: {seeds: {min: 2, max: 2}, resolve: 0.01,\n"
                 "            baseline: {model.n_head: 4}}\n",
                 NULL, 0, "t.yaml:6:23: ", "excluded by grid.exclude");
}

/* contrasts: main_effects / interactions: the factors (axes in file order, then the
 * variants), one contrast per non-base level and per pair of non-base levels, each term a
 * cell of the factorial; the spec's errors at their lines. */
TEST(factorial_contrasts) {
    Spec s;
    Plan p;
    Contrasts c;
    const char *grid = "data: {path: \"@DATA@\"}\n"
                       "grid: {model.activation: [relu, gelu], model.norm: [pre, post],\n"
                       "       model.position: [learned, rope, none]}\n"
                       "replicate: {seeds: {min: 2, max: 3}, resolve: 0.01,\n"
                       "  baseline: {model.activation: gelu, model.norm: pre, "
                       "model.position: learned}}\n"
                       "contrasts: %s\n";
    char text[1024];
    snprintf(text, sizeof text, grid, "interactions");
    CHECK_MSG(load_plan(text, NULL, 0, &s, &p) == 0, "%s", g_err);
    if (p.n_runs) {
        CHECK_MSG(contrasts_build(&p, &c, g_err) == 0, "%s", g_err);
        /* main: 1 + 1 + 2; interactions: 1x1 + 1x2 + 1x2 */
        CHECK(c.family == SPEC_CONTRASTS_INTERACTIONS && c.n_factors == 3 && c.n_contrasts == 9);
        if (c.n_contrasts == 9) {
            const Contrast *m = &c.list[0], *x = &c.list[4];
            CHECK(m->kind == CONTRAST_MAIN && m->factor[0] == 0 && m->level[0] == 0 &&
                  m->factor[1] == -1 && !strcmp(m->label, "model.activation=relu") &&
                  !strcmp(m->base_label, "model.activation=gelu"));
            CHECK(m->n_groups == 6 && m->group_size == 2); /* 2 norms x 3 positions */
            CHECK(!strcmp(c.list[3].label, "model.position=none"));
            CHECK(x->kind == CONTRAST_INTERACTION && x->factor[0] == 0 && x->factor[1] == 1 &&
                  !strcmp(x->label, "model.activation=relu x model.norm=post") &&
                  !strcmp(x->base_label, "model.activation=gelu x model.norm=pre") &&
                  x->n_groups == 3 && x->group_size == 4);
            /* every term is the cell its levels name, signs + - - + */
            for (int g = 0; g < x->n_groups; g++)
                for (int i = 0; i < 4; i++) {
                    const PlannedRun *r = &p.runs[contrasts_run(&c, x->terms[g * 4 + i].config, 0)];
                    int want_act = i < 2 ? 0 : 1, want_norm = (i % 2) == 0 ? 1 : 0;
                    CHECK(r->point[0] == want_act && r->point[1] == want_norm && r->point[2] == g &&
                          x->terms[g * 4 + i].sign == (i % 3 ? -1 : 1));
                }
            for (int k = 0; k < c.n_configs; k++) /* 2-level axes: every cell enters */
                CHECK(contrasts_uses(&c, 0, k) && contrasts_uses(&c, 1, k));
            /* position=rope against learned: the cells with position none stay out */
            for (int k = 0; k < c.n_configs; k++)
                CHECK(contrasts_uses(&c, 2, k) == (p.runs[contrasts_run(&c, k, 0)].point[2] < 2));
        }
        contrasts_free(&c);
        done(&s, &p);
    }
    /* variants are one more factor, after the axes */
    CHECK_MSG(load_plan("data: {path: \"@DATA@\"}\n"
                        "grid: {model.norm: [pre, post]}\n"
                        "variants: {baseline: {}, gelu: {model.activation: gelu}}\n"
                        "replicate: {seeds: {min: 2, max: 2}, resolve: 0.01,\n"
                        "            baseline: {model.norm: pre}}\n"
                        "contrasts: main_effects\n",
                        NULL, 0, &s, &p) == 0,
              "%s", g_err);
    if (p.n_runs) {
        CHECK_MSG(contrasts_build(&p, &c, g_err) == 0, "%s", g_err);
        CHECK(c.n_factors == 2 && c.n_contrasts == 2 && !strcmp(c.factor_name[1], "variant"));
        if (c.n_contrasts == 2)
            CHECK(!strcmp(c.list[0].label, "model.norm=post") &&
                  !strcmp(c.list[1].label, "variant=gelu") &&
                  !strcmp(c.list[1].base_label, "variant=baseline") && c.list[1].n_groups == 2);
        contrasts_free(&c);
        done(&s, &p);
    }
    /* vs_base written out is the default */
    snprintf(text, sizeof text, grid, "vs_base");
    CHECK_MSG(load_plan(text, NULL, 0, &s, &p) == 0, "%s", g_err);
    if (p.n_runs) {
        CHECK_MSG(contrasts_build(&p, &c, g_err) == 0, "%s", g_err);
        CHECK(c.family == SPEC_CONTRASTS_VS_BASE && c.n_contrasts == 11 &&
              c.list[0].kind == CONTRAST_VS_BASE);
        contrasts_free(&c);
        done(&s, &p);
    }
    /* errors, each at its line */
    snprintf(text, sizeof text, grid, "bogus");
    EXPECT_ERROR(text, NULL, 0, "t.yaml:6:12: ",
                 "contrasts: expected vs_base, main_effects or interactions, got 'bogus'");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid: {model.norm: [pre, post]}\n"
                 "seeds: 2\n"
                 "contrasts: main_effects\n",
                 NULL, 0, "t.yaml:4:12: ", "needs a replicate: section");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "variants: {baseline: {}, h2: {model.n_head: 2}}\n"
                 "replicate: {seeds: {min: 2, max: 2}, resolve: 0.01}\n"
                 "contrasts: main_effects\n",
                 NULL, 0, "t.yaml:4:12: ", "needs a grid");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid: {model.norm: [pre, post]}\n"
                 "replicate: {seeds: {min: 2, max: 2}, resolve: 0.01, baseline: {model.norm: "
                 "pre}}\n"
                 "contrasts: interactions\n",
                 NULL, 0, "t.yaml:4:12: ", "interactions needs two factors");
    /* a cell of the factorial excluded: refused at the contrasts: key */
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid:\n"
                 "  model.norm: [pre, post]\n"
                 "  model.activation: [relu, gelu]\n"
                 "  exclude: [{model.norm: post, model.activation: gelu}]\n"
                 "replicate: {seeds: {min: 2, max: 2}, resolve: 0.01,\n"
                 "            baseline: {model.norm: pre, model.activation: relu}}\n"
                 "contrasts: main_effects\n",
                 NULL, 0, "t.yaml:8:1: ", "needs every cell of the factorial",
                 "grid.exclude (line 5)", "model.norm=post model.activation=gelu");
}

/* The run limit is not compiled in. ABLATE_MAX_RUNS lowers or raises it;
 * a spec over it is refused with a message naming the limit and the variable; a bad value
 * is refused naming the variable. */
/* knob_find's hash (worker/knobs.c) finds every knob by its name, with or without "base.",
 * from several threads at once on first use, and nothing else: a prefix, an extension, a
 * case change, the empty name. */
static void *find_all(void *arg) {
    long *bad = arg;
    for (int i = 0; i < knob_count; i++)
        *bad += knob_find(knob_table[i].name) != &knob_table[i];
    return NULL;
}

TEST(knob_find) {
    pthread_t t[4];
    long bad[4] = {0};
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, find_all, &bad[i]) == 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK_MSG(bad[i] == 0, "thread %d: %ld knobs not found by their name", i, bad[i]);
    }
    char name[160];
    for (int i = 0; i < knob_count; i++) {
        const char *n = knob_table[i].name;
        snprintf(name, sizeof name, "base.%s", n);
        CHECK_MSG(knob_find(name) == &knob_table[i], "%s", name);
        snprintf(name, sizeof name, "%sx", n);
        CHECK_MSG(knob_find(name) == NULL, "%s found", name);
        snprintf(name, sizeof name, "%.*s", (int)strlen(n) - 1, n);
        CHECK_MSG(knob_find(name) == NULL || strcmp(knob_find(name)->name, name) == 0, "%s", name);
    }
    CHECK(knob_find("") == NULL && knob_find("MODEL.CONTEXT") == NULL &&
          knob_find("base.") == NULL);
}

/* knob_equal's shortcut (equal values, no formatting) against the text it stands for: for
 * every knob, a value one step from the default (or -0.0, or bytes after a string's NUL)
 * is equal exactly when the two formatted texts are. */
static int formats_equal(const RunConfig *a, const RunConfig *b, const Knob *k) {
    char x[ABL_PATH_MAX + 8], y[ABL_PATH_MAX + 8];
    knob_format(a, k, x, sizeof x);
    knob_format(b, k, y, sizeof y);
    return strcmp(x, y) == 0;
}

TEST(knob_equal) {
    RunConfig def;
    run_config_default(&def);
    for (int i = 0; i < knob_count; i++) {
        const Knob *k = &knob_table[i];
        for (int variant = 0; variant < 3; variant++) {
            RunConfig c = def;
            char *f = (char *)&c + k->offset;
            switch (k->type) {
            case FT_LONG:
                *(long *)(void *)f += variant;
                break;
            case FT_INT:
            case FT_BOOL:
            case FT_ENUM:
                *(int *)(void *)f += variant;
                break;
            case FT_DOUBLE: {
                double *d = (double *)(void *)f;
                *d = variant == 1 ? nextafter(*d, INFINITY) : variant == 2 ? -*d : *d;
                break;
            }
            case FT_STR:
            case FT_TEXT:
                if (variant == 1 && k->n > 2) {
                    size_t len = strnlen(f, k->n - 2);
                    f[len] = 'x', f[len + 1] = 0;
                } else if (variant == 2) {
                    size_t len = strnlen(f, k->n - 1);
                    if (len + 1 < k->n) f[len + 1] = 'y'; /* after the NUL: not the value */
                }
                break;
            case FT_HEADS:
                break;
            }
            CHECK_MSG(knob_equal(&c, &def, k) == formats_equal(&c, &def, k),
                      "%s, variant %d: knob_equal %d, texts equal %d", k->name, variant,
                      knob_equal(&c, &def, k), formats_equal(&c, &def, k));
        }
    }
}

TEST(max_runs_env) {
    static const char text[] = "data: {path: \"@DATA@\"}\n"
                               "grid: {train.lr: [1e-3, 2e-3, 3e-3]}\n"
                               "seeds: 2\n"; /* 6 runs */
    Spec s;
    Plan p;
    setenv("ABLATE_MAX_RUNS", "5", 1);
    int rc = load_plan(text, NULL, 0, &s, &p);
    CHECK_MSG(rc != 0 && strstr(g_err, "6 runs, more than the limit of 5") &&
                  strstr(g_err, "ABLATE_MAX_RUNS=6"),
              "%s", rc ? g_err : "planned");
    if (rc == 0) done(&s, &p);
    setenv("ABLATE_MAX_RUNS", "6", 1);
    rc = load_plan(text, NULL, 0, &s, &p);
    CHECK_MSG(rc == 0 && p.n_runs == 6, "%s", g_err);
    if (rc == 0) done(&s, &p);
    setenv("ABLATE_MAX_RUNS", "lots", 1);
    rc = load_plan(text, NULL, 0, &s, &p);
    CHECK_MSG(rc != 0 && strstr(g_err, "ABLATE_MAX_RUNS='lots'"), "%s", rc ? g_err : "planned");
    if (rc == 0) done(&s, &p);
    unsetenv("ABLATE_MAX_RUNS");
    char err[ABL_ERR_MAX];
    CHECK(plan_max_runs(err) == PLAN_MAX_RUNS_DEFAULT);
}

/* ladder: a zip axis of sizes after the grid's axes, and train.tokens_per_param: tokens =
 * tokens_per_param x non-embedding parameters, rounded up to whole steps (docs/spec.md). */
TEST(ladder) {
    const char *y = "data: {path: \"@DATA@\"}\n"
                    "base: {train: {batch_size: 4}}\n"
                    "grid:\n"
                    "  model.activation: [gelu, relu]\n"
                    "ladder:\n"
                    "  rungs: {model.d_model: [16, 32, 64], model.n_layer: [1, 1, 2]}\n"
                    "  tokens_per_param: 2.5\n"
                    "variants:\n"
                    "  baseline: {}\n"
                    "  rope: {model.position: rope}\n"
                    "seeds: 2\n";
    Spec s;
    Plan p;
    g_cost = 1;
    CHECK_MSG(load_plan(y, NULL, 0, &s, &p) == 0, "%s", g_err);
    g_cost = 0;
    CHECK(s.ladder && s.ladder_axis == 1 && s.n_axes == 2 && s.axes[1].zip);
    CHECK(s.base.train.tokens_per_param == 2.5 && s.base.train.steps == 0);
    CHECK(p.n_runs == 2 * 2 * 3 * 2);
    if (p.n_runs == 24) {
        CHECK(!strcmp(p.runs[0].name, "baseline/activation=gelu/d_model=16/n_layer=1/seed0"));
        CHECK(!strcmp(p.runs[23].name, "rope/activation=relu/d_model=64/n_layer=2/seed1"));
        PlanCost *cost = plan_cost_compute(&p, g_err);
        CHECK_MSG(cost != NULL, "%s", g_err);
        for (int i = 0; cost && i < p.n_runs; i++) {
            RunConfig c;
            plan_cost_config(&p, cost, i, &c);
            long per_step = 4L * c.model.context;
            double n = (double)model_nonembedding_param_count(&c.model);
            long want = (long)ceil(2.5 * n / (double)per_step) * per_step;
            CHECK_MSG(cost[i].c.tokens == want, "%s: %ld tokens, want %ld", p.runs[i].name,
                      cost[i].c.tokens, want);
            /* the same rung trains the same tokens with either position encoding */
            if (i >= 12) CHECK(cost[i].c.tokens == cost[i - 12].c.tokens);
            if (i >= 12) CHECK(cost[i].c.params < cost[i - 12].c.params);
        }
        /* tokens grow with the rung's size */
        CHECK(cost && cost[0].c.tokens < cost[2].c.tokens && cost[2].c.tokens < cost[4].c.tokens);
        free(cost);
    }
    done(&s, &p);
    /* the knob alone, as any budget */
    const char *k = "data: {path: \"@DATA@\"}\n"
                    "base: {train: {tokens_per_param: 1}}\n";
    CHECK_MSG(load_plan(k, NULL, 0, &s, &p) == 0, "%s", g_err);
    CHECK(p.n_runs == 1 && p.runs[0].cfg.train.steps == 0 &&
          p.runs[0].cfg.train.tokens_per_param == 1);
    CHECK(run_config_total_steps(&p.runs[0].cfg) ==
          (long)ceil((double)model_nonembedding_param_count(&p.runs[0].cfg.model) /
                     (32.0 * p.runs[0].cfg.model.context)));
    done(&s, &p);

    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "ladder: {rung: {model.d_model: [16, 32]}}\n",
                 NULL, 0, "t.yaml:2:10: ", "unknown key 'ladder.rung'", "'ladder.rungs'");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "ladder: {tokens_per_param: 20}\n",
                 NULL, 0, "t.yaml:2:1: ", "ladder.rungs is required");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "ladder: [16, 32]\n",
                 NULL, 0, "t.yaml:2:9: ", "ladder: expected a mapping");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "ladder: {rungs: {model.d_model: [16]}}\n",
                 NULL, 0, "t.yaml:2:33: ", "at least two rungs");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "ladder: {rungs: {model.d_model: [16, 32], model.n_layer: [1]}}\n",
                 NULL, 0, "t.yaml:2:", "at least two rungs");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "ladder: {rungs: {model.d_model: [16, 32], model.n_layer: [1, 2, 3]}}\n",
                 NULL, 0, "t.yaml:2:58: ", "same length");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "grid: {model.d_model: [16, 32]}\n"
                 "ladder: {rungs: {model.d_model: [16, 32]}}\n",
                 NULL, 0, "t.yaml:3:18: ", "already a grid axis");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "ladder: {rungs: {model.d_model: [16, 32]}}\n"
                 "variants: {wide: {model.d_model: 64}}\n",
                 NULL, 0, "t.yaml:3:19: ", "grid axis");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "base: {train: {steps: 10}}\n"
                 "ladder: {rungs: {model.d_model: [16, 32]}, tokens_per_param: 20}\n",
                 NULL, 0, "t.yaml:3:44: ", "train.steps is set too (line 2)");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "ladder: {rungs: {model.d_model: [16, 32]}, tokens_per_param: -1}\n",
                 NULL, 0, "t.yaml:2:62: ", "ladder.tokens_per_param", "above 0");
    EXPECT_ERROR("data: {path: \"@DATA@\"}\n"
                 "ladder: {rungs: {model.d_model: [16, 32]}, tokens_per_param: many}\n",
                 NULL, 0, "t.yaml:2:62: ", "ladder.tokens_per_param", "expected a number");
}

int main(int argc, char **argv) {
    g_tmp = test_tmpdir();
    if (!g_tmp) {
        fprintf(stderr, "test_spec: no temporary directory\n");
        return 1;
    }
    snprintf(g_data, sizeof g_data, "%s/small.txt", g_tmp);
    if (test_write_corpus(g_data, 4000) != 0) {
        fprintf(stderr, "test_spec: cannot write %s\n", g_data);
        return 1;
    }
    return test_main(argc, argv, "test_spec");
}
