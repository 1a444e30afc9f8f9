/* ablate train SPEC.yaml [--set key=value ...] [--seed N] [--json] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "orchestrator/plan.h"
#include "worker/blas_env.h"
#include "worker/sinks.h"
#include "worker/train.h"

static void train_usage(FILE *f) {
    fprintf(f, "usage: ablate train SPEC.yaml [--set key=value ...] [--seed N] [--json]\n\n"
               "Trains the spec's base run (grid, variants and seeds are ignored) and reports\n"
               "progress on stderr; --json prints one JSON object per event on stdout instead.\n\n"
               "  --set key=value  override a knob (repeatable), e.g. --set model.n_head=8\n"
               "  --seed N         run seed (default: the spec's first seed)\n"
               "  --json           JSON Lines on stdout: start, step, eval, act, sample, end\n\n"
               "Knobs (defaults shown; see docs/spec.md):\n");
    cli_print_knobs(f);
}

int cmd_train(int argc, char **argv) {
    const char *spec_path = NULL;
    const char *sets[256];
    int n_sets = 0, json = 0, have_seed = 0;
    unsigned long long seed = 0;
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
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            if (cli_parse_u64(argv[++i], &seed) != 0) {
                fprintf(stderr, "ablate train: --seed expects a non-negative integer, got '%s'\n",
                        argv[i]);
                return 2;
            }
            have_seed = 1;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "ablate train: unknown or incomplete option '%s' (see --help)\n",
                    argv[i]);
            return 2;
        } else if (!spec_path) {
            spec_path = argv[i];
        } else {
            fprintf(stderr, "ablate train: more than one spec given ('%s')\n", argv[i]);
            return 2;
        }
    }
    if (!spec_path) {
        train_usage(stderr);
        return 2;
    }
    char err[ABL_ERR_MAX];
    Spec spec;
    Plan plan = {0};
    /* planning validates every run with the line and column that made it invalid */
    if (spec_load(&spec, spec_path, sets, n_sets, err) != 0 || plan_build(&spec, &plan, err) != 0) {
        fprintf(stderr, "%s\n", err);
        spec_free(&spec);
        return 2;
    }
    plan_free(&plan);
    if (!have_seed) seed = spec.n_seeds > 0 ? spec.seeds[0] : 0;
    RunConfig cfg = spec.base;
    spec_free(&spec);

    blas_set_threads();
    Dataset data;
    if (dataset_load(&data, &cfg.data, cfg.model.context, err) != 0) {
        fprintf(stderr, "ablate train: %s\n", err);
        return 2;
    }
    Trainer t;
    if (trainer_init(&t, &cfg, seed, &data, err) != 0) {
        fprintf(stderr, "ablate train: %s\n", err);
        dataset_free(&data);
        return 2;
    }
    JsonSink js;
    ProgressSink ps;
    json_sink_init(&js, stdout);
    progress_sink_init(&ps, stderr, t.total_steps);
    EndEvent end;
    RunStatus st = trainer_run(&t, json ? &js.base : &ps.base, NULL, &end);
    trainer_free(&t);
    dataset_free(&data);
    return st == RUN_DONE ? 0 : 1;
}
