/* ablate train SPEC.yaml [--run NAME|ID] [--set key=value ...] [--seed N] [--json]
 *                        [--max-run-memory SIZE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"
#include "util/log.h"
#include "cli_util.h"
#include "commands.h"
#include "orchestrator/plan/plan.h"
#include "orchestrator/plan/plan_cost.h"
#include "worker/blas_env.h"
#include "worker/calibrate.h"
#include "worker/sinks.h"
#include "worker/train.h"

static void train_usage(FILE *f) {
    fprintf(f,
            "usage: ablate train SPEC.yaml [--run NAME|ID] [--set key=value ...] [--seed N]\n"
            "                              [--json] [--max-run-memory SIZE] [--blas-threads K]\n\n"
            "Trains one run alone and reports progress on stderr; --json prints one JSON object\n"
            "per event on stdout instead. Without --run it trains the spec's base (grid,\n"
            "variants and seeds are ignored); with --run, the planned run of that name or id\n"
            "(see 'ablate plan'), with the same values it gets in 'ablate run'.\n\n"
            "  --run NAME|ID          a run of the spec's plan, by name or id\n"
            "  --set key=value        override a base knob (repeatable), e.g. --set "
            "model.n_head=8;\n"
            "                         with --run, as 'ablate run --set' does\n"
            "  --seed N               run seed (default: the spec's first seed; not with --run)\n"
            "  --json                 JSON Lines on stdout: start, step, eval, act, sample, end\n"
            "  --max-run-memory SIZE  refuse a run that needs more memory than SIZE (e.g. 16G;\n"
            "                         default 80%% of physical memory, see docs/spec.md)\n"
            "  --blas-threads K       threads per run: OpenBLAS and the model's loops (1);\n"
            "                         results are bit-identical only between runs with the\n"
            "                         same K\n\n"
            "Knobs (defaults shown; see docs/spec.md):\n");
    cli_print_knobs(f);
}

/* The run --run names: an id, else a name; -1 if the plan has none. */
static int find_run(const Plan *p, const char *sel) {
    int i = plan_find_id(p, sel);
    for (int k = 0; i < 0 && k < p->n_runs; k++)
        if (!strcmp(p->runs[k].name, sel)) i = k;
    return i;
}

/* Between steps: a --json output that can no longer be written ends the run (training on
 * for nobody was what `| head -1` got with SIGPIPE ignored). */
static TrainPoll json_failed(void *ctx) {
    return ((const JsonSink *)ctx)->write_errno ? TRAIN_ABORT : TRAIN_CONTINUE;
}

/* train.calibrate: the run's trials in line, then its calibrated step budget, as a sweep
 * gives it (worker/calibrate.h; a sweep journals its trials, this only says them). */
static int calibrate(RunConfig *cfg, uint64_t seed, const Dataset *d, char err[ABL_ERR_MAX]) {
    int k = cfg->train.calibrate;
    if (!(cfg->train.seconds > 0) || k <= 0) return 0;
    double *tps = calloc((size_t)k, sizeof *tps);
    if (!tps) return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    for (int i = 0; i < k; i++) {
        CalibTrial t;
        if (calib_trial(cfg, seed, d, &t, err) != 0) {
            free(tps);
            return -1;
        }
        tps[i] = t.tokens_per_s;
        log_info("calibration: trial %d/%d: %.1f tokens/s (load %.2f)", i + 1, k, t.tokens_per_s,
                 t.load1);
    }
    double med, lo, hi;
    calib_summary(tps, k, &med, &lo, &hi);
    free(tps);
    long per_step = (long)cfg->train.batch_size * cfg->model.context;
    cfg->train.calibrated_steps = calib_budget_steps(med, cfg->train.seconds, per_step);
    log_info("calibration: median %.1f tokens/s (min %.1f, max %.1f) x %g s / %ld tokens a step "
             "= %ld steps",
             med, lo, hi, cfg->train.seconds, per_step, cfg->train.calibrated_steps);
    if (cfg->train.calibrated_steps <= 0) /* never train a calibrated run by the clock */
        return snprintf(err, ABL_ERR_MAX,
                        "train.calibrate: no step budget from %.1f tokens/s x %g s (the trials "
                        "measured no throughput, or the budget does not fit)",
                        med, cfg->train.seconds),
               -1;
    return 0;
}

int cmd_train(int argc, char **argv) {
    const char *spec_path = NULL, *run_sel = NULL;
    const char *sets[256];
    int n_sets = 0, json = 0, have_seed = 0;
    unsigned long long seed = 0;
    double max_mem = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            train_usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--set") == 0 && i + 1 < argc && n_sets < 256) {
            sets[n_sets++] = argv[++i];
        } else if (strncmp(argv[i], "--set=", 6) == 0 && n_sets < 256) {
            sets[n_sets++] = argv[i] + 6;
        } else if (strcmp(argv[i], "--run") == 0 && i + 1 < argc) {
            run_sel = argv[++i];
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            if (cli_number("--seed", argv[++i], CLI_UINT, &seed) != 0) return 2;
            have_seed = 1;
        } else if (strcmp(argv[i], "--blas-threads") == 0 && i + 1 < argc) {
            unsigned long long k = 0;
            if (cli_number("--blas-threads", argv[++i], CLI_UINT, &k) != 0 || k < 1 || k > 1024) {
                log_cmd("--blas-threads takes 1 to 1024");
                return 2;
            }
            blas_request_threads((int)k);
        } else if (strcmp(argv[i], "--max-run-memory") == 0 && i + 1 < argc) {
            if (cli_number("--max-run-memory", argv[++i], CLI_BYTES, &max_mem) != 0) return 2;
        } else if (argv[i][0] == '-') {
            log_cmd("unknown or incomplete option '%s' (see --help)", argv[i]);
            return 2;
        } else if (!spec_path) {
            spec_path = argv[i];
        } else {
            log_cmd("more than one spec given ('%s')", argv[i]);
            return 2;
        }
    }
    if (!spec_path) {
        train_usage(stderr);
        return 2;
    }
    if (run_sel && have_seed) {
        log_cmd("--seed does not combine with --run (a planned run has its "
                "own seed; pick the run of that seed)");
        return 2;
    }
    plan_cost_set_memory_limit(max_mem);
    char err[ABL_ERR_MAX];
    char shown[4 * ABL_ERR_MAX]; /* err may quote the spec's strings: shown as plan shows it */
    Spec spec, base_only;
    Plan plan = {0};
    PlanCost *cost = NULL;
    int rc = 2, r = 0;
    if (spec_load(&spec, spec_path, sets, n_sets, err) != 0) goto fail;
    /* Without --run only the base is planned: a grid or variant that the overrides make
     * redundant or invalid is no concern of this command. Planning validates the run, its
     * data, prompt and memory, pointing at the line and column at fault. */
    uint64_t one_seed = have_seed ? seed : spec.seeds[0];
    base_only = spec;
    base_only.n_axes = base_only.n_variants = base_only.n_excludes = 0;
    base_only.axes = NULL;
    base_only.variants = NULL;
    base_only.excludes = NULL;
    base_only.n_seeds = 1;
    base_only.seeds = &one_seed;
    base_only.tune.on = 0; /* the base itself, not its tuning runs */
    if (plan_build(run_sel ? &spec : &base_only, &plan, err) != 0 ||
        !(cost = plan_cost_compute(&plan, err)))
        goto fail;
    if (run_sel && (r = find_run(&plan, run_sel)) < 0) {
        snprintf(err, sizeof err,
                 "ablate train: %s plans no run named or with id '%s' ('ablate plan %s' lists "
                 "them)",
                 spec_path, run_sel, spec_path);
        goto fail;
    }
    /* a tune: sweep's comparison run trains at the value the sweep chooses: here only at a
     * value given with --set */
    for (int k = 0;
         run_sel && spec.tune.on && plan.runs[r].tune_candidate < 0 && k < spec.tune.n_knobs; k++) {
        const SpecMark *m = &spec.base_src[spec.tune.knobs[k] - knob_table];
        if (m->file && !strcmp(m->file, "--set")) continue;
        snprintf(err, sizeof err,
                 "ablate train: run '%s' trains at the %s its tuning runs choose (the sweep's "
                 "/tuning): give it with --set %s=VALUE, or train one of its tuning runs",
                 plan.runs[r].name, spec.tune.knobs[k]->name, spec.tune.knobs[k]->name);
        goto fail;
    }
    /* what a sweep hands its worker: the resolved config and the run's seed */
    RunConfig cfg;
    plan_cost_config(&plan, cost, r, &cfg);
    seed = plan.runs[r].seed;
    if (run_sel) {
        char name[1024]; /* a grid value is any string: shown as `ablate plan` shows it */
        log_info("run %s (id %s)", text_escape(plan.runs[r].name, name, sizeof name),
                 plan.runs[r].id);
    }
    free(cost);
    plan_free(&plan);
    spec_free(&spec);

    blas_set_threads();
    blas_warn_threads("ablate train");
    Dataset data;
    if (dataset_load(&data, &cfg.data, cfg.model.context, err) != 0) {
        log_cmd("%s", err);
        return 2;
    }
    if (calibrate(&cfg, (uint64_t)seed, &data, err) != 0) {
        log_cmd("%s", err);
        dataset_free(&data);
        return 2;
    }
    Trainer t;
    if (trainer_init(&t, &cfg, (uint64_t)seed, &data, err) != 0) {
        log_cmd("%s", err);
        dataset_free(&data);
        return 2;
    }
    JsonSink js;
    ProgressSink ps;
    json_sink_init(&js, stdout);
    progress_sink_init(&ps, stderr, t.total_steps);
    EndEvent end;
    TrainControl ctl = {json_failed, &js, NULL, NULL};
    RunStatus st = trainer_run(&t, json ? &js.base : &ps.base, &ctl, &end);
    trainer_free(&t);
    dataset_free(&data);
    if (js.write_errno) { /* a full disk, or the reader went away (SIGPIPE ignored) */
        log_cmd("cannot write the --json output: %s", strerror(js.write_errno));
        return 1;
    }
    return st == RUN_DONE ? 0 : 1;
fail:
    log_line("%s", text_escape(err, shown, sizeof shown));
    free(cost);
    plan_free(&plan);
    spec_free(&spec);
    return rc;
}
