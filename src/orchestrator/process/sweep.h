/* `ablate run`: rank 0 plans, dispatches what its scheduler (schedule/scheduler.h) hands
 * out, and journals; worker ranks train. With one rank, rank 0 trains in-process. The
 * journal (OUT.h5.d/journal) is the durable record and OUT.h5 a view rebuilt from it
 * (docs/architecture.md). */
#ifndef ABLATE_ORCHESTRATOR_SWEEP_H
#define ABLATE_ORCHESTRATOR_SWEEP_H

typedef struct {
    const char *spec_path;
    const char *out_path;
    const char *const *sets;
    int n_sets;
    int resume, force;
    double view_interval;    /* seconds between view rebuilds while running */
    double checkpoint_every; /* seconds between periodic checkpoints of each run; 0: none */
    int join;                /* one of many processes on this sweep (join.h) */
    double lease;            /* join: seconds before an unresponsive process's runs are taken */
    int accept_data_change;  /* train on data that differs from the sweep's (data_guard.h) */
    const char *const *expect_data; /* "SHA256=PATH": the data a check saw (data_guard.h) */
    int n_expect_data;
} SweepOptions;

/* Exit statuses of `ablate run` (also what slurm/ablate-sweep.sbatch acts on). */
enum {
    SWEEP_EXIT_OK = 0,      /* every run ended done or diverged */
    SWEEP_EXIT_FAILED = 1,  /* some run failed, or the file could not be written at the end */
    SWEEP_EXIT_USAGE = 2,   /* invalid spec or usage, or the output could not be opened:
                             * nothing was trained */
    SWEEP_EXIT_STOPPED = 3, /* stopped early and resumable: SIGUSR1, SIGTERM, SIGINT, SIGHUP, a full
                             * disk or another journal write error; --resume continues it */
};
#define SWEEP_DEFAULT_CHECKPOINT_EVERY 600.0

/* The exit status above. After SIGTERM the caller must leave without MPI_Finalize. */
int sweep_rank0(const SweepOptions *o, int nranks);
/* The worker loop of ranks > 0; returns when rank 0 says stop. */
int sweep_worker(int rank);

/* Collective: every rank calls it once at start; rank 0 gets the distinct hostnames,
 * comma-separated (malloc'd), the others NULL. */
char *sweep_gather_hostnames(int rank, int nranks);

#endif
