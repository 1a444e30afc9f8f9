/* `ablate run`: rank 0 plans, schedules and journals; worker ranks train. With one rank,
 * rank 0 trains in-process. The journal (OUT.h5.d/journal) is the durable record and
 * OUT.h5 a view rebuilt from it (docs/architecture.md). */
#ifndef ABLATE_ORCHESTRATOR_SWEEP_H
#define ABLATE_ORCHESTRATOR_SWEEP_H

typedef struct {
    const char *spec_path;
    const char *out_path;
    const char *const *sets;
    int n_sets;
    int resume, force;
    double view_interval; /* seconds between view rebuilds while running */
} SweepOptions;

/* Exit status: 0 every run finished (done or diverged) or the sweep checkpointed on
 * SIGUSR1; 1 some run failed or I/O failed; 2 invalid spec or usage; 143 SIGTERM. */
int sweep_rank0(const SweepOptions *o, int nranks);
/* The worker loop of ranks > 0; returns when rank 0 says stop. */
int sweep_worker(int rank);

/* Collective: every rank calls it once at start; rank 0 gets the distinct hostnames,
 * comma-separated (malloc'd), the others NULL. */
char *sweep_gather_hostnames(int rank, int nranks);

/* Installs the SIGUSR1 (checkpoint and stop) handler, and on rank 0 the SIGTERM (sync the
 * journal, stop now) handler. */
void sweep_install_signals(int rank);

#endif
