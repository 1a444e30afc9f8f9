#include "run_health.h"

#include <math.h>

void run_health_init(RunHealth *h) {
    *h = (RunHealth){.kind = INSTAB_NONE, .loss = NAN, .above_loss = NAN};
}

/* The loss_spike clause's detector (run_health.h) on one finite loss after the warmup: 1 if
 * this step completes RUN_SPIKE_STEPS consecutive steps above the level. */
static int spike_observe(RunHealth *h, long step, double loss) {
    if (h->seen == 0) { /* the first step after the warmup starts the level */
        h->level = loss;
        h->scale = 0;
        h->seen = 1;
        return 0;
    }
    double e = loss - h->level;
    if (h->seen > RUN_SPIKE_SPAN && e > RUN_SPIKE_K * h->scale) {
        if (h->above++ == 0) {
            h->above_step = step;
            h->above_loss = loss;
        }
        return h->above >= RUN_SPIKE_STEPS;
    }
    const double a = 2.0 / (RUN_SPIKE_SPAN + 1);
    h->above = 0;
    h->level += a * e;
    h->scale += a * (fabs(e) - h->scale);
    h->seen++;
    return 0;
}

double run_health_limit(int vocab_size) {
    return log((double)(vocab_size > 1 ? vocab_size : 1)) + RUN_HEALTH_MARGIN;
}

int run_health_observe(RunHealth *h, long step, double loss, long warmup_steps, int vocab_size) {
    if (h->kind != INSTAB_NONE) return 0;
    Instability k = INSTAB_NONE;
    long at = step;
    if (!isfinite(loss))
        k = INSTAB_NONFINITE;
    else if (step > warmup_steps && loss > run_health_limit(vocab_size))
        k = INSTAB_ABOVE_UNIFORM;
    else if (step > warmup_steps && spike_observe(h, step, loss)) {
        k = INSTAB_LOSS_SPIKE; /* from the excursion's first step */
        at = h->above_step;
        loss = h->above_loss;
    }
    if (k == INSTAB_NONE) return 0;
    h->kind = k;
    h->step = at;
    h->loss = loss;
    return 1;
}

void run_health_fill_end(const RunHealth *h, EndEvent *end) {
    end->instability = h->kind;
    end->unstable_step = h->step;
    end->unstable_loss = h->loss;
}
