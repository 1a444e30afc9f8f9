#include "journal_tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/le.h"

int journal_append_tune(Journal *j, const JournalTune *t) {
    Buf b = {0};
    le_buf_u32(&b, (uint32_t)t->config);
    le_buf_cstr(&b, t->name);
    le_buf_u32(&b, (uint32_t)t->n_knobs);
    for (int k = 0; k < t->n_knobs; k++)
        le_buf_cstr(&b, t->knob[k]);
    le_buf_u32(&b, (uint32_t)t->n_rungs);
    for (int r = 0; r < t->n_rungs; r++)
        le_buf_f64(&b, t->frac[r]);
    le_buf_u32(&b, (uint32_t)t->n_cand);
    for (int c = 0; c < t->n_cand; c++) {
        for (int k = 0; k < t->n_knobs; k++)
            le_buf_cstr(&b, t->value[c][k]);
        le_buf_u32(&b, (uint32_t)t->seeds[c]);
        le_buf_u32(&b, (uint32_t)t->rung[c]);
        le_buf_f64(&b, t->metric[c]);
    }
    le_buf_u32(&b, (uint32_t)t->chosen);
    le_buf_u32(&b, (uint32_t)t->decided);
    for (int c = 0; c < t->n_cand; c++) {
        int m = t->decided + 1;
        le_buf_u32(&b, (uint32_t)m);
        for (int r = 0; r < m; r++)
            le_buf_f64(&b, t->at[c][r]);
    }
    return journal_append_buf(j, JREC_TUNE, JOURNAL_NO_RUN, &b);
}

int journal_decode_tune(const JournalRecord *rec, JournalTune *t) {
    if (rec->type != JREC_TUNE) return -1;
    LeReader r = le_reader(rec->payload, rec->len);
    memset(t, 0, sizeof *t);
    t->config = (int)le_read_u32(&r);
    if (le_read_str_into(&r, t->name, sizeof t->name)) return -1;
    uint32_t nk = le_read_u32(&r);
    if (r.bad || nk < 1 || nk > SPEC_TUNE_MAX_KNOBS) return -1;
    t->n_knobs = (int)nk;
    for (int k = 0; k < t->n_knobs; k++)
        if (le_read_str_into(&r, t->knob[k], sizeof t->knob[k])) return -1;
    uint32_t nr = le_read_u32(&r);
    if (r.bad || nr < 1 || nr > SPEC_TUNE_MAX_RUNGS) return -1;
    t->n_rungs = (int)nr;
    for (int i = 0; i < t->n_rungs; i++)
        t->frac[i] = le_read_f64(&r);
    uint32_t nc = le_read_u32(&r);
    if (r.bad || nc < 1 || nc > SPEC_TUNE_MAX_CANDIDATES) return -1;
    t->n_cand = (int)nc;
    for (int c = 0; c < t->n_cand; c++) {
        for (int k = 0; k < t->n_knobs; k++)
            if (le_read_str_into(&r, t->value[c][k], sizeof t->value[c][k])) return -1;
        t->seeds[c] = (int)le_read_u32(&r);
        t->rung[c] = (int)le_read_u32(&r);
        t->metric[c] = le_read_f64(&r);
    }
    t->chosen = (int)le_read_u32(&r);
    for (int c = 0; c < t->n_cand; c++)
        for (int i = 0; i < SPEC_TUNE_MAX_RUNGS; i++)
            t->at[c][i] = NAN;
    if (!r.bad && r.p == r.end) { /* before successive halving: one rung, the full budget */
        t->decided = t->n_rungs - 1;
        for (int c = 0; c < t->n_cand; c++)
            if (t->rung[c] >= 0 && t->rung[c] < t->n_rungs) t->at[c][t->rung[c]] = t->metric[c];
    } else {
        uint32_t d = le_read_u32(&r);
        if (r.bad || d >= (uint32_t)t->n_rungs) return -1;
        t->decided = (int)d;
        for (int c = 0; c < t->n_cand; c++) {
            uint32_t m = le_read_u32(&r);
            if (r.bad || m > (uint32_t)t->n_rungs) return -1;
            for (uint32_t i = 0; i < m; i++)
                t->at[c][i] = le_read_f64(&r);
        }
    }
    int last = t->decided == t->n_rungs - 1;
    if (r.bad || r.p != r.end || (last ? t->chosen < 0 : t->chosen != -1) || t->chosen >= t->n_cand)
        return -1;
    return 0;
}

int journal_tune_same(const JournalTune *a, const JournalTune *b) {
    if (a->config != b->config || strcmp(a->name, b->name) || a->n_knobs != b->n_knobs ||
        a->n_rungs != b->n_rungs || a->n_cand != b->n_cand || a->chosen != b->chosen ||
        a->decided != b->decided)
        return 0;
    for (int k = 0; k < a->n_knobs; k++)
        if (strcmp(a->knob[k], b->knob[k])) return 0;
    for (int i = 0; i < a->n_rungs; i++)
        if (a->frac[i] != b->frac[i]) return 0;
    for (int c = 0; c < a->n_cand; c++) {
        for (int k = 0; k < a->n_knobs; k++)
            if (strcmp(a->value[c][k], b->value[c][k])) return 0;
        /* the same bits: NaN never occurs (a diverged run's metric is +inf) */
        if (a->seeds[c] != b->seeds[c] || a->rung[c] != b->rung[c] ||
            memcmp(&a->metric[c], &b->metric[c], sizeof(double)) != 0)
            return 0;
        for (int i = 0; i <= a->decided; i++) /* NaN (not reached) is compared as bits too */
            if (memcmp(&a->at[c][i], &b->at[c][i], sizeof(double)) != 0) return 0;
    }
    return 1;
}
