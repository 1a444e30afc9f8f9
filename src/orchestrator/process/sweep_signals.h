/* Signal flags of a sweep process. SIGINT (Ctrl-C) and SIGHUP (a closed terminal) act as
 * SIGUSR1 does on the process that gets them; a second one acts as SIGTERM. SIGUSR1 (SLURM's
 * warning before a time limit or preemption, forwarded to every rank by mpirun/srun): on rank 0,
 * checkpoint the sweep and stop; on a worker, checkpoint the run it holds (rank 0 requeues it).
 * SIGTERM on rank 0: stop now.
 *
 * The handlers are installed before anything else, MPI_Init included: a signal that came
 * during MPI_Init (a preemption 0.3 s after the job started) used to kill the rank, and
 * the SLURM job ended FAILED instead of being requeued. main() blocks both signals before
 * anything else, because it may re-exec itself (blas_env.c) and a caught signal's handler
 * does not survive exec while a blocked one stays pending; `ablate run` installs its
 * handlers and unblocks, every other command just unblocks. */
#ifndef ABLATE_ORCHESTRATOR_SWEEP_SIGNALS_H
#define ABLATE_ORCHESTRATOR_SWEEP_SIGNALS_H

/* Blocks / unblocks SIGUSR1, SIGTERM, SIGINT and SIGHUP (see above). */
void sweep_signals_block(void);
void sweep_signals_unblock(void);
/* The four set flags, then they are unblocked; first thing in `ablate run`. A SIGINT or
 * SIGHUP the shell set to be ignored (nohup, `&`) stays ignored. */
void sweep_signals_install(void);
/* Workers end at once on SIGTERM with status 3 (they hold nothing finished); rank 0 keeps
 * the flag to sync the journal before leaving. Call once the rank is known. */
void sweep_signals_for_rank(int rank);

/* Rank 0: has a checkpointing stop (SIGUSR1, a first SIGINT/SIGHUP) / an immediate stop
 * (SIGTERM, a second SIGINT/SIGHUP) been asked for (sticky)? */
int sweep_signal_usr1(void);
int sweep_signal_term(void);
/* Workers: 1 once per SIGUSR1 received, then 0 until the next one, so that a signal
 * affects only the run the worker holds when it acts on it. */
int sweep_signal_take_usr1(void);
/* The last of those signals received ("SIGUSR1" if none), for the log. */
const char *sweep_signal_name(void);

#endif
