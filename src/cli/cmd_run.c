/* ablate run SPEC.yaml -o OUT.h5 [--resume] [--force] [--set key=value ...] */
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "orchestrator/sweep.h"
#include "orchestrator/sweep_signals.h"

static void run_usage(FILE *f) {
    fprintf(
        f,
        "usage: [mpirun -n N] ablate run SPEC.yaml -o OUT.h5 [--resume] [--force]\n"
        "           [--set key=value ...] [--view-interval S] [--checkpoint-every S]\n\n"
        "Plans every run of the spec, trains them on the MPI worker ranks (in-process\n"
        "with one rank) and gathers everything into OUT.h5. The durable record is the\n"
        "journal in OUT.h5.d/; OUT.h5 is rebuilt from it while the sweep runs and at the end.\n\n"
        "  -o OUT.h5             the results file (required)\n"
        "  --resume              continue the sweep recorded in OUT.h5.d (a plan that only adds\n"
        "                        runs is accepted); starts fresh when there is nothing to resume\n"
        "  --force               overwrite an existing OUT.h5 and its journal (refused while\n"
        "                        another sweep is writing them)\n"
        "  --set key=value       override a base knob (repeatable)\n"
        "  --view-interval S     rebuild OUT.h5 at most every S seconds while running (30)\n"
        "  --checkpoint-every S  checkpoint each run every S seconds of its training, so that\n"
        "                        kill -9, a node failure or scancel loses at most that much\n"
        "                        (%.0f; 0 = only on SIGUSR1)\n\n"
        "Signals: SIGUSR1 to rank 0 (or mpirun) checkpoints the runs in progress and stops;\n"
        "SIGUSR1 to one worker checkpoints its run, which goes back to the queue; SIGTERM\n"
        "stops at once (finished runs are kept).\n"
        "Exit status: 0 every run ended done or diverged; 1 a run failed (or OUT.h5 could\n"
        "not be written at the end); 2 invalid spec or usage, nothing trained; 3 stopped\n"
        "early and resumable (SIGUSR1, SIGTERM, a full disk): run again with --resume.\n",
        SWEEP_DEFAULT_CHECKPOINT_EVERY);
}

/* A number of seconds >= 0, all of the argument (no "banana", no "5x"). */
static int parse_seconds(const char *opt, const char *v, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x) || x < 0) {
        fprintf(stderr, "ablate run: %s: '%s' is not a number of seconds >= 0\n", opt, v);
        return -1;
    }
    *out = x;
    return 0;
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
        fprintf(stderr, "ablate: warning: cannot write ABLATE_READY_FILE %s\n", path);
}

int cmd_run(int argc, char **argv) {
    /* before anything else, MPI_Init included: a SIGUSR1 that arrives while MPI starts
     * (a preemption right after the job began) must not kill the rank */
    sweep_signals_install();
    SweepOptions o;
    memset(&o, 0, sizeof o);
    o.checkpoint_every = SWEEP_DEFAULT_CHECKPOINT_EVERY;
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
            bad |= parse_seconds(argv[i], argv[i + 1], &o.view_interval) != 0;
            i++;
        } else if (!strcmp(argv[i], "--checkpoint-every") && i + 1 < argc) {
            bad |= parse_seconds(argv[i], argv[i + 1], &o.checkpoint_every) != 0;
            i++;
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
