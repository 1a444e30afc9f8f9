#include "run_health.h"

#include <math.h>

void run_health_init(RunHealth *h) {
    h->kind = INSTAB_NONE;
    h->step = 0;
    h->loss = NAN;
}

double run_health_limit(int vocab_size) {
    return log((double)(vocab_size > 1 ? vocab_size : 1)) + RUN_HEALTH_MARGIN;
}

int run_health_observe(RunHealth *h, long step, double loss, long warmup_steps, int vocab_size) {
    if (h->kind != INSTAB_NONE) return 0;
    Instability k = INSTAB_NONE;
    if (!isfinite(loss))
        k = INSTAB_NONFINITE;
    else if (step > warmup_steps && loss > run_health_limit(vocab_size))
        k = INSTAB_ABOVE_UNIFORM;
    if (k == INSTAB_NONE) return 0;
    h->kind = k;
    h->step = step;
    h->loss = loss;
    return 1;
}

void run_health_fill_end(const RunHealth *h, EndEvent *end) {
    end->instability = h->kind;
    end->unstable_step = h->step;
    end->unstable_loss = h->loss;
}
