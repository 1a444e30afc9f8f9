#include "resume.h"

#include "data_guard.h"
#include "orchestrator/plan/id_index.h"
#include "orchestrator/plan/run_id.h"
#include "util/grow.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int refs_push(EventRecordRefs *v, uint32_t attempt, uint64_t offset) {
    if (GROW(v->refs, v->cap, v->n + 1) != 0) return -1;
    v->refs[v->n++] = (EventRecordRef){attempt, offset};
    return 0;
}

void refs_free(EventRecordRefs *v) {
    free(v->refs);
    memset(v, 0, sizeof *v);
}

static int grow(ResumeState *st, uint32_t index) {
    if (index < (uint32_t)st->n_runs) return 0;
    if (index >= INT_MAX) return -1; /* n_runs is an int */
    if (GROW(st->runs, st->cap, (size_t)index + 1) != 0) return -1;
    memset(st->runs + st->n_runs, 0, sizeof *st->runs * ((size_t)index + 1 - (size_t)st->n_runs));
    st->n_runs = (int)index + 1;
    return 0;
}

/* Records a damaged region met while reading, with the runs it may have held. */
static int note_damage(ResumeState *st, JournalReader *r, uint64_t offset, uint64_t len) {
    if (GROW(st->damage, st->cap_damage, (size_t)st->n_damage + 1) != 0) return -1;
    ResumeDamage *d = &st->damage[st->n_damage++];
    memset(d, 0, sizeof *d);
    d->offset = offset;
    d->length = len;
    uint8_t type;
    uint32_t run;
    JournalDamagedRun held =
        journal_reader_damaged_run(r, offset, len, (uint32_t)st->n_runs, &type, &run);
    d->record_type = type;
    switch (held) {
    case JDMG_NO_RUN:
        return 0; /* no run's results: a lost PLAN is planned again (sweep.c) */
    case JDMG_RUN:
        if (!(d->runs = malloc(sizeof *d->runs))) return -1;
        d->runs[d->n_runs++] = (int)run;
        return 0;
    case JDMG_UNKNOWN:
        break;
    }
    /* unknown: every run in progress here (begun, not ended) */
    if (!(d->runs = malloc(sizeof *d->runs * ((size_t)st->n_runs + 1)))) return -1;
    for (int i = 0; i < st->n_runs; i++)
        if (st->runs[i].attempt > 0 && !st->runs[i].finished && st->runs[i].id[0])
            d->runs[d->n_runs++] = i;
    return 0;
}

static void add_run(ResumeDamage *d, int run) {
    for (int k = 0; k < d->n_runs; k++)
        if (d->runs[k] == run) return;
    d->runs[d->n_runs++] = run;
}

int resume_read(const char *journal_path, ResumeState *st, char err[ABL_ERR_MAX]) {
    memset(st, 0, sizeof *st);
    JournalReader *r = journal_reader_open(journal_path, err);
    if (!r) return -1;
    JournalRecord rec;
    int rc;
    uint64_t *handled = NULL; /* offsets named by DAMAGE records */
    int n_handled = 0;
    size_t cap_handled = 0;
    while ((rc = journal_reader_next(r, &rec)) == 1) {
        if (rec.gap_before && note_damage(st, r, rec.offset - rec.gap_before, rec.gap_before)) {
            rc = -2;
            break;
        }
        if (rec.type == JREC_DAMAGE) {
            JournalDamage dm;
            if (GROW(handled, cap_handled, (size_t)n_handled + 1) != 0) {
                rc = -2;
                break;
            }
            if (journal_decode_damage(&rec, &dm) == 0) handled[n_handled++] = dm.offset;
            continue;
        }
        if (rec.type == JREC_DATA) {
            if (GROW(st->data, st->cap_data, (size_t)st->n_data + 1) != 0) {
                rc = -2;
                break;
            }
            if (data_guard_decode(&rec, &st->data[st->n_data]) == 0) st->n_data++;
            continue;
        }
        if (rec.type == JREC_REPLICATE) {
            st->replicate_off = rec.offset;
            continue;
        }
        if (rec.type == JREC_DECISION) {
            if (GROW(st->decisions, st->cap_decisions, (size_t)st->n_decisions + 1) != 0) {
                rc = -2;
                break;
            }
            if (journal_decode_decision(&rec, &st->decisions[st->n_decisions]) == 0)
                st->n_decisions++;
            continue;
        }
        if (rec.type == JREC_CALIBRATION) {
            if (GROW(st->calib, st->cap_calib, (size_t)st->n_calib + 1) != 0) {
                rc = -2;
                break;
            }
            if (journal_decode_calibration(&rec, &st->calib[st->n_calib]) == 0) st->n_calib++;
            continue;
        }
        if (rec.type == JREC_TUNE) {
            if (GROW(st->tunes, st->cap_tunes, (size_t)st->n_tunes + 1) != 0) {
                rc = -2;
                break;
            }
            if (journal_decode_tune(&rec, &st->tunes[st->n_tunes]) == 0) st->n_tunes++;
            continue;
        }
        if (rec.type == JREC_PLAN) {
            JournalPlan p;
            if (journal_decode_plan(&rec, &p) != 0 || grow(st, p.index) != 0) continue;
            ResumeRun *run = &st->runs[p.index];
            memcpy(run->id, p.id, sizeof run->id);
            snprintf(run->name, sizeof run->name, "%s", p.name);
            run->seed = p.seed;
            continue;
        }
        if (rec.run >= (uint32_t)st->n_runs) continue;
        ResumeRun *run = &st->runs[rec.run];
        if (rec.type == JREC_RUN_BEGIN) {
            JournalBegin b;
            if (journal_decode_begin(&rec, &b) != 0 || b.attempt < run->attempt) continue;
            run->attempt = b.attempt;
            run->finished = 0;
            run->orphan = 0;
            /* a resumed attempt keeps its checkpoint until it writes a newer one */
            if (b.resumed_from_step == 0) run->ckpt_step = 0, run->ckpt_attempt = 0;
        } else if (rec.type == JREC_RUN_END) {
            JournalEnd e;
            if (journal_decode_end(&rec, &e) != 0 || e.attempt < run->attempt) continue;
            if (e.attempt > run->attempt) run->orphan = 1;
            run->attempt = e.attempt;
            run->finished = e.end.status != RUN_INTERRUPTED;
            run->status = e.end.status;
            run->final_val_loss = e.end.final_val_loss;
            run->final_test_loss = e.end.final_test_loss;
            run->unstable = e.end.status == RUN_DIVERGED || e.end.instability != INSTAB_NONE;
            run->train_seconds = e.end.train_seconds;
        } else if (rec.type == JREC_CHECKPOINT) {
            JournalCheckpoint c;
            if (journal_decode_checkpoint(&rec, &c) != 0 || c.attempt < run->attempt) continue;
            run->ckpt_step = c.step;
            run->ckpt_attempt = c.attempt;
        } else if (rec.type == JREC_EVENTS) {
            uint32_t attempt;
            const uint8_t *packed;
            size_t packed_len;
            if (journal_decode_events(&rec, &attempt, &packed, &packed_len) != 0) continue;
            if (attempt > run->attempt) run->orphan = 1;
            if (refs_push(&run->events, attempt, rec.offset) != 0) {
                rc = -2;
                break;
            }
        }
    }
    st->torn_bytes = journal_reader_torn_bytes(r);
    if (rc == -2) {
        snprintf(err, ABL_ERR_MAX, "%s: out of memory", journal_path);
        free(handled);
        journal_reader_close(r);
        resume_free(st);
        return -1;
    }
    /* damage an earlier resume handled is history; the rest marks its runs for a re-run */
    int kept = 0;
    for (int i = 0; i < st->n_damage; i++) {
        ResumeDamage *d = &st->damage[i];
        int done = 0;
        for (int k = 0; k < n_handled && !done; k++)
            done = handled[k] == d->offset;
        if (done) {
            free(d->runs);
            continue;
        }
        if (!d->record_type)
            for (int k = 0; k < st->n_runs; k++)
                if (st->runs[k].orphan) add_run(d, k);
        for (int k = 0; k < d->n_runs; k++) {
            ResumeRun *run = &st->runs[d->runs[k]];
            run->finished = 0;
            run->ckpt_step = 0;
            run->ckpt_attempt = 0;
        }
        st->damage[kept++] = *d;
    }
    st->n_damage = kept;
    free(handled);
    if (rc < 0) {
        snprintf(err, ABL_ERR_MAX, "%s: %s", journal_path, journal_reader_error(r));
        journal_reader_close(r);
        resume_free(st);
        return -1;
    }
    journal_reader_close(r);
    return 0;
}

void resume_free(ResumeState *st) {
    for (int i = 0; i < st->n_runs; i++)
        refs_free(&st->runs[i].events);
    for (int i = 0; i < st->n_damage; i++)
        free(st->damage[i].runs);
    free(st->damage);
    free(st->runs);
    free(st->data);
    free(st->decisions);
    free(st->tunes);
    free(st->calib);
    memset(st, 0, sizeof *st);
}

int resume_match(const ResumeState *st, const Plan *p, ResumeMatch *m) {
    memset(m, 0, sizeof *m);
    m->missing = -1;
    IdIndex ix = {0}; /* plan ids are distinct (plan_build checks) */
    char *known = calloc((size_t)p->n_runs + 1, 1);
    m->plan_of = malloc(((size_t)st->n_runs + 1) * sizeof *m->plan_of);
    m->fresh = malloc(((size_t)p->n_runs + 1) * sizeof *m->fresh);
    if (!known || !m->plan_of || !m->fresh ||
        id_index_build(&ix, p->n_runs ? p->runs[0].id : "", sizeof *p->runs, p->n_runs) != 0) {
        free(known);
        resume_match_free(m);
        return -1;
    }
    for (int k = 0; k < st->n_runs; k++) {
        const char *id = st->runs[k].id;
        m->plan_of[k] = -1;
        if (!id[0]) continue; /* an index whose plan record was lost */
        int i = id_index_find(&ix, id);
        if (i >= 0) m->plan_of[k] = i, known[i] = 1;
        if (m->plan_of[k] < 0 && m->missing < 0) m->missing = k;
    }
    m->id_compares = ix.compares;
    for (int i = 0; i < p->n_runs; i++)
        if (!known[i]) m->fresh[m->n_fresh++] = i;
    id_index_free(&ix);
    free(known);
    return 0;
}

void resume_match_free(ResumeMatch *m) {
    free(m->plan_of);
    free(m->fresh);
    memset(m, 0, sizeof *m);
}

/* Every lookup goes through a hash index (id_index.h): resume adopts over every journaled
 * run, and a linear search each made resuming 10^5 runs quadratic. */
int run_id_adopt(Plan *p, const ResumeState *rs) {
    if (p->n_runs == 0) return 0;
    char(*v1)[RUN_ID_CHARS] = NULL; /* the plan's scheme-1 ids, computed when first needed */
    IdIndex ix, ix1 = {0};
    if (id_index_build(&ix, p->runs[0].id, sizeof p->runs[0], p->n_runs) != 0) return -1;
    int adopted = 0;
    for (int k = 0; k < rs->n_runs; k++) {
        const char *old = rs->runs[k].id;
        if (!old[0] || id_index_find(&ix, old) >= 0) continue;
        if (!v1) {
            if (!(v1 = malloc(sizeof *v1 * (size_t)(p->n_runs + 1)))) goto oom;
            for (int i = 0; i < p->n_runs; i++)
                run_id_format(run_id_hash_v1(&p->runs[i].cfg, p->runs[i].seed), v1[i]);
            if (id_index_build(&ix1, v1[0], sizeof v1[0], p->n_runs) != 0) goto oom;
        }
        int i = id_index_find(&ix1, old);
        if (i >= 0) {
            memcpy(p->runs[i].id, old, RUN_ID_CHARS);
            adopted++;
        }
    }
    id_index_free(&ix1);
    free(v1);
    id_index_free(&ix);
    return adopted;
oom:
    id_index_free(&ix1);
    free(v1);
    id_index_free(&ix);
    return -1;
}
