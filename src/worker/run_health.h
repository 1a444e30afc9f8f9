/* The instability rule of a run (docs/metrics.md, "Instability"), checked on every training
 * step's loss in the run itself: a run is flagged at the first step whose loss is not finite
 * (clause nonfinite: the run also ends diverged), or, once the warmup is over (step >
 * train.warmup_steps), exceeds the uniform-guess loss ln V by more than RUN_HEALTH_MARGIN
 * nats (clause above_uniform), or stays far above its own recent level for a while (clause
 * loss_spike, below). A flagged run that ends normally stays `done`: the flag is an outcome
 * to report (a replicate: sweep sets the run's seed index aside and trains the next one),
 * not a reason to hide the run. */
#ifndef ABLATE_WORKER_RUN_HEALTH_H
#define ABLATE_WORKER_RUN_HEALTH_H

#include "events.h"

/* Nats above ln V. At the default init the loss starts within ~0.02 of ln V (the micro
 * model: 4.184 vs ln 65 = 4.174) and only falls after warmup, while batch noise is ~0.1
 * nats; a loss 1 nat above guessing gives the right tokens e times less probability than
 * a uniform guess would: no healthy run gets there, every blown-up run seen did. */
#define RUN_HEALTH_MARGIN 1.0

/* The loss_spike clause. After the warmup the detector follows the training loss with an
 * exponential moving average (the level, span RUN_SPIKE_SPAN steps) and the moving mean
 * absolute deviation from it (the scale: the batch-to-batch noise, ~0.053 nats on the micro
 * recipe). From RUN_SPIKE_SPAN steps after the warmup on, a step whose loss is more than
 * RUN_SPIKE_K scales above the level is "above", and neither the level nor the scale learns
 * from it (a spike must not become the level it is judged against); RUN_SPIKE_STEPS
 * consecutive steps above fire the clause, at the first of them. Why these numbers: over the
 * 287 healthy runs of docs/studies.md's micro studies (1.8 million steps after warmup), no
 * run had more than 3 consecutive steps above 3 scales: 10 is a run whose loss left its
 * trend, not a hard batch (docs/metrics.md). */
#define RUN_SPIKE_SPAN  50
#define RUN_SPIKE_K     3.0
#define RUN_SPIKE_STEPS 10

typedef struct {
    Instability kind; /* INSTAB_NONE until the rule fires; then the first clause that fired */
    long step;        /* the step it fired at (0: never) */
    double loss;      /* that step's loss (NaN: never) */
    /* the loss_spike detector's state (kept in checkpoints: a resumed run flags as one never
     * stopped) */
    double level, scale; /* the moving average and mean absolute deviation */
    long seen;           /* steps after the warmup that updated them */
    long above;          /* consecutive steps above, the current excursion's length */
    long above_step;     /* its first step */
    double above_loss;   /* that step's loss */
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
