/* The journal's record payloads: what each record type carries (layouts in journal.h),
 * built with the shared little-endian writer and decoded with its bounds-checked reader
 * (util/le.h). The records themselves (framing, CRC, buffering, locking, reading) are
 * journal.c's. */
#include "journal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event_codec.h"
#include "util/buf.h"
#include "util/le.h"
#include "worker/knobs.h"
#include "orchestrator/plan/plan.h"

_Static_assert(PLAN_NAME_MAX < JOURNAL_NAME_MAX, "the journal must keep whole run names");

int journal_type_of_run(int type) {
    return type == JREC_RUN_BEGIN || type == JREC_EVENTS || type == JREC_RUN_END ||
           type == JREC_CHECKPOINT;
}

const char *journal_type_name(int type) {
    switch (type) {
    case JREC_HEADER:
        return "header";
    case JREC_PLAN:
        return "plan";
    case JREC_RUN_BEGIN:
        return "run_begin";
    case JREC_EVENTS:
        return "events";
    case JREC_RUN_END:
        return "run_end";
    case JREC_CHECKPOINT:
        return "checkpoint";
    case JREC_SWEEP_END:
        return "sweep_end";
    case JREC_DAMAGE:
        return "damage";
    case JREC_DATA:
        return "data";
    case JREC_REPLICATE:
        return "replicate";
    case JREC_DECISION:
        return "decision";
    case JREC_CALIBRATION:
        return "calibration";
    case JREC_TUNE:
        return "tune";
    default:
        return "unknown";
    }
}

/* ---------------- payload building ---------------- */

/* Payloads are built in the shared Buf (util/buf.h) with util/le.h's writers. */
int journal_append_buf(Journal *j, int type, uint32_t run, Buf *b) {
    int rc;
    if (b->oom) {
        rc = journal_set_error(j, "out of memory building a record");
    } else {
        rc = journal_append(j, type, run, b->p, b->len);
    }
    free(b->p);
    return rc;
}

static int append_kv(Journal *j, int type, const char *const *kv, int n_pairs) {
    Buf b = {0};
    for (int i = 0; i < n_pairs; i++) {
        const char *k = kv[2 * i], *v = kv[2 * i + 1] ? kv[2 * i + 1] : "";
        le_buf_str(&b, k, strlen(k));
        le_buf_str(&b, v, strlen(v));
    }
    return journal_append_buf(j, type, JOURNAL_NO_RUN, &b);
}

int journal_append_header(Journal *j, const char *const *kv, int n_pairs) {
    return append_kv(j, JREC_HEADER, kv, n_pairs);
}
int journal_append_sweep_end(Journal *j, const char *const *kv, int n_pairs) {
    return append_kv(j, JREC_SWEEP_END, kv, n_pairs);
}
int journal_append_data(Journal *j, const char *const *kv, int n_pairs) {
    return append_kv(j, JREC_DATA, kv, n_pairs);
}

int journal_config_text(const RunConfig *c, char *buf, size_t n) {
    size_t len = 0;
    char val[4 * ABL_PATH_MAX];
    for (int i = 0; i < knob_count; i++) {
        const Knob *k = &knob_table[i];
        int vl = knob_format(c, k, val, sizeof val);
        if (vl < 0 || (size_t)vl >= sizeof val) return -1;
        size_t nl = strlen(k->name);
        if (len + nl + 1 >= n) return -1;
        memcpy(buf + len, k->name, nl);
        len += nl;
        buf[len++] = '=';
        for (int v = 0; v < vl; v++) {
            char ch = val[v];
            const char *esc = ch == '\\' ? "\\\\" : ch == '\n' ? "\\n" : ch == '\r' ? "\\r" : NULL;
            size_t el = esc ? 2 : 1;
            if (len + el >= n) return -1;
            if (esc) {
                buf[len++] = esc[0];
                buf[len++] = esc[1];
            } else {
                buf[len++] = ch;
            }
        }
        if (len + 1 >= n) return -1;
        buf[len++] = '\n';
    }
    buf[len] = 0;
    return (int)len;
}

int journal_append_plan(Journal *j, uint32_t index, const char *id16, const char *name,
                        uint64_t seed, const RunConfig *config) {
    return journal_append_plan2(j, index, id16, name, seed, config, NULL);
}

int journal_append_plan2(Journal *j, uint32_t index, const char *id16, const char *name,
                         uint64_t seed, const RunConfig *config, const char *overrides) {
    size_t cap = 64 * 1024;
    char *text = malloc(cap);
    int tl = text ? journal_config_text(config, text, cap) : -1;
    if (tl < 0) {
        free(text);
        return journal_set_error(j, "cannot format a run config");
    }
    Buf b = {0};
    char id[16];
    memset(id, '0', sizeof id);
    memcpy(id, id16, strnlen(id16, 16));
    buf_add(&b, id, 16);
    le_buf_u64(&b, seed);
    le_buf_str(&b, name, strnlen(name, JOURNAL_NAME_MAX - 1));
    le_buf_str(&b, text, (size_t)tl);
    if (overrides) le_buf_str(&b, overrides, strlen(overrides));
    free(text);
    return journal_append_buf(j, JREC_PLAN, index, &b);
}

int journal_append_begin(Journal *j, uint32_t run, uint32_t attempt, int32_t rank, const char *host,
                         int64_t resumed_from_step) {
    Buf b = {0};
    le_buf_u32(&b, attempt);
    le_buf_u32(&b, (uint32_t)rank);
    le_buf_u64(&b, (uint64_t)resumed_from_step);
    le_buf_str(&b, host ? host : "", host ? strnlen(host, JOURNAL_HOST_MAX - 1) : 0);
    return journal_append_buf(j, JREC_RUN_BEGIN, run, &b);
}

int journal_append_events(Journal *j, uint32_t run, uint32_t attempt, const void *packed,
                          size_t len) {
    uint8_t a[4];
    le_put_u32(a, attempt);
    return journal_append2(j, JREC_EVENTS, run, a, 4, packed, len);
}

int journal_append_end(Journal *j, uint32_t run, uint32_t attempt, int32_t rank, const char *host,
                       const EndEvent *end) {
    Buf b = {0};
    le_buf_u32(&b, attempt);
    le_buf_u32(&b, (uint32_t)rank);
    le_buf_str(&b, host ? host : "", host ? strnlen(host, JOURNAL_HOST_MAX - 1) : 0);
    Event ev;
    ev.kind = EV_END;
    ev.u.end = *end;
    uint8_t packed[EVENT_PACK_MAX];
    size_t n = event_pack(&ev, packed, sizeof packed);
    buf_add(&b, packed, n);
    return journal_append_buf(j, JREC_RUN_END, run, &b);
}

int journal_append_checkpoint(Journal *j, uint32_t run, uint32_t attempt, int64_t step,
                              const char *path) {
    Buf b = {0};
    le_buf_u32(&b, attempt);
    le_buf_u64(&b, (uint64_t)step);
    le_buf_str(&b, path ? path : "", path ? strnlen(path, ABL_PATH_MAX - 1) : 0);
    return journal_append_buf(j, JREC_CHECKPOINT, run, &b);
}

int journal_append_damage(Journal *j, uint64_t offset, uint64_t length, const char *saved_path) {
    Buf b = {0};
    le_buf_u64(&b, offset);
    le_buf_u64(&b, length);
    le_buf_str(&b, saved_path, strnlen(saved_path, ABL_PATH_MAX - 1));
    return journal_append_buf(j, JREC_DAMAGE, JOURNAL_NO_RUN, &b);
}

/* ---------------- payload decoding ---------------- */

/* A str into a fixed buffer (must fit with its NUL). */
static void read_str_into(LeReader *c, char *dst, size_t cap) {
    size_t n;
    const char *s = le_read_str(c, &n);
    if (c->bad || n >= cap) {
        c->bad = 1;
        dst[0] = 0;
        return;
    }
    memcpy(dst, s, n);
    dst[n] = 0;
}

void journal_kv_begin(JournalKvIter *it, const uint8_t *payload, size_t len) {
    it->p = payload;
    it->end = payload + len;
}

int journal_kv_next(JournalKvIter *it, const char **key, size_t *klen, const char **val,
                    size_t *vlen) {
    if (it->p == it->end) return 0;
    LeReader c = le_reader(it->p, (size_t)(it->end - it->p));
    *key = le_read_str(&c, klen);
    *val = le_read_str(&c, vlen);
    if (c.bad) return -1;
    it->p = c.p;
    return 1;
}

int journal_decode_plan(const JournalRecord *rec, JournalPlan *plan) {
    LeReader c = le_reader(rec->payload, rec->len);
    const uint8_t *id = le_read_bytes(&c, 16);
    if (rec->type != JREC_PLAN || !id) return -1;
    plan->index = rec->run;
    memcpy(plan->id, id, 16);
    plan->id[16] = 0;
    plan->seed = le_read_u64(&c);
    read_str_into(&c, plan->name, sizeof plan->name);
    plan->config_text = le_read_str(&c, &plan->config_len);
    plan->overrides = NULL;
    plan->overrides_len = 0;
    if (!c.bad && c.p != c.end) plan->overrides = le_read_str(&c, &plan->overrides_len);
    return c.bad || c.p != c.end ? -1 : 0;
}

int journal_decode_begin(const JournalRecord *rec, JournalBegin *b) {
    LeReader c = le_reader(rec->payload, rec->len);
    if (rec->type != JREC_RUN_BEGIN) return -1;
    b->attempt = le_read_u32(&c);
    b->rank = (int32_t)le_read_u32(&c);
    b->resumed_from_step = (int64_t)le_read_u64(&c);
    read_str_into(&c, b->host, sizeof b->host);
    return c.bad || c.p != c.end ? -1 : 0;
}

int journal_decode_end(const JournalRecord *rec, JournalEnd *e) {
    LeReader c = le_reader(rec->payload, rec->len);
    if (rec->type != JREC_RUN_END) return -1;
    e->attempt = le_read_u32(&c);
    e->rank = (int32_t)le_read_u32(&c);
    read_str_into(&c, e->host, sizeof e->host);
    if (c.bad) return -1;
    Event ev;
    size_t used;
    if (event_unpack(c.p, le_left(&c), &ev, &used) != 0 || ev.kind != EV_END || used != le_left(&c))
        return -1;
    e->end = ev.u.end;
    return 0;
}

int journal_decode_checkpoint(const JournalRecord *rec, JournalCheckpoint *ck) {
    LeReader c = le_reader(rec->payload, rec->len);
    if (rec->type != JREC_CHECKPOINT) return -1;
    ck->attempt = le_read_u32(&c);
    ck->step = (int64_t)le_read_u64(&c);
    read_str_into(&c, ck->path, sizeof ck->path);
    return c.bad || c.p != c.end ? -1 : 0;
}

int journal_decode_damage(const JournalRecord *rec, JournalDamage *d) {
    LeReader c = le_reader(rec->payload, rec->len);
    if (rec->type != JREC_DAMAGE) return -1;
    d->offset = le_read_u64(&c);
    d->length = le_read_u64(&c);
    read_str_into(&c, d->saved_path, sizeof d->saved_path);
    return c.bad || c.p != c.end ? -1 : 0;
}

int journal_decode_events(const JournalRecord *rec, uint32_t *attempt, const uint8_t **packed,
                          size_t *len) {
    if (rec->type != JREC_EVENTS || rec->len < 4) return -1;
    *attempt = le_get_u32(rec->payload);
    *packed = rec->payload + 4;
    *len = rec->len - 4;
    return 0;
}

int journal_plan_config(const JournalPlan *plan, RunConfig *c, char err[ABL_ERR_MAX]) {
    run_config_default(c);
    char line[4 * ABL_PATH_MAX];
    const char *p = plan->config_text, *end = p + plan->config_len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t n = 0;
        for (const char *q = p; q < le; q++) {
            char ch = *q;
            if (ch == '\\' && q + 1 < le) {
                q++;
                ch = *q == 'n' ? '\n' : *q == 'r' ? '\r' : *q;
            }
            if (n + 1 >= sizeof line) {
                snprintf(err, ABL_ERR_MAX, "plan of run %u: config line too long", plan->index);
                return -1;
            }
            line[n++] = ch;
        }
        line[n] = 0;
        if (n > 0) {
            char e2[ABL_ERR_MAX];
            if (knob_assign(c, line, e2) != 0) {
                snprintf(err, ABL_ERR_MAX, "plan of run %u: %.400s", plan->index, e2);
                return -1;
            }
        }
        p = nl ? nl + 1 : end;
    }
    return 0;
}
