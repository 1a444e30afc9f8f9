/* ablate run SPEC.yaml -o OUT.h5 [--resume] [--force] [--set key=value ...] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "cli_util.h"
#include "commands.h"
#include "orchestrator/plan/plan_cost.h"
#include "orchestrator/schedule/join.h"
#include "orchestrator/process/sweep.h"
#include "orchestrator/process/sweep_signals.h"
#include "worker/blas_env.h"

static void run_usage(FILE *f) {
    fprintf(
        f,
        "usage: [mpirun -n N] ablate run SPEC.yaml -o OUT.h5 [--resume | --force | --join]\n"
        "           [--set key=value ...] [--view-interval S] [--checkpoint-every S]\n"
        "           [--max-run-memory SIZE] [--blas-threads K] [--lease S]\n\n"
        "Plans every run of the spec, trains them on the MPI worker ranks (in-process\n"
        "with one rank) and gathers everything into OUT.h5. The durable record is the\n"
        "journal in OUT.h5.d/; OUT.h5 is rebuilt from it while the sweep runs and at the end.\n\n"
        "  -o OUT.h5              the results file (required; refused when it, or OUT.h5.d/,\n"
        "                         is the spec or a data file or holds one)\n"
        "  --resume               continue the sweep recorded in OUT.h5.d (a plan that only\n"
        "                         adds runs is accepted); starts fresh when there is nothing\n"
        "                         to resume\n"
        "  --force                overwrite an existing OUT.h5 and its journal (refused while\n"
        "                         another sweep is writing them)\n"
        "  --join                 one of any number of processes on this sweep (array tasks,\n"
        "                         separate jobs, each its own mpirun/srun): each run is\n"
        "                         trained by one of them; each keeps its own journal in\n"
        "                         OUT.h5.d/join/; starts the sweep or joins it; every process\n"
        "                         must plan the same runs (same spec and --set) on the same\n"
        "                         data\n"
        "  --accept-data-change   with --resume or --join: accept data that differs from what\n"
        "                         the sweep trained on so far (refused otherwise, exit 2):\n"
        "                         unfinished runs restart on the new data, and /runs puts\n"
        "                         runs of different data in different groups\n"
        "  --expect-data SHA256=PATH\n"
        "                         the data file PATH the spec plans must have this SHA-256\n"
        "                         (refused otherwise, exit 2, nothing written): the data a\n"
        "                         check made before the sweep saw (slurm/submit passes it to\n"
        "                         its jobs); repeatable\n"
        "  --lease S              with --join: runs of a process that stops renewing its\n"
        "                         heartbeat (hung, or its node is gone) are taken over after S\n"
        "                         seconds (%.0f); a process that exits or is killed is seen at "
        "once\n"
        "  --set key=value        override a base knob (repeatable)\n"
        "  --view-interval S      rebuild OUT.h5 at most every S seconds while running (30)\n"
        "  --checkpoint-every S   checkpoint each run every S seconds of its training, so that\n"
        "                         kill -9, a node failure or scancel loses at most that much\n"
        "                         (%.0f; 0 = only on SIGUSR1)\n"
        "  --max-run-memory SIZE  refuse, before anything is written, a run that needs more\n"
        "                         memory than SIZE (e.g. 16G; default 80%% of physical memory)\n"
        "  --blas-threads K       threads per run, OpenBLAS's and the model's (1; e.g. SLURM's\n"
        "                         --cpus-per-task).\n"
        "                         Results are bit-identical only between runs with the same K\n\n"
        "Signals: SIGUSR1 to rank 0 (or mpirun) checkpoints the runs in progress and stops;\n"
        "SIGUSR1 to one worker checkpoints its run, which goes back to the queue; SIGTERM\n"
        "stops at once (finished runs are kept). With ABLATE_READY_FILE set, rank 0 creates\n"
        "that file once every rank can take SIGUSR1 (launchers forward it only then).\n"
        "Exit status: 0 every run ended done or diverged; 1 a run failed (or OUT.h5 could\n"
        "not be written at the end); 2 invalid spec or usage, nothing trained; 3 stopped\n"
        "early and resumable (SIGUSR1, SIGTERM, a full disk): run again with --resume (or\n"
        "--join). A joined process exits 0 once the whole sweep is complete: it stays while\n"
        "other processes hold runs, to take them over should they die.\n",
        JOIN_DEFAULT_LEASE, SWEEP_DEFAULT_CHECKPOINT_EVERY);
}

/* ABLATE_READY_FILE: created once every rank has its signal handlers (after MPI_Init and
 * a barrier). A launcher forwards SIGUSR1 only after that: Open MPI's own start (orted's
 * fork before the exec of a rank) has a window in which a forwarded signal kills the rank,
 * and no code of ablate's runs there (slurm/ablate-sweep.sbatch waits for this file). */
static void announce_ready(int rank) {
    const char *path = getenv("ABLATE_READY_FILE");
    if (!path || !path[0]) return;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0) return;
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0)
        log_warn("cannot write ABLATE_READY_FILE %s", path);
}

int cmd_run(int argc, char **argv) {
    /* before anything else, MPI_Init included: a SIGUSR1 that arrives while MPI starts
     * (a preemption right after the job began) must not kill the rank */
    sweep_signals_install();
    SweepOptions o;
    memset(&o, 0, sizeof o);
    o.checkpoint_every = SWEEP_DEFAULT_CHECKPOINT_EVERY;
    const char *sets[256], *expect[64];
    int n_expect = 0;
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
        } else if (!strcmp(argv[i], "--join")) {
            o.join = 1;
        } else if (!strcmp(argv[i], "--accept-data-change")) {
            o.accept_data_change = 1;
        } else if (!strcmp(argv[i], "--expect-data") && i + 1 < argc && n_expect < 64) {
            expect[n_expect++] = argv[++i];
        } else if (!strcmp(argv[i], "--lease") && i + 1 < argc) {
            bad |= cli_number("--lease", argv[++i], CLI_SECONDS, &o.lease);
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc && o.n_sets < 256) {
            sets[o.n_sets++] = argv[++i];
        } else if (!strcmp(argv[i], "--view-interval") && i + 1 < argc) {
            bad |= cli_number("--view-interval", argv[++i], CLI_SECONDS, &o.view_interval);
        } else if (!strcmp(argv[i], "--checkpoint-every") && i + 1 < argc) {
            if (!strcmp(argv[++i], "0")) /* only on SIGUSR1 */
                o.checkpoint_every = 0;
            else
                bad |= cli_number("--checkpoint-every", argv[i], CLI_SECONDS, &o.checkpoint_every);
        } else if (!strcmp(argv[i], "--blas-threads") && i + 1 < argc) {
            unsigned long long k = 0;
            if (cli_number("--blas-threads", argv[++i], CLI_UINT, &k) != 0 || k < 1 || k > 1024) {
                log_cmd("--blas-threads takes 1 to 1024");
                bad = 1;
            }
            blas_request_threads((int)k);
        } else if (!strcmp(argv[i], "--max-run-memory") && i + 1 < argc) {
            double max_mem = 0;
            bad |= cli_number("--max-run-memory", argv[++i], CLI_BYTES, &max_mem);
            plan_cost_set_memory_limit(max_mem);
        } else if (argv[i][0] != '-' && !o.spec_path) {
            o.spec_path = argv[i];
        } else {
            log_cmd("unexpected argument '%s' (see --help)", argv[i]);
            bad = 1;
        }
    }
    o.sets = sets;
    o.expect_data = expect;
    o.n_expect_data = n_expect;
    if (!bad && o.join && o.force) {
        log_cmd("--join cannot be combined with --force (every joined process "
                "would start the sweep over); remove the output first, or use --force "
                "without --join");
        bad = 1;
    }
    if (!bad && o.lease > 0 && !o.join) {
        log_cmd("--lease applies to --join only");
        bad = 1;
    }
    if (!bad && o.accept_data_change && !o.resume && !o.join) {
        log_cmd("--accept-data-change applies to --resume and --join only (a "
                "new sweep has no data to differ from)");
        bad = 1;
    }
    if (!bad && (!o.spec_path || !o.out_path)) {
        log_cmd("%s", !o.spec_path ? "no spec given" : "-o OUT.h5 is required");
        bad = 1;
    }
    size_t out_len = o.out_path ? strlen(o.out_path) : 1;
    if (!bad && (out_len == 0 || o.out_path[out_len - 1] == '/')) {
        /* "" would write ./.d/ and "dir/" dir/.d/: the results file needs a name */
        log_cmd("-o needs a file name for the results, got '%s'", o.out_path);
        bad = 1;
    }
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (bad) {
        if (rank == 0) run_usage(stderr);
        MPI_Finalize();
        return SWEEP_EXIT_USAGE;
    }
    sweep_signals_for_rank(rank);
    announce_ready(rank);
    int rc = rank == 0 ? sweep_rank0(&o, nranks) : sweep_worker(rank);
    if (rank == 0 && sweep_signal_term()) { /* no collective shutdown: leave now */
        fflush(NULL);
        _Exit(rc);
    }
    MPI_Finalize();
    return rc;
}
