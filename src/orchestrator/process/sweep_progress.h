/* Progress of a sweep on rank 0: one updating line on a terminal, one line per finished
 * run otherwise (SLURM logs). */
#ifndef ABLATE_ORCHESTRATOR_SWEEP_PROGRESS_H
#define ABLATE_ORCHESTRATOR_SWEEP_PROGRESS_H

#include "worker/events.h"

typedef struct {
    int total, finished, failed, diverged, running;
    double start, cost_left, cost_done;
    double best;
    char best_name[128];
    int tty;
    char contrasts[512]; /* a replicate: sweep's contrasts ("" none): each one's state */
    int eta_upper;       /* a replicate: sweep: the ETA counts every run it may still need */
} Progress;

void progress_init(Progress *p, int total, int finished_before, double cost_to_run);
void progress_run_started(Progress *p);
void progress_run_stopped(Progress *p); /* checkpointed or aborted */
void progress_run_finished(Progress *p, const char *name, const EndEvent *end, double cost);
/* A run another process of a joined sweep finished (it counts, but not for our speed). */
void progress_run_elsewhere(Progress *p, double cost);
void progress_finish(Progress *p);

#endif
