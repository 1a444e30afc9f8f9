/* Calibrated fixed time in a sweep (worker/calibrate.h, docs/spec.md): the configurations
 * whose runs have train.calibrate, their trials timed one at a time before any run (in line on
 * one process, by the dispatch loop on many) and journaled, and the budget each gives. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "orchestrator/plan/run_id.h"
#include "sweep_signals.h"
#include "sweep_internal.h"

/* A run's configuration name: its name without the last "/seedN" segment. */
static void config_name(const char *name, char *out, size_t n) {
    const char *slash = strrchr(name, '/');
    const char *seg = slash ? slash + 1 : name;
    size_t len = strncmp(seg, "seed", 4) == 0 ? (size_t)(slash ? slash - name : 0) : strlen(name);
    snprintf(out, n, "%.*s", (int)len, len ? name : "(base)");
}

/* Once every trial of a configuration is in: its budget, said once. */
static void calib_complete(Sweep *s, CalibGroup *c, int say) {
    for (int i = 0; i < c->k; i++)
        if (!c->have[i]) return;
    const RunConfig *cfg = &s->runs[c->rep].pr->cfg; /* train and context: as planned */
    double med, lo, hi;
    calib_summary(c->tps, c->k, &med, &lo, &hi);
    long per_step = (long)cfg->train.batch_size * cfg->model.context;
    c->steps = calib_budget_steps(med, cfg->train.seconds, per_step);
    if (say)
        log_info("calibration: %s: median %.1f tokens/s (min %.1f, max %.1f, %d trials) x %g s / "
                 "%ld tokens a step = %ld steps",
                 c->config, med, lo, hi, c->k, cfg->train.seconds, per_step, c->steps);
}

/* The configurations to calibrate (those of unfinished runs with train.calibrate > 0), with
 * the trials an earlier session journaled: those are never timed again. */
int calib_setup(Sweep *s, const ResumeState *rs) {
    for (int i = 0; i < s->n; i++)
        s->runs[i].calib = -1;
    for (int i = 0; i < s->n; i++) {
        SweepRun *r = &s->runs[i];
        if (r->dead || r->finished || !(r->pr->cfg.train.seconds > 0) ||
            r->pr->cfg.train.calibrate <= 0)
            continue;
        char group[RUN_ID_CHARS];
        RunConfig cfg;
        run_config(s, r, &cfg);
        run_id_format(run_id_hash(&cfg, NULL), group);
        int g = 0;
        while (g < s->n_calib && strcmp(s->calib[g].group, group))
            g++;
        if (g == s->n_calib) {
            CalibGroup *ng = realloc(s->calib, sizeof *ng * (size_t)(s->n_calib + 1));
            if (!ng) return -1;
            s->calib = ng;
            CalibGroup *c = &s->calib[s->n_calib++];
            memset(c, 0, sizeof *c);
            memcpy(c->group, group, sizeof group);
            config_name(r->pr->name, c->config, sizeof c->config);
            c->rep = i;
            c->k = r->pr->cfg.train.calibrate;
            c->tps = calloc((size_t)c->k, sizeof *c->tps);
            c->have = calloc((size_t)c->k, 1);
            if (!c->tps || !c->have) return -1;
            for (int j = 0; j < rs->n_calib; j++) {
                const JournalCalibration *jc = &rs->calib[j];
                if (strcmp(jc->group, group) || jc->trial > c->k || c->have[jc->trial - 1])
                    continue;
                c->have[jc->trial - 1] = 1;
                c->tps[jc->trial - 1] = jc->t.tokens_per_s;
            }
        }
        r->calib = g;
    }
    int todo = 0, all = 0;
    for (int g = 0; g < s->n_calib; g++) {
        for (int t = 0; t < s->calib[g].k; t++)
            todo += !s->calib[g].have[t];
        all += s->calib[g].k;
        calib_complete(s, &s->calib[g], 1);
    }
    if (s->n_calib)
        log_info("calibration: %d configuration(s), %d trial(s) to time (%d journaled before), "
                 "one at a time, before any run",
                 s->n_calib, todo, all - todo);
    return 0;
}

void calib_free(Sweep *s) {
    for (int g = 0; g < s->n_calib; g++) {
        free(s->calib[g].tps);
        free(s->calib[g].have);
    }
    free(s->calib);
}

/* The next trial to time: 0 and its configuration and number, or -1 when none is left. */
int calib_next(const Sweep *s, int *g, int *trial) {
    for (int i = 0; i < s->n_calib; i++) {
        if (s->calib[i].failed) continue;
        for (int t = 0; t < s->calib[i].k; t++)
            if (!s->calib[i].have[t]) return *g = i, *trial = t + 1, 0;
    }
    return -1;
}

/* A trial's assignment: the configuration's first run, attempt = the trial number. */
void calib_assignment(const Sweep *s, int g, int trial, RunAssignment *a) {
    const SweepRun *r = &s->runs[s->calib[g].rep];
    memset(a, 0, sizeof *a);
    a->run = (uint32_t)s->calib[g].rep;
    a->attempt = (uint32_t)trial;
    a->seed = r->pr->seed;
    memcpy(a->id, r->pr->id, sizeof a->id);
    run_config(s, r, &a->cfg);
    snprintf(a->out_path, sizeof a->out_path, "%s", s->o->out_path);
    const DataIdentity *di = data_guard_of(&s->data, &r->pr->cfg.data);
    if (di) memcpy(a->data_sha256, di->sha256, sizeof a->data_sha256);
}

/* A trial timed (ok) or failed: journaled and synced before anything else happens, so that a
 * resume never times it again. */
void calib_record(Sweep *s, int g, int trial, int ok, const CalibTrial *t, const char *message) {
    CalibGroup *c = &s->calib[g];
    if (!ok) {
        c->failed = 1;
        log_info("calibration: %s: trial %d failed (%s); its runs fail", c->config, trial, message);
        return;
    }
    JournalCalibration jc;
    memset(&jc, 0, sizeof jc);
    memcpy(jc.group, c->group, sizeof jc.group);
    snprintf(jc.config, sizeof jc.config, "%s", c->config);
    jc.trial = trial;
    jc.warmup = CALIB_WARMUP_STEPS;
    jc.t = *t;
    if (s->stop == STOP_IO) return;
    if (journal_append_calibration(s->j, &jc) != 0 || journal_sync(s->j) != 0) {
        stop_journal(s);
        return;
    }
    c->have[trial - 1] = 1;
    c->tps[trial - 1] = t->tokens_per_s;
    log_info("calibration: %s: trial %d/%d: %.1f tokens/s on %s (load %.2f, BLAS %s)", c->config,
             trial, c->k, t->tokens_per_s, t->host, t->load1, t->blas_core);
    calib_complete(s, c, 1);
}

/* One process: every trial in line, before any run. */
void calib_local(Sweep *s) {
    VocabCache *vc = vocab_cache_new();
    int g, trial;
    while (!stopping(s) && !sweep_signal_term() && calib_next(s, &g, &trial) == 0) {
        if (sweep_signal_usr1()) {
            s->stop = STOP_SIGNAL;
            break;
        }
        RunAssignment a;
        calib_assignment(s, g, trial, &a);
        CalibTrial t;
        char err[ABL_ERR_MAX] = "";
        s->calib_busy = 1;
        int ok = run_calibrate(&a, vc, &t, err) == 0;
        s->calib_busy = 0;
        calib_record(s, g, trial, ok, &t, err);
    }
    vocab_cache_free(vc);
}

/* Calibration under --join is refused: each process would time its own trials on its own
 * machine's load, and the runs of one configuration would get different budgets. */
int calib_refuse_join(const Plan *p, char err[ABL_ERR_MAX]) {
    const Knob *k = knob_find("train.calibrate");
    for (int i = 0; i < p->n_runs; i++)
        if (p->runs[i].cfg.train.calibrate > 0)
            return spec_fail(err, plan_source(p, &p->runs[i], k, NULL),
                             "train.calibrate cannot be used with --join yet (each process "
                             "would time the configurations on its own machine and load): run "
                             "the sweep without --join, or with train.calibrate: 0");
    return 0;
}
