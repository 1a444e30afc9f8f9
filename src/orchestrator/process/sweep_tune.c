/* Rank 0's side of a tune: sweep (docs/spec.md, "tune"; the policy is schedule/tune.c): a
 * configuration's choice sets its comparison runs' configs, is journaled once (with a PLAN
 * record of each comparison run at the chosen value, so the journal, the view and a resume
 * show what the run trains) and said on the log. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "orchestrator/plan/spec_tune.h"
#include "util/log.h"
#include "sweep_internal.h"

/* "train.lr=0.01 warmup_steps=10" of candidate c (the knobs' short names after the first). */
static void values_text(const JournalTune *t, int c, char *out, size_t n) {
    size_t len = 0;
    out[0] = '\0';
    for (int k = 0; k < t->n_knobs && len < n; k++)
        len += (size_t)snprintf(out + len, n - len, "%s%s=%s", k ? " " : "", t->knob[k],
                                t->value[c][k]);
}

int host_tuned(void *ctx, const JournalTune *t) {
    Sweep *s = ctx;
    const SpecTune *tu = &s->spec.tune;
    int per = plan_runs_per_config(&s->spec), n_tuning = tu->n_candidates * tu->n_seeds;
    if (t->config < 0 || (t->config + 1) * per > s->plan.n_runs) return -1;
    int base = t->config * per;
    for (int i = n_tuning; i < per; i++)
        spec_tune_apply(tu, t->chosen, &s->plan.runs[base + i].cfg);
    for (int i = 0; i < s->n_tunes_journaled; i++) {
        const JournalTune *o = &s->tunes_journaled[i];
        if (o->config != t->config || strcmp(o->name, t->name)) continue;
        if (!journal_tune_same(o, t))
            log_warn("tune: %s: the tuning runs' results differ from the journal's choice (%s "
                     "then, %s now): their results changed",
                     t->name, o->value[o->chosen][0], t->value[t->chosen][0]);
        return 0; /* journaled by a session before, with its comparison runs' PLAN records */
    }
    if (s->stop == STOP_IO) return -1;
    for (int k = 0; k < s->n; k++) {
        SweepRun *r = &s->runs[k];
        if (r->dead || r->plan_later || r->pr < s->plan.runs + base + n_tuning ||
            r->pr >= s->plan.runs + base + per)
            continue;
        RunConfig cfg;
        run_config(s, r, &cfg);
        if (journal_append_plan2(s->j, (uint32_t)k, r->pr->id, r->pr->name, r->pr->seed, &cfg,
                                 r->pr->overrides) != 0) {
            stop_journal(s);
            return -1;
        }
    }
    if (journal_append_tune(s->j, t) != 0 || journal_sync(s->j) != 0) {
        stop_journal(s);
        return -1;
    }
    char chosen[SPEC_TUNE_MAX_KNOBS * (2 * JOURNAL_TUNE_TEXT_MAX + 2)];
    values_text(t, t->chosen, chosen, sizeof chosen);
    int finite = 0;
    for (int c = 0; c < t->n_cand; c++)
        finite += isfinite(t->metric[c]) != 0;
    log_info("tune: %s: %s, validation loss %.4f (mean of %d tuning seed(s); %d of %d "
             "candidates trained without diverging); its comparison runs train at it",
             t->name[0] ? t->name : "baseline", chosen, t->metric[t->chosen], t->seeds[t->chosen],
             finite, t->n_cand);
    return 0;
}
