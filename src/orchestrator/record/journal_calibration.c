#include "journal_calibration.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/le.h"

int journal_append_calibration(Journal *j, const JournalCalibration *c) {
    Buf b = {0};
    le_buf_cstr(&b, c->group);
    le_buf_cstr(&b, c->config);
    le_buf_u32(&b, (uint32_t)c->trial);
    le_buf_u32(&b, (uint32_t)c->t.steps);
    le_buf_u32(&b, (uint32_t)c->warmup);
    le_buf_f64(&b, c->t.tokens_per_s);
    le_buf_f64(&b, c->t.seconds);
    le_buf_f64(&b, c->t.load1);
    le_buf_cstr(&b, c->t.host);
    le_buf_cstr(&b, c->t.blas_core);
    le_buf_cstr(&b, c->t.utc);
    return journal_append_buf(j, JREC_CALIBRATION, JOURNAL_NO_RUN, &b);
}

int journal_decode_calibration(const JournalRecord *rec, JournalCalibration *c) {
    if (rec->type != JREC_CALIBRATION) return -1;
    LeReader r = le_reader(rec->payload, rec->len);
    memset(c, 0, sizeof *c);
    if (le_read_str_into(&r, c->group, sizeof c->group) ||
        le_read_str_into(&r, c->config, sizeof c->config))
        return -1;
    c->trial = (int)le_read_u32(&r);
    c->t.steps = (int)le_read_u32(&r);
    c->warmup = (int)le_read_u32(&r);
    c->t.tokens_per_s = le_read_f64(&r);
    c->t.seconds = le_read_f64(&r);
    c->t.load1 = le_read_f64(&r);
    if (r.bad || le_read_str_into(&r, c->t.host, sizeof c->t.host) ||
        le_read_str_into(&r, c->t.blas_core, sizeof c->t.blas_core) ||
        le_read_str_into(&r, c->t.utc, sizeof c->t.utc) || r.p != r.end || c->trial < 1)
        return -1;
    return 0;
}
