/* The instability rule of a run (docs/metrics.md, "Instability"), checked on every training
 * step's loss in the run itself: a run is flagged at the first step whose loss is not finite
 * (clause nonfinite: the run also ends diverged) or, once the warmup is over (step >
 * train.warmup_steps), exceeds the uniform-guess loss ln V by more than RUN_HEALTH_MARGIN
 * nats (clause above_uniform). A flagged run that ends normally stays `done`: the flag is
 * an outcome to report, not a reason to drop the run. */
#ifndef ABLATE_WORKER_RUN_HEALTH_H
#define ABLATE_WORKER_RUN_HEALTH_H

#include "events.h"

/* Nats above ln V. At the default init the loss starts within ~0.02 of ln V (the micro
 * model: 4.184 vs ln 65 = 4.174) and only falls after warmup, while batch noise is ~0.1
 * nats; a loss 1 nat above guessing gives the right tokens e times less probability than
 * a uniform guess would: no healthy run gets there, every blown-up run seen did. */
#define RUN_HEALTH_MARGIN 1.0

typedef struct {
    Instability kind; /* INSTAB_NONE until the rule fires; then the first clause that fired */
    long step;        /* the step it fired at (0: never) */
    double loss;      /* that step's loss (NaN: never) */
} RunHealth;

void run_health_init(RunHealth *h);
/* ln V + RUN_HEALTH_MARGIN: the loss above which a run after warmup is flagged. */
double run_health_limit(int vocab_size);
/* Checks one step's training loss (NaN for a non-finite gradient) against the rule; the
 * first firing is kept. Returns 1 if the rule fired at this step for the first time. */
int run_health_observe(RunHealth *h, long step, double loss, long warmup_steps, int vocab_size);
/* Copies the verdict into the end event's instability fields. */
void run_health_fill_end(const RunHealth *h, EndEvent *end);

#endif
