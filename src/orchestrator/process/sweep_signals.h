/* Signal flags of a sweep process. SIGUSR1 (SLURM's warning before a time limit or
 * preemption, forwarded to every rank by mpirun/srun): on rank 0, checkpoint the sweep and
 * stop; on a worker, checkpoint the run it holds (rank 0 requeues it). SIGTERM on rank 0:
 * stop now.
 *
 * The handlers are installed before anything else, MPI_Init included: a signal that came
 * during MPI_Init (a preemption 0.3 s after the job started) used to kill the rank, and
 * the SLURM job ended FAILED instead of being requeued. main() blocks both signals before
 * anything else, because it may re-exec itself (blas_env.c) and a caught signal's handler
 * does not survive exec while a blocked one stays pending; `ablate run` installs its
 * handlers and unblocks, every other command just unblocks. */
#ifndef ABLATE_ORCHESTRATOR_SWEEP_SIGNALS_H
#define ABLATE_ORCHESTRATOR_SWEEP_SIGNALS_H

/* Blocks / unblocks SIGUSR1 and SIGTERM (see above). */
void sweep_signals_block(void);
void sweep_signals_unblock(void);
/* SIGUSR1 and SIGTERM set flags, then both are unblocked; first thing in `ablate run`. */
void sweep_signals_install(void);
/* Workers keep SIGTERM's default (die at once: they hold nothing finished); rank 0 keeps
 * the flag to sync the journal before leaving. Call once the rank is known. */
void sweep_signals_for_rank(int rank);

/* Rank 0: has SIGUSR1 / SIGTERM arrived (sticky)? */
int sweep_signal_usr1(void);
int sweep_signal_term(void);
/* Workers: 1 once per SIGUSR1 received, then 0 until the next one, so that a signal
 * affects only the run the worker holds when it acts on it. */
int sweep_signal_take_usr1(void);

#endif
