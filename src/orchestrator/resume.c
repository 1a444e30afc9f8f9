#include "resume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(ResumeState *st, uint32_t index) {
    if (index < (uint32_t)st->n_runs) return 0;
    ResumeRun *r = realloc(st->runs, sizeof *r * ((size_t)index + 1));
    if (!r) return -1;
    memset(r + st->n_runs, 0, sizeof *r * ((size_t)index + 1 - (size_t)st->n_runs));
    st->runs = r;
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
