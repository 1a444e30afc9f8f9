#include "calibrate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blas_env.h"
#include "train.h"
#include "util/clock.h"

int calib_trial(const RunConfig *cfg, uint64_t seed, const Dataset *d, CalibTrial *out,
                char err[ABL_ERR_MAX]) {
    memset(out, 0, sizeof *out);
    Trainer t;
    if (trainer_init(&t, cfg, seed, d, err) != 0) return -1;
    int steps = cfg->train.calibrate_steps;
    double seconds = trainer_time_steps(&t, CALIB_WARMUP_STEPS, steps);
    long tokens = (long)steps * t.cfg.train.batch_size * t.cfg.model.context;
    trainer_free(&t);
    out->seconds = seconds;
    out->steps = steps;
    out->tokens_per_s = seconds > 0 ? (double)tokens / seconds : NAN;
    out->load1 = calib_load1();
    gethostname(out->host, sizeof out->host - 1);
    snprintf(out->blas_core, sizeof out->blas_core, "%s", blas_core());
    clock_utc_now(out->utc, sizeof out->utc);
    return 0;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void calib_summary(const double *x, int n, double *median, double *min, double *max) {
    *median = *min = *max = NAN;
    double *s = n > 0 ? malloc(sizeof *s * (size_t)n) : NULL;
    if (!s) return;
    memcpy(s, x, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, by_value);
    *median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    *min = s[0];
    *max = s[n - 1];
    free(s);
}

long calib_budget_steps(double tokens_per_s, double seconds, long tokens_per_step) {
    if (!(tokens_per_s > 0) || !(seconds > 0) || tokens_per_step < 1) return 0;
    double steps = round(tokens_per_s * seconds / (double)tokens_per_step);
    if (!(steps < 9e15)) return 0;
    return steps < 1 ? 1 : (long)steps;
}

double calib_load1(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    double v = NAN;
    if (f) {
        if (fscanf(f, "%lf", &v) != 1) v = NAN;
        fclose(f);
    }
    return v;
}
