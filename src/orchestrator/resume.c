#include "resume.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(ResumeState *st, uint32_t index) {
    if (index < (uint32_t)st->n_runs) return 0;
    if (index >= (uint32_t)st->cap) { /* doubling: one plan record per run stays linear */
        size_t cap = st->cap ? 2 * (size_t)st->cap : 64;
        while (cap <= index)
            cap *= 2;
        if (cap > INT_MAX) return -1;
        ResumeRun *r = realloc(st->runs, sizeof *r * cap);
        if (!r) return -1;
        st->runs = r;
        st->cap = (int)cap;
    }
    memset(st->runs + st->n_runs, 0, sizeof *st->runs * ((size_t)index + 1 - (size_t)st->n_runs));
    st->n_runs = (int)index + 1;
    return 0;
}

int resume_read(const char *journal_path, ResumeState *st, char err[ABL_ERR_MAX]) {
    memset(st, 0, sizeof *st);
    JournalReader *r = journal_reader_open(journal_path, err);
    if (!r) return -1;
    JournalRecord rec;
    int rc;
    while ((rc = journal_reader_next(r, &rec)) == 1) {
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
            /* a resumed attempt keeps its checkpoint until it writes a newer one */
            if (b.resumed_from_step == 0) run->ckpt_step = 0, run->ckpt_path[0] = '\0';
        } else if (rec.type == JREC_RUN_END) {
            JournalEnd e;
            if (journal_decode_end(&rec, &e) != 0 || e.attempt < run->attempt) continue;
            run->attempt = e.attempt;
            run->finished = e.end.status != RUN_INTERRUPTED;
            run->status = e.end.status;
        } else if (rec.type == JREC_CHECKPOINT) {
            JournalCheckpoint c;
            if (journal_decode_checkpoint(&rec, &c) != 0 || c.attempt < run->attempt) continue;
            run->ckpt_step = c.step;
            snprintf(run->ckpt_path, sizeof run->ckpt_path, "%s", c.path);
        }
    }
    st->torn_bytes = journal_reader_torn_bytes(r);
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
    free(st->runs);
    memset(st, 0, sizeof *st);
}

static uint64_t id_hash(const char *id) {
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (; *id; id++)
        h = (h ^ (unsigned char)*id) * 0x100000001b3ULL;
    return h;
}

int resume_match(const ResumeState *st, const Plan *p, ResumeMatch *m) {
    memset(m, 0, sizeof *m);
    m->missing = -1;
    size_t cap = 16;
    while (cap < 2 * (size_t)p->n_runs)
        cap *= 2;
    int *slot = malloc(cap * sizeof *slot); /* plan index + 1; 0 = empty */
    char *known = calloc((size_t)p->n_runs + 1, 1);
    m->plan_of = malloc(((size_t)st->n_runs + 1) * sizeof *m->plan_of);
    m->fresh = malloc(((size_t)p->n_runs + 1) * sizeof *m->fresh);
    if (!slot || !known || !m->plan_of || !m->fresh) {
        free(slot);
        free(known);
        resume_match_free(m);
        return -1;
    }
    memset(slot, 0, cap * sizeof *slot);
    for (int i = 0; i < p->n_runs; i++) { /* plan ids are distinct (plan_build checks) */
        size_t h = (size_t)id_hash(p->runs[i].id) & (cap - 1);
        while (slot[h])
            h = (h + 1) & (cap - 1);
        slot[h] = i + 1;
    }
    for (int k = 0; k < st->n_runs; k++) {
        const char *id = st->runs[k].id;
        m->plan_of[k] = -1;
        if (!id[0]) continue; /* an index whose plan record was lost */
        for (size_t h = (size_t)id_hash(id) & (cap - 1); slot[h]; h = (h + 1) & (cap - 1)) {
            m->id_compares++;
            if (!strcmp(p->runs[slot[h] - 1].id, id)) {
                m->plan_of[k] = slot[h] - 1;
                known[slot[h] - 1] = 1;
                break;
            }
        }
        if (m->plan_of[k] < 0 && m->missing < 0) m->missing = k;
    }
    for (int i = 0; i < p->n_runs; i++)
        if (!known[i]) m->fresh[m->n_fresh++] = i;
    free(slot);
    free(known);
    return 0;
}

void resume_match_free(ResumeMatch *m) {
    free(m->plan_of);
    free(m->fresh);
    memset(m, 0, sizeof *m);
}
