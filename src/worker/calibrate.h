/* Calibrated fixed time (train.calibrate, docs/spec.md): a time budget made a token budget
 * measured once per configuration, so that what a run trains does not depend on the load of
 * the machine while it trains. A trial times the real optimizer step on one core; the sweep
 * runs them one at a time while every other rank sleeps (docs/architecture.md), journals
 * each (CALIBRATION records), and gives each run
 *     steps = round(median tokens/s x train.seconds / (batch_size x context)), at least 1.
 * The arithmetic is here once: the sweep computes the steps a run trains with it, and the
 * view the steps it shows. */
#ifndef ABLATE_WORKER_CALIBRATE_H
#define ABLATE_WORKER_CALIBRATE_H

#include "data.h"
#include "events.h"
#include "run_config.h"

#define CALIB_WARMUP_STEPS 3 /* untimed steps before a trial's timed ones */
#define CALIB_HOST_MAX     64

/* One timing trial as measured. */
typedef struct {
    double tokens_per_s; /* timed steps' tokens / their training seconds */
    double seconds;      /* training seconds of the timed steps */
    double load1;        /* 1-minute load average (/proc/loadavg) when it ended; NaN unknown */
    int steps;           /* timed steps */
    char host[CALIB_HOST_MAX];
    char blas_core[32];
    char utc[EV_UTC_MAX]; /* when it ended */
} CalibTrial;

/* Times one trial of cfg (train.calibrate_steps after CALIB_WARMUP_STEPS) on data d with
 * seed; 0, or -1 with a message (the model cannot be built). */
int calib_trial(const RunConfig *cfg, uint64_t seed, const Dataset *d, CalibTrial *out,
                char err[ABL_ERR_MAX]);

/* Median (mean of the middle two for an even n), minimum and maximum of x[0..n); NaN for
 * n = 0. x is not modified. */
void calib_summary(const double *x, int n, double *median, double *min, double *max);

/* The calibrated step budget: round(tokens_per_s x seconds / tokens_per_step) (halves away
 * from zero), at least 1;
 * 0 when it cannot be computed (no throughput, no tokens per step). */
long calib_budget_steps(double tokens_per_s, double seconds, long tokens_per_step);

/* The 1-minute load average from /proc/loadavg; NaN where there is none. */
double calib_load1(void);

#endif
