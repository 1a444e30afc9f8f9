/* A replicate: sweep on rank 0 (schedule/adaptive.c decides): its rule and contrasts kept
 * unchanged on resume, journaled once per session, each decision journaled and said once,
 * the runs its contrasts settled without journaled not_needed, and the summary at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/event_schema.h"
#include "util/log.h"
#include "orchestrator/plan/sequential.h"
#include "sweep_internal.h"

/* Each contrast's state for the progress line: "h2 open n=3 [-0.02,+0.01]", "gelu better". */
void contrast_line(Sweep *s) {
    char *p = s->progress.contrasts;
    size_t cap = sizeof s->progress.contrasts, len = 0;
    p[0] = '\0';
    for (int j = 0; j < s->contrasts.n_contrasts && len + 16 < cap; j++) {
        const JournalDecision *d = &s->latest[j];
        const char *name = s->contrasts.list[j].label;
        int w;
        if (d->look < -1)
            w = snprintf(p + len, cap - len, "%s%s open", j ? ", " : "", name);
        else if (d->verdict == SEQ_OPEN)
            w = snprintf(p + len, cap - len, "%s%s open n=%d [%+.3f,%+.3f]", j ? ", " : "", name,
                         d->n, d->lo, d->hi);
        else
            w = snprintf(p + len, cap - len, "%s%s %s", j ? ", " : "", name,
                         seq_verdict_name((SeqVerdict)d->verdict));
        if (w < 0 || (size_t)w >= cap - len) {
            snprintf(p + len, cap - len, ", ...");
            break;
        }
        len += (size_t)w;
    }
}

static int same_decision(const JournalDecision *a, const JournalDecision *b) {
    return a->contrast == b->contrast && a->look == b->look && a->n == b->n &&
           a->verdict == b->verdict && !strcmp(a->note, b->note) &&
           !memcmp(&a->diff, &b->diff, sizeof a->diff) && !memcmp(&a->lo, &b->lo, sizeof a->lo) &&
           !memcmp(&a->hi, &b->hi, sizeof a->hi);
}

/* A decision of the adaptive scheduler: journaled (synced) unless the journal has it from an
 * earlier session, where the replay must give the same one. */
int host_decided(void *ctx, const JournalDecision *d) {
    Sweep *s = ctx;
    if (d->contrast < 0 || d->contrast >= s->contrasts.n_contrasts) return -1;
    s->latest[d->contrast] = *d;
    const char *name = s->contrasts.list[d->contrast].label;
    for (int i = 0; i < s->n_journaled; i++) {
        const JournalDecision *o = &s->journaled[i];
        if (o->contrast != d->contrast || o->look != d->look || o->verdict != d->verdict ||
            strcmp(o->note, d->note))
            continue;
        if (!same_decision(o, d))
            log_warn("replicate: contrast %s at n=%d now gives [%+.4f, %+.4f], the journal "
                     "[%+.4f, %+.4f]: its runs' results changed",
                     name, d->n, d->lo, d->hi, o->lo, o->hi);
        return 0;
    }
    if (s->stop == STOP_IO) return -1;
    if (journal_append_decision(s->j, d) != 0 || journal_sync(s->j) != 0) {
        stop_journal(s);
        return -1;
    }
    log_info("replicate: %s vs %s: n=%d, difference %+.4f, interval [%+.4f, %+.4f] at level "
             "%.3g: %s%s%s",
             name, s->contrasts.list[d->contrast].base_label, d->n, d->diff, d->lo, d->hi, d->level,
             seq_verdict_name((SeqVerdict)d->verdict), d->note[0] ? " " : "", d->note);
    contrast_line(s);
    return 0;
}

/* A planned run its contrasts settled without: a RUN_END with status not_needed, synced,
 * of its last attempt (0: it never began; else the one it was interrupted in, which this
 * ends for good); it counts as finished from here on. */
int host_not_needed(void *ctx, int run, const char *why) {
    Sweep *s = ctx;
    if (run < 0 || run >= s->n || s->runs[run].finished) return 0;
    SweepRun *r = &s->runs[run];
    if (r->status == RUN_NOT_NEEDED) { /* journaled so by a session before */
        r->finished = 1;
        return 0;
    }
    EndEvent end;
    event_end_unknown(&end, RUN_NOT_NEEDED, why);
    if (s->stop == STOP_IO || plan_now(s, (uint32_t)run) != 0) return -1;
    if (journal_append_end(s->j, (uint32_t)run, r->attempt, -1, "", &end) != 0 ||
        journal_sync(s->j) != 0) {
        stop_journal(s);
        return -1;
    }
    r->finished = 1;
    r->status = RUN_NOT_NEEDED;
    drop_checkpoint(s, r);
    refs_free(&r->events);
    s->n_not_needed++;
    progress_run_elsewhere(&s->progress, r->cost);
    return 0;
}

/* The alpha ledger of the journal being resumed, for a refusal: "its rule has spent 0.0125
 * of alpha 0.2 in 2 looks" (journal_alpha_spent). */
static void ledger_text(const ResumeState *rs, double alpha, char *out, size_t n) {
    int looks = 0;
    double spent = journal_alpha_spent(rs->decisions, rs->n_decisions, &looks);
    if (alpha > 0)
        snprintf(out, n, "its rule has spent %.4g of alpha %g in %d look%s (the alpha ledger)",
                 spent, alpha, looks, looks == 1 ? "" : "s");
    else
        snprintf(out, n, "its rule has spent %.4g in %d look%s (the alpha ledger)", spent, looks,
                 looks == 1 ? "" : "s");
}

/* A resumed sweep keeps the version of the sequential rule its journaled REPLICATE record
 * (was) names, so that one rule takes every look of it: s->rule_version, and the scheduler is
 * told (sched_adaptive_rule_version) before it starts. 0, or -1 with one line when this
 * binary does not know that version (a newer binary began the sweep). */
static int keep_rule_version(Sweep *s, const JournalReplicate *was, char err[ABL_ERR_MAX]) {
    if (was->rule_version == SEQ_RULE_VERSION) return 0;
    if (sched_adaptive_rule_version(s->sched, was->rule_version) != 0)
        return spec_fail(err, s->spec.replicate.mark,
                         "replicate: cannot resume: the sweep's looks were taken by version %d "
                         "of the sequential rule, newer than this binary's (%d); resume it with "
                         "the binary that began it",
                         was->rule_version, SEQ_RULE_VERSION);
    s->rule_version = was->rule_version;
    log_info("replicate: the sweep began under version %d of the sequential rule "
             "(docs/analysis.md); its looks go on under it, so that one rule takes them all "
             "(this binary's own is version %d)",
             was->rule_version, SEQ_RULE_VERSION);
    return 0;
}

/* A resumed replicate: sweep keeps its rule and contrasts: decisions made under other ones
 * would be mixed with the new ones, and a new rule would look afresh at the runs the old one
 * looked at, its alpha spent already (the budget may change: a larger one continues the
 * contrasts it left unresolved). 0, or -1 with a one-line "FILE:LINE:COL: KEY: ..." naming
 * the key that changed and what the rule spent (the alpha ledger). */
static int same_replicate(Sweep *s, const ResumeState *rs, const JournalReplicate *now,
                          char err[ABL_ERR_MAX]) {
    const Contrasts *cs = &s->contrasts;
    if (!rs->replicate_off) return 0;
    const SpecReplicate *rep = &s->spec.replicate;
    JournalReader *r = journal_reader_open(s->journal_path, err);
    if (!r) return -1;
    JournalRecord rec;
    JournalReplicate was = {0};
    const char *key = NULL;
    char why[256] = "";
    SpecMark at = rep->mark;
    if (journal_reader_read_at(r, rs->replicate_off, &rec) != 0 ||
        journal_decode_replicate(&rec, &was) != 0) {
        key = "replicate", snprintf(why, sizeof why, "its replicate record cannot be read");
    } else if (was.min != now->min || was.max != now->max) {
        key = "replicate.seeds", at = s->spec.seeds_mark;
        snprintf(why, sizeof why,
                 "seeds changed ({min: %d, max: %d} here, {min: %d, max: %d} "
                 "when the sweep began)",
                 now->min, now->max, was.min, was.max);
    } else if (was.n_looks != now->n_looks ||
               memcmp(was.looks, now->looks, sizeof(int) * (size_t)now->n_looks)) {
        key = "replicate.looks", at = rep->looks_mark;
        snprintf(why, sizeof why, "looks changed since the sweep began");
    } else if (was.delta != now->delta) {
        key = "replicate.resolve", at = rep->delta_mark;
        snprintf(why, sizeof why, "resolve changed (%g here, %g when the sweep began)", now->delta,
                 was.delta);
    } else if (was.alpha != now->alpha) {
        key = "replicate.alpha", at = rep->alpha_mark;
        snprintf(why, sizeof why, "alpha changed (%g here, %g when the sweep began)", now->alpha,
                 was.alpha);
    } else if (was.split != now->split) {
        key = "data.test_fraction";
        snprintf(why, sizeof why,
                 "the split its verdicts are on changed (%s here, %s when the "
                 "sweep began)",
                 contrast_split_names[now->split & 1], contrast_split_names[was.split & 1]);
    } else if (was.n_contrasts != now->n_contrasts) {
        key = s->spec.contrasts_mark.line ? "contrasts" : "replicate";
        if (s->spec.contrasts_mark.line) at = s->spec.contrasts_mark;
        snprintf(why, sizeof why,
                 "its contrasts changed (variants or grid points added or removed, or the "
                 "contrasts: family: %d contrasts here, %d when the sweep began)",
                 now->n_contrasts, was.n_contrasts);
    } else {
        for (int k = 0; k < now->n_contrasts && !key; k++) {
            const char *c, *b, *p, *name = cs->list[k].label, *base = cs->list[k].base_label;
            size_t cl, bl, pl;
            JournalContrastFactors f;
            if (journal_replicate_contrast(&rec, k, &c, &cl, &b, &bl, &p, &pl) != 0 ||
                journal_replicate_factors(&rec, k, &f) != 0 || f.kind != cs->list[k].kind ||
                cl != strlen(name) || memcmp(c, name, cl) || bl != strlen(base) ||
                memcmp(b, base, bl)) {
                int moved = cs->list[k].kind == CONTRAST_VS_BASE &&
                            (bl != strlen(base) || memcmp(b, base, bl));
                key = moved ? "replicate.baseline" : "replicate";
                if (moved && rep->baseline_mark.line) at = rep->baseline_mark;
                snprintf(why, sizeof why,
                         "its contrasts changed (variants, grid points, the baseline or the "
                         "contrasts: family)");
            }
        }
    }
    journal_reader_close(r);
    if (!key) return keep_rule_version(s, &was, err);
    char ledger[160];
    ledger_text(rs, was.alpha, ledger, sizeof ledger);
    spec_fail(err, at,
              "%s: cannot resume: %s, and %s on the runs it looked at: a new rule would look at "
              "them again with alpha spent; put it back, use a new output file, or --force to "
              "start over",
              key, why, ledger);
    return -1;
}

/* The rule as this session's REPLICATE record has it. */
static void replicate_record(Sweep *s, JournalReplicate *jr) {
    const SpecReplicate *rep = &s->spec.replicate;
    const Contrasts *c = &s->contrasts;
    *jr = (JournalReplicate){.alpha = rep->alpha,
                             .delta = rep->delta,
                             .core_hours = rep->core_hours,
                             .min = rep->min,
                             .max = rep->max,
                             .n_looks = rep->n_looks,
                             .n_contrasts = c->n_contrasts,
                             .split = (int)c->split,
                             .rule_version = s->rule_version};
    memcpy(jr->looks, rep->looks, sizeof jr->looks);
}

/* Before the journal is touched: the contrasts, and a resumed sweep's rule unchanged. A
 * replicate: section removed on resume would train the runs the rule settled without, under
 * a file still labelled adaptive; one added would decide from runs planned without it. */
int replicate_begin(Sweep *s, const ResumeState *rs, char err[ABL_ERR_MAX]) {
    int was = rs->replicate_off != 0, began = rs->n_runs > 0;
    if (!s->spec.replicate.on && was) {
        char ledger[160];
        ledger_text(rs, 0, ledger, sizeof ledger);
        return spec_fail(err, s->spec.seeds_mark,
                         "seeds: cannot resume: the spec has no replicate: section, but the sweep "
                         "began with one (%s; its contrasts were decided by the rule, and the "
                         "runs it did not need would be trained now); put the section back, or "
                         "use a new output file",
                         ledger);
    }
    if (!s->spec.replicate.on) return 0;
    if (!was && began)
        return spec_fail(err, s->spec.replicate.mark,
                         "replicate: cannot resume: the spec has a replicate: section, but the "
                         "sweep began without one (its runs were planned by seeds: and may have "
                         "been looked at with no rule, so no alpha can be accounted for them); "
                         "use a new output file");
    if (contrasts_build(&s->plan, &s->contrasts, err) != 0) return -1;
    const Contrasts *c = &s->contrasts;
    if (!(s->latest = calloc((size_t)c->n_contrasts + 1, sizeof *s->latest)))
        return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    for (int j = 0; j < c->n_contrasts; j++)
        s->latest[j].look = -2;
    s->rule_version = SEQ_RULE_VERSION; /* a resumed sweep's own: same_replicate */
    JournalReplicate jr;
    replicate_record(s, &jr);
    return same_replicate(s, rs, &jr, err);
}

/* The rule and the contrasts, once per session before any decision (the view's /contrasts
 * and root attributes). */
void write_replicate(Sweep *s) {
    JournalReplicate jr;
    replicate_record(s, &jr);
    const Contrasts *c = &s->contrasts;
    size_t n = (size_t)c->n_contrasts + 1;
    const char **names = malloc(sizeof *names * n), **bases = malloc(sizeof *bases * n);
    JournalContrastFactors *f = c->family != SPEC_CONTRASTS_VS_BASE ? calloc(n, sizeof *f) : NULL;
    if (!names || !bases || (c->family != SPEC_CONTRASTS_VS_BASE && !f)) {
        free(names), free(bases), free(f);
        stop_io(s, "out of memory");
        return;
    }
    for (int j = 0; j < c->n_contrasts; j++) {
        const Contrast *x = &c->list[j];
        names[j] = x->label;
        bases[j] = x->base_label;
        if (!f) continue;
        f[j].kind = x->kind;
        for (int i = 0; i < 2; i++) {
            int fa = x->factor[i];
            if (fa < 0) continue;
            f[j].factor[i] = c->factor_name[fa];
            f[j].level[i] = c->level_name[fa][x->level[i]];
            f[j].base_level[i] = c->level_name[fa][c->base_level[fa]];
        }
    }
    if (journal_append_replicate(s->j, &jr, names, bases, f) != 0) stop_journal(s);
    free(names);
    free(bases);
    free(f);
}

/* What a replicate: sweep spent and left: runs not needed, worker idle time, verdicts. */
void replicate_summary(const Sweep *s, int n) {
    int not_needed = 0, open = 0, counts[SEQ_UNSTABLE + 1] = {0}, tuning = 0;
    for (int i = 0; i < s->n; i++) {
        const SweepRun *r = &s->runs[i];
        not_needed += !r->dead && r->finished && r->status == RUN_NOT_NEEDED;
        tuning += !r->dead && r->pr && r->pr->tune_candidate >= 0; /* a tune: sweep's */
    }
    for (int j = 0; j < s->contrasts.n_contrasts; j++) {
        int v = s->latest[j].look < -1 ? SEQ_OPEN : s->latest[j].verdict;
        if (v < 0 || v > SEQ_UNSTABLE) continue;
        counts[v]++;
        open += v == SEQ_OPEN;
    }
    char tuned[64] = ""; /* the rule planned the comparison runs; tuning trained the rest */
    if (tuning) snprintf(tuned, sizeof tuned, " (and %d tuning runs)", tuning);
    log_info("replicate: %d of %d planned %sruns trained, %d not needed%s; worker ranks idle "
             "%.1f s in all; contrasts: %d better, %d worse, %d equivalent, %d unresolved, %d "
             "unstable%s",
             n - tuning - not_needed, n - tuning, tuning ? "comparison " : "", not_needed, tuned,
             s->idle_worker_seconds, counts[SEQ_BETTER], counts[SEQ_WORSE], counts[SEQ_EQUIVALENT],
             counts[SEQ_UNRESOLVED], counts[SEQ_UNSTABLE],
             open ? " (some still open: their runs failed)" : "");
}
