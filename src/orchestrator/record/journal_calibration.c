#include "journal_calibration.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/le.h"

static void buf_f64(Buf *b, double v) {
    uint8_t t[8];
    le_put_f64(t, v);
    buf_add(b, t, sizeof t);
}

static void buf_s(Buf *b, const char *s) {
    le_buf_str(b, s, strlen(s));
}

int journal_append_calibration(Journal *j, const JournalCalibration *c) {
    Buf b = {0};
    buf_s(&b, c->group);
    buf_s(&b, c->config);
    le_buf_u32(&b, (uint32_t)c->trial);
    le_buf_u32(&b, (uint32_t)c->t.steps);
    le_buf_u32(&b, (uint32_t)c->warmup);
    buf_f64(&b, c->t.tokens_per_s);
    buf_f64(&b, c->t.seconds);
    buf_f64(&b, c->t.load1);
    buf_s(&b, c->t.host);
    buf_s(&b, c->t.blas_core);
    buf_s(&b, c->t.utc);
    int rc = b.oom ? journal_set_error(j, "out of memory building a record")
                   : journal_append(j, JREC_CALIBRATION, JOURNAL_NO_RUN, b.p, b.len);
    free(b.p);
    return rc;
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
