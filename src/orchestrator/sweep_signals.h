/* Signal flags of a sweep process. SIGUSR1 (SLURM's warning before a time limit or
 * preemption, forwarded to every rank by mpirun): checkpoint and stop. SIGTERM: stop now. */
#ifndef ABLATE_ORCHESTRATOR_SWEEP_SIGNALS_H
#define ABLATE_ORCHESTRATOR_SWEEP_SIGNALS_H

int sweep_signal_usr1(void);
int sweep_signal_term(void);

#endif
