/* A sweep's journal opened: a new one, --force over an old one, or --resume (the journal
 * read back, damage handled, reconciled with the new plan); the scheduler's callbacks; the
 * session's HEADER; a joined process's last view. */
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/event_schema.h"
#include "worker/blas_env.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "env_info.h"
#include "out_guard.h"
#include "orchestrator/plan/run_id.h"
#include "sweep_internal.h"

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* --force: remove OUT.h5 and OUT.h5.d (journal, checkpoints, weights, view segments:
 * whatever a stopped sweep left). The caller holds the journal's lock, so no sweep is
 * writing there. All or nothing: OUT.h5.d is first renamed aside (atomic), and put back
 * if OUT.h5 cannot be removed; only then is the renamed tree deleted, so a failure there
 * leaves a stray directory with a warning, never a sweep without its journal. Deleting
 * entry by entry used to stop at the first unknown one (view/, after a kill) with the
 * journal already gone. */
static int remove_outputs(const char *out, char err[ABL_ERR_MAX]) {
    char dir[ABL_PATH_MAX], aside[ABL_PATH_MAX + 32];
    journal_dir_for(out, dir, sizeof dir);
    snprintf(aside, sizeof aside, "%s.removing.%ld", dir, (long)getpid());
    int moved = 0;
    if (exists(dir)) {
        if (rename(dir, aside) != 0) {
            snprintf(err, ABL_ERR_MAX, "--force: cannot remove %s: %s", dir, strerror(errno));
            return -1;
        }
        moved = 1;
    }
    if (exists(out) && unlink(out) != 0) {
        int e = errno;
        if (moved && rename(aside, dir) != 0)
            snprintf(err, ABL_ERR_MAX, "--force: cannot remove %s: %s (and %s is now %s)", out,
                     strerror(e), dir, aside);
        else
            snprintf(err, ABL_ERR_MAX, "--force: cannot remove %s: %s; nothing was removed", out,
                     strerror(e));
        return -1;
    }
    if (moved && fs_remove_tree(aside) != 0)
        log_warn("--force could not delete all of %s (%s): remove it", aside, strerror(errno));
    return 0;
}

/* Maps the new plan onto the journal: old runs keep their indices, new ones are appended.
 * A plan that drops or changes a journaled run is refused. */
int reconcile(Sweep *s, ResumeState *rs, char err[ABL_ERR_MAX]) {
    ResumeMatch m;
    if (resume_match(rs, &s->plan, &m) != 0) return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    if (m.missing >= 0) {
        snprintf(err, ABL_ERR_MAX,
                 "%s: cannot resume: the spec no longer plans run '%s' (id %s); resuming with "
                 "a changed spec may only add runs (more seeds, new variants). Use a new "
                 "output file, or --force to start over",
                 s->o->spec_path, rs->runs[m.missing].name, rs->runs[m.missing].id);
        resume_match_free(&m);
        return -1;
    }
    s->n = rs->n_runs;
    int n_new = m.n_fresh;
    /* joined, once some journal plans every run: ours plans only what we train (join.h) */
    int later = s->sched->ops->shared && join_plan_journaled(s->o->out_path);
    s->plan_all = !later;
    s->runs = calloc((size_t)(s->n + n_new) + 1, sizeof *s->runs);
    if (!s->runs) return resume_match_free(&m), snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    for (int k = 0; k < rs->n_runs; k++) {
        int p = m.plan_of[k];
        SweepRun *r = &s->runs[k];
        if (p < 0) { /* its PLAN record was lost: the run is planned again as a new index */
            r->dead = 1;
            r->finished = 1;
            continue;
        }
        r->pr = &s->plan.runs[p];
        r->cost = s->cost[p].c.seconds > 0 ? s->cost[p].c.seconds * 50e9 : s->cost[p].c.flops;
        /* failed: trained again; not_needed: the adaptive scheduler says again (or needs
         * it after all, under a larger budget) */
        r->finished = rs->runs[k].finished && rs->runs[k].status != RUN_FAILED &&
                      rs->runs[k].status != RUN_NOT_NEEDED;
        r->status = rs->runs[k].status;
        r->attempt = rs->runs[k].attempt;
        r->ckpt_step = rs->runs[k].ckpt_step;
        r->ckpt_attempt = rs->runs[k].ckpt_attempt;
        r->final_val_loss = rs->runs[k].final_val_loss;
        r->final_test_loss = rs->runs[k].final_test_loss;
        r->train_seconds = rs->runs[k].train_seconds;
        r->unstable = rs->runs[k].unstable;
        if (!r->finished) { /* its history may be copied into the next attempt */
            r->events = rs->runs[k].events;
            memset(&rs->runs[k].events, 0, sizeof rs->runs[k].events);
        }
    }
    for (int i = 0; i < n_new; i++) {
        int p = m.fresh[i];
        SweepRun *r = &s->runs[s->n + i];
        r->pr = &s->plan.runs[p];
        r->cost = s->cost[p].c.seconds > 0 ? s->cost[p].c.seconds * 50e9 : s->cost[p].c.flops;
        /* the resolved config (model.vocab_size from the data) is what the file shows; the
         * id stays the hash of the config as planned */
        if (later) {
            r->plan_later = 1;
            continue;
        }
        RunConfig cfg;
        run_config(s, r, &cfg);
        if (journal_append_plan2(s->j, (uint32_t)(s->n + i), r->pr->id, r->pr->name, r->pr->seed,
                                 &cfg, r->pr->overrides) != 0)
            stop_journal(s);
    }
    s->n += n_new;
    resume_match_free(&m);
    return 0;
}

/* What a resume found damaged in the journal, said once: where, what was lost, which runs
 * will re-run, where the bytes were saved. The affected runs get an interrupted attempt
 * (so that a later resume re-runs them too) and a DAMAGE record marks the region handled. */
static int handle_damage(Sweep *s, ResumeState *rs, char err[ABL_ERR_MAX]) {
    for (int i = 0; i < rs->n_damage; i++) {
        ResumeDamage *d = &rs->damage[i];
        char saved[ABL_PATH_MAX + 64], runs[1024] = "";
        snprintf(saved, sizeof saved, "%s.damaged-%llu", s->journal_path,
                 (unsigned long long)d->offset);
        if (journal_save_range(s->journal_path, d->offset, d->length, saved, err) != 0) return -1;
        for (int k = 0; k < d->n_runs; k++) {
            ResumeRun *rr = &rs->runs[d->runs[k]];
            size_t l = strlen(runs);
            if (l < sizeof runs - 80)
                snprintf(runs + l, sizeof runs - l, "%s%s", k ? ", " : "", rr->name);
            else if (l < sizeof runs - 4)
                strcat(runs, ", …");
            char why[128];
            snprintf(why, sizeof why,
                     "journal damage at bytes %llu-%llu: records lost, the run re-runs",
                     (unsigned long long)d->offset, (unsigned long long)(d->offset + d->length));
            EndEvent end;
            event_end_unknown(&end, RUN_INTERRUPTED, why);
            rr->attempt++;
            if (journal_append_begin(s->j, (uint32_t)d->runs[k], rr->attempt, -1, "", 0) != 0 ||
                journal_append_end(s->j, (uint32_t)d->runs[k], rr->attempt, -1, "", &end) != 0)
                goto io;
        }
        if (journal_append_damage(s->j, d->offset, d->length, saved) != 0 || journal_sync(s->j))
            goto io;
        const char *what = d->record_type ? journal_type_name(d->record_type) : "unknown";
        log_info("journal %s: %llu damaged bytes at offset %llu (%s record%s) skipped; "
                 "later records kept; saved to %s; %s%s",
                 s->journal_path, (unsigned long long)d->length, (unsigned long long)d->offset,
                 what, d->record_type ? "" : "s", saved,
                 d->n_runs ? "runs that will re-run: " : "no run needs to re-run",
                 d->n_runs ? runs : "");
    }
    return 0;
io:
    snprintf(err, ABL_ERR_MAX, "%s", journal_error(s->j));
    return -1;
}

/* What the scheduler tells us (SchedHost). */
static void host_finished_elsewhere(void *ctx, int run, const JoinResult *res) {
    Sweep *s = ctx;
    SweepRun *r = &s->runs[run];
    if (r->finished) return; /* said once (a replicate: sweep may hear it twice) */
    r->finished = 1;
    r->status = res->status;
    r->final_val_loss = res->final_val_loss;
    r->final_test_loss = res->final_test_loss;
    r->unstable = res->unstable;
    r->train_seconds = res->train_seconds;
    refs_free(&r->events);
    r->hist = NULL;
    progress_run_elsewhere(&s->progress, r->cost); /* before progress_init: forgotten */
}

/* A run taken over continues from the checkpoint another process's journal records, with
 * the history of the attempt that wrote it (as a resume does), or from its start. */
static int host_continue_from(void *ctx, int run, const ResumeRun *rr, JournalReader *from) {
    Sweep *s = ctx;
    SweepRun *r = &s->runs[run];
    refs_free(&r->events);
    r->hist = NULL;
    r->ckpt_step = r->ckpt_attempt = 0;
    if (!rr || rr->ckpt_step <= 0) return 0;
    for (size_t k = 0; k < rr->events.n; k++)
        if (rr->events.refs[k].attempt == rr->ckpt_attempt &&
            refs_push(&r->events, rr->events.refs[k].attempt, rr->events.refs[k].offset) != 0)
            return -1;
    r->ckpt_step = rr->ckpt_step;
    r->ckpt_attempt = rr->ckpt_attempt;
    r->hist = from;
    return 0;
}

static void host_fail(void *ctx, const char *what) {
    stop_io(ctx, what);
}

/* A shared sweep's data must be the data its first process recorded. */
static int host_admit(void *ctx, const char *out_path, char err[ABL_ERR_MAX]) {
    Sweep *s = ctx;
    return data_guard_shared_check(&s->data, out_path, s->o->accept_data_change, err);
}

int open_journal(Sweep *s, ResumeState *rs, char err[ABL_ERR_MAX]) {
    const SweepOptions *o = s->o;
    char dir[ABL_PATH_MAX];
    if (journal_path_for(o->out_path, s->journal_path, sizeof s->journal_path) != 0 ||
        journal_dir_for(o->out_path, dir, sizeof dir) != 0) {
        snprintf(err, ABL_ERR_MAX, "%s: output path too long", o->out_path);
        return -1;
    }
    int have_journal = exists(s->journal_path);
    SchedConfig cfg = {o->out_path, &s->plan, o->join, o->lease, o->force, NULL};
    SchedHost host = {s,
                      host_finished_elsewhere,
                      host_continue_from,
                      host_fail,
                      host_admit,
                      host_decided,
                      host_not_needed,
                      host_tuned,
                      host_tune_journaled,
                      host_tune_stopped};
    if (!(s->sched = scheduler_open(&cfg, &host, s->journal_path, err))) return -1;
    if (s->sched->ops->shared) { /* a journal of our own, always a new one */
        memset(rs, 0, sizeof *rs);
        s->j = journal_create(s->journal_path, err);
        return s->j ? 0 : -1;
    }
    if (!o->resume && !o->force && (exists(o->out_path) || exists(dir))) {
        snprintf(err, ABL_ERR_MAX,
                 "%s already exists: use --resume to continue that sweep or --force to "
                 "overwrite it",
                 exists(o->out_path) ? o->out_path : dir);
        return -1;
    }
    if (o->resume && !have_journal && exists(o->out_path)) {
        snprintf(err, ABL_ERR_MAX, "%s has no journal (%s) to resume from", o->out_path,
                 s->journal_path);
        return -1;
    }
    memset(rs, 0, sizeof *rs);
    if (o->force && !o->resume) {
        /* take the lock before deleting anything: a sweep writing there keeps its files */
        int lock = journal_lock_existing(s->journal_path, err);
        if (lock == -1) {
            snprintf(err + strlen(err), ABL_ERR_MAX - strlen(err),
                     "; --force refused: stop that sweep first");
            return -1;
        }
        if (scheduler_remove_output(o->out_path, err) != 0) {
            snprintf(err + strlen(err), ABL_ERR_MAX - strlen(err),
                     "; --force refused: stop that sweep first");
            if (lock >= 0) close(lock);
            return -1;
        }
        int rc = remove_outputs(o->out_path, err);
        if (rc == 0 && journal_ensure_dir(o->out_path, err) == 0)
            s->j = journal_create(s->journal_path, err);
        if (lock >= 0) close(lock); /* after the new journal holds its own lock */
        return s->j ? 0 : -1;
    }
    if (o->resume && have_journal) {
        JournalScan scan;
        s->j = journal_open_append(s->journal_path, &scan, err); /* locks it first */
        if (!s->j) return -1;
        if (scan.dropped_bytes)
            log_info("dropped a torn journal tail of %llu bytes",
                     (unsigned long long)scan.dropped_bytes);
        if (resume_read(s->journal_path, rs, err) != 0) return -1;
        return handle_damage(s, rs, err);
    }
    if (journal_ensure_dir(o->out_path, err) != 0) return -1;
    s->j = journal_create(s->journal_path, err);
    return s->j ? 0 : -1;
}

void write_header(Sweep *s, int nranks, const char *hostnames) {
    EnvInfo e;
    env_info_collect(&e, nranks, hostnames);
    env_info_add(&e, "spec", s->spec.text, s->spec.text_len);
    env_info_add(&e, "journal_version", JOURNAL_FORMAT_VERSION, 1);
    env_info_add_sweep(&e, s->spec.text, s->o->sets, s->o->n_sets, &s->plan);
    /* the char vocabulary of the first run's data, so samples can be decoded */
    VocabCache *vc = vocab_cache_new();
    char err[ABL_ERR_MAX];
    const Dataset *d = s->n > 0 ? vocab_dataset(vc, &s->plan.runs[0].cfg, err) : NULL;
    if (d && d->tokenizer == TOK_CHAR)
        env_info_add_hex(&e, "vocab_hex", d->chars, (size_t)d->vocab_size);
    vocab_cache_free(vc);
    const char *kv[2 * ENV_INFO_MAX];
    int n = env_info_pairs(&e, kv);
    if (journal_append_header(s->j, kv, n) != 0) stop_journal(s);
    env_info_free(&e);
}

/* A joined process's last view, once its SWEEP_END is synced: its journal is closed first
 * (the lock on it goes, so a process that finds it unlocked reads all of it), then the view
 * is asked for as the last: only the last process to end builds it (join_build_view).
 * Before, each process appended its SWEEP_END after another's build had covered every
 * journal, and 9 of 16 ending together rebuilt the same view in turn. */
void last_joined_view(Sweep *s) {
    char err[ABL_ERR_MAX];
    if (view_updater_wait(s->vu, err) != 0) /* a periodic build still reading our journal */
        log_warn("could not rebuild %s: %s", s->o->out_path, err);
    uint64_t size = journal_size(s->j);
    int closed = journal_close(s->j);
    s->j = NULL;
    if (closed != 0) {
        stop_io(s, "cannot sync the journal");
        return;
    }
    view_updater_request(s->vu, size, VIEW_LAST);
    s->view_failed = view_updater_wait(s->vu, err) != 0;
    if (s->view_failed) log_warn("could not rebuild %s: %s", s->o->out_path, err);
}

/* The scheduler learns the runs (a shared one hears which others finished already). 0, or
 * -1 out of memory. */
static int sched_learn(Sweep *s) {
    SchedRun *sr = malloc(sizeof *sr * (size_t)(s->n + 1));
    for (int i = 0; sr && i < s->n; i++) {
        SweepRun *r = &s->runs[i];
        sr[i] = (SchedRun){r->dead ? "" : r->pr->id,
                           r->dead ? "" : r->pr->name,
                           r->cost,
                           r->finished,
                           r->status,
                           r->final_val_loss,
                           r->unstable,
                           r->train_seconds,
                           r->final_test_loss};
    }
    int rc = !sr || sched_start(s->sched, sr, s->n) != 0 ? -1 : 0;
    free(sr);
    return rc;
}

int sweep_open(Sweep *s, ResumeState *rs, int nranks, const char *hostnames) {
    const SweepOptions *o = s->o;
    char err[ABL_ERR_MAX];
    DataIdentity *ids = NULL; /* the data as planning loaded it: data_guard owns them */
    int n_ids = 0;
    blas_set_threads(); /* one BLAS thread, as on workers: identical results on any rank count */
    blas_warn_threads("ablate run");
    /* Validate everything before any file is touched. */
    if (spec_load(&s->spec, o->spec_path, o->sets, o->n_sets, err) != 0 ||
        plan_build(&s->spec, &s->plan, err) != 0 ||
        !(s->cost = plan_cost_compute_ids(&s->plan, &ids, &n_ids, err)) ||
        (o->join && calib_refuse_join(&s->plan, err) != 0)) {
        log_line("%s", err);
        free(ids);
        return SWEEP_EXIT_USAGE;
    }
    /* the output, and the data's identity: the one a batch job's check saw, then the
     * sweep's, before anything is written */
    if (out_guard_check(o->out_path, o->spec_path, &s->plan, err) != 0 ||
        data_guard_expect(ids, n_ids, o->expect_data, o->n_expect_data, err) != 0) {
        log_cmd("%s", err);
        free(ids);
        return SWEEP_EXIT_USAGE;
    }
    if (data_guard_begin(&s->data, ids, n_ids, err) != 0 || open_journal(s, rs, err) != 0 ||
        replicate_begin(s, rs, err) != 0 ||
        data_guard_compare(&s->data, rs->data, rs->n_data, o->accept_data_change, err) != 0 ||
        (run_id_adopt(&s->plan, rs) < 0 && snprintf(err, ABL_ERR_MAX, "out of memory")) ||
        reconcile(s, rs, err) != 0) {
        log_cmd("%s", err);
        return SWEEP_EXIT_USAGE;
    }
    if (calib_setup(s, rs) != 0) {
        log_cmd("out of memory");
        return SWEEP_EXIT_FAILED;
    }
    for (int i = 0; i < s->n; i++) /* accepted new data: no run trains partly on each */
        if (!s->runs[i].dead && !s->runs[i].finished && s->runs[i].ckpt_step > 0 &&
            data_guard_changed(&s->data, &s->runs[i].pr->cfg.data)) {
            drop_checkpoint(s, &s->runs[i]);
            refs_free(&s->runs[i].events);
        }
    int shared = s->sched->ops->shared;
    if (!(s->vu = view_updater_start(s->journal_path, o->out_path, shared, err))) {
        log_cmd("%s", err);
        return SWEEP_EXIT_USAGE;
    }
    write_header(s, nranks, hostnames);
    s->journaled = rs->decisions;
    s->n_journaled = rs->n_decisions;
    s->tunes_journaled = rs->tunes;
    s->n_tunes_journaled = rs->n_tunes;
    if (s->spec.replicate.on) write_replicate(s);
    /* a shared sweep's first identity is also where other processes check theirs */
    if (data_guard_record(&s->data, s->j, shared ? o->out_path : NULL, o->accept_data_change, err))
        stop_io(s, err);
    if (sched_learn(s) != 0) {
        log_cmd("out of memory");
        return SWEEP_EXIT_FAILED;
    }
    int done_before = 0, n_live = 0, n_resumed = 0; /* resumed: continue from a checkpoint */
    double total_cost = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->runs[i].dead) continue;
        n_live++;
        if (s->runs[i].finished)
            done_before++;
        else
            total_cost += s->runs[i].cost, n_resumed += s->runs[i].ckpt_step > 0;
    }
    if (shared && n_live > 0 && done_before == n_live) {
        /* nothing to train or record: our journal, just made, holds nothing */
        journal_close(s->j);
        s->j = NULL;
        if (s->sched->ops->complete_on_start(s->sched, n_live, o->out_path)) return SWEEP_EXIT_OK;
    }
    if (journal_sync(s->j) != 0) stop_journal(s);
    if (shared && s->plan_all && !stopping(s) &&
        join_mark_plan_journaled(o->out_path, s->journal_path, err) != 0)
        log_warn("%s", err); /* the processes that join next plan every run again */
    if (!stopping(s)) start_view(s);
    char where[64];
    snprintf(where, sizeof where, "%d %s", nranks > 1 ? nranks - 1 : 1,
             nranks > 1 ? "worker rank(s)" : "process");
    s->sched->ops->announce(s->sched, n_live, done_before, n_resumed, where, o->out_path);
    progress_init(&s->progress, n_live, done_before, total_cost);
    s->progress.eta_upper = s->spec.replicate.on;
    if (s->spec.replicate.on) contrast_line(s);
    return -1;
}
