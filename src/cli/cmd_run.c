/* ablate run SPEC.yaml -o OUT.h5 [--resume] [--force] [--set key=value ...] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "orchestrator/plan_cost.h"
#include "orchestrator/sweep.h"

static void run_usage(FILE *f) {
    fprintf(
        f,
        "usage: [mpirun -n N] ablate run SPEC.yaml -o OUT.h5 [--resume] [--force]\n"
        "                                 [--set key=value ...] [--view-interval S]\n"
        "                                 [--max-run-memory SIZE]\n\n"
        "Plans every run of the spec, trains them on the MPI worker ranks (in-process\n"
        "with one rank) and gathers everything into OUT.h5. The durable record is the\n"
        "journal in OUT.h5.d/; OUT.h5 is rebuilt from it while the sweep runs and at the end.\n\n"
        "  -o OUT.h5          the results file (required)\n"
        "  --resume           continue the sweep recorded in OUT.h5.d (a plan that only adds\n"
        "                     runs is accepted); starts fresh when there is nothing to resume\n"
        "  --force            overwrite an existing OUT.h5 and its journal\n"
        "  --set key=value    override a base knob (repeatable)\n"
        "  --view-interval S  rebuild OUT.h5 at most every S seconds while running (30)\n"
        "  --max-run-memory SIZE  refuse, before anything is written, a run that needs more\n"
        "                     memory than SIZE (e.g. 16G; default 80%% of physical memory)\n\n"
        "Signals: SIGUSR1 checkpoints the runs in progress and exits 0 (resume later);\n"
        "SIGTERM stops at once (finished runs are kept).\n"
        "Exit status: 0 all runs finished (done or diverged) or checkpointed on SIGUSR1,\n"
        "1 a run failed or I/O failed, 2 invalid spec or usage.\n");
}

int cmd_run(int argc, char **argv) {
    SweepOptions o;
    memset(&o, 0, sizeof o);
    const char *sets[256];
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            run_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            o.out_path = argv[++i];
        } else if (!strcmp(argv[i], "--resume")) {
            o.resume = 1;
        } else if (!strcmp(argv[i], "--force")) {
            o.force = 1;
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc && o.n_sets < 256) {
            sets[o.n_sets++] = argv[++i];
        } else if (!strcmp(argv[i], "--view-interval") && i + 1 < argc) {
            bad |= cli_number("run", "--view-interval", argv[++i], CLI_SECONDS, &o.view_interval);
        } else if (!strcmp(argv[i], "--max-run-memory") && i + 1 < argc) {
            double max_mem = 0;
            bad |= cli_number("run", "--max-run-memory", argv[++i], CLI_BYTES, &max_mem);
            plan_cost_set_memory_limit(max_mem);
        } else if (argv[i][0] != '-' && !o.spec_path) {
            o.spec_path = argv[i];
        } else {
            fprintf(stderr, "ablate run: unexpected argument '%s' (see --help)\n", argv[i]);
            bad = 1;
        }
    }
    o.sets = sets;
    if (!bad && (!o.spec_path || !o.out_path)) {
        fprintf(stderr, "ablate run: %s\n",
                !o.spec_path ? "no spec given" : "-o OUT.h5 is required");
        bad = 1;
    }
    size_t out_len = o.out_path ? strlen(o.out_path) : 1;
    if (!bad && (out_len == 0 || o.out_path[out_len - 1] == '/')) {
        /* "" would write ./.d/ and "dir/" dir/.d/: the results file needs a name */
        fprintf(stderr, "ablate run: -o needs a file name for the results, got '%s'\n", o.out_path);
        bad = 1;
    }
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (bad) {
        if (rank == 0) run_usage(stderr);
        MPI_Finalize();
        return 2;
    }
    sweep_install_signals(rank);
    int rc = rank == 0 ? sweep_rank0(&o, nranks) : sweep_worker(rank);
    if (rc == 143) { /* SIGTERM: no collective shutdown, leave now */
        fflush(NULL);
        _Exit(143);
    }
    MPI_Finalize();
    return rc;
}
