#include "event_codec.h"

#include <string.h>

#include "util/le.h"
#include "worker/event_schema.h"

#define TAG_FULL    0x80u /* the version-2 prefix (event_schema.v2_fields) */
#define TAG_COUNTED 0x40u /* a varint field count follows the tag */

/* Events of a kind with no field beyond version 2 keep its encoding, byte for byte. */
static int counted(const EventSchema *s) {
    return s->n_fields != s->v2_fields;
}

/* ---- writing: the caller guarantees room ---- */

static inline uint64_t zigzag(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int get_int_at(const char *body, size_t off) {
    int v;
    memcpy(&v, body + off, sizeof v);
    return v;
}

/* Entries of an FT_HEADS field: its count field (the one before it), clamped. */
static int heads_count(const char *body, const FieldDesc *f) {
    int n = get_int_at(body, f[-1].offset);
    return n < 0 ? 0 : (n > (int)f->n ? (int)f->n : n);
}

static int kind_ok(const Event *ev) {
    return (unsigned)ev->kind < EV_KIND_COUNT;
}

static uint8_t *pack_unchecked(const Event *ev, uint8_t *p) {
    const EventSchema *s = &event_schema[ev->kind];
    const char *body = event_cbody(ev);
    if (counted(s)) {
        *p++ = (uint8_t)(ev->kind | TAG_COUNTED);
        p = le_put_uvarint(p, (uint64_t)s->n_fields);
    } else {
        *p++ = (uint8_t)(ev->kind | TAG_FULL);
    }
    for (int k = 0; k < s->n_fields; k++) {
        const FieldDesc *f = &s->fields[k];
        const char *v = body + f->offset;
        switch (f->type) {
        case FT_LONG: {
            long x;
            memcpy(&x, v, sizeof x);
            p = le_put_uvarint(p, zigzag(x));
            break;
        }
        case FT_INT:
            p = le_put_uvarint(p, zigzag(get_int_at(body, f->offset)));
            break;
        case FT_DOUBLE: {
            double d;
            memcpy(&d, v, sizeof d);
            p = le_put_f64(p, d);
            break;
        }
        case FT_BOOL:
            *p++ = (uint8_t)(get_int_at(body, f->offset) != 0);
            break;
        case FT_ENUM:
            *p++ = (uint8_t)get_int_at(body, f->offset);
            break;
        case FT_STR:
        case FT_TEXT: {
            size_t n;
            const char *t = field_text(body, f, &n);
            p = le_put_uvarint(p, n);
            memcpy(p, t, n);
            p += n;
            break;
        }
        case FT_HEADS: {
            int n = heads_count(body, f);
            for (int h = 0; h < n; h++) {
                double d;
                memcpy(&d, v + (size_t)h * sizeof d, sizeof d);
                p = le_put_f64(p, d);
            }
            break;
        }
        }
    }
    return p;
}

/* Bytes of one field: as packed for this body, or the most it can take (body NULL). */
static size_t field_size(const FieldDesc *f, const char *body) {
    switch (f->type) {
    case FT_LONG: {
        long x;
        if (!body) return 10;
        memcpy(&x, body + f->offset, sizeof x);
        return le_uvarint_len(zigzag(x));
    }
    case FT_INT:
        return body ? le_uvarint_len(zigzag(get_int_at(body, f->offset))) : 5;
    case FT_DOUBLE:
        return 8;
    case FT_BOOL:
    case FT_ENUM:
        return 1;
    case FT_STR:
    case FT_TEXT: {
        size_t n = f->n - 1;
        if (body) field_text(body, f, &n);
        return le_uvarint_len(n) + n;
    }
    case FT_HEADS:
        return 8 * (body ? (size_t)heads_count(body, f) : f->n);
    }
    return 0;
}

static size_t kind_size(EventKind kind, const char *body) {
    const EventSchema *s = &event_schema[kind];
    size_t total = 1 + (counted(s) ? le_uvarint_len((uint64_t)s->n_fields) : 0);
    for (int k = 0; k < s->n_fields; k++)
        total += field_size(&s->fields[k], body);
    return total;
}

size_t event_packed_size(const Event *ev) {
    return kind_ok(ev) ? kind_size(ev->kind, event_cbody(ev)) : 0;
}

size_t event_packed_max(EventKind kind) {
    return (unsigned)kind < EV_KIND_COUNT ? kind_size(kind, NULL) : 0;
}

size_t event_pack(const Event *ev, uint8_t *buf, size_t cap) {
    if (!kind_ok(ev)) return 0;
    if (cap >= EVENT_PACK_MAX) return (size_t)(pack_unchecked(ev, buf) - buf);
    size_t need = event_packed_size(ev);
    if (need > cap) return 0;
    uint8_t tmp[EVENT_PACK_MAX];
    size_t n = (size_t)(pack_unchecked(ev, tmp) - tmp);
    memcpy(buf, tmp, n);
    return n;
}

/* ---- reading: every field is bounds-checked ---- */

static inline int64_t get_iv(LeReader *r) {
    uint64_t u = le_read_uvarint(r);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static int read_field(LeReader *r, char *body, const FieldDesc *f) {
    char *v = body + f->offset;
    switch (f->type) {
    case FT_LONG: {
        long x = (long)get_iv(r);
        memcpy(v, &x, sizeof x);
        return 0;
    }
    case FT_INT: {
        int64_t x = get_iv(r);
        if (x < -2147483647 - 1 || x > 2147483647) return -1;
        int i = (int)x;
        memcpy(v, &i, sizeof i);
        return 0;
    }
    case FT_DOUBLE: {
        double d = le_read_f64(r);
        memcpy(v, &d, sizeof d);
        return 0;
    }
    case FT_BOOL:
    case FT_ENUM: {
        int i = le_read_u8(r);
        if (f->type == FT_ENUM && (size_t)i >= f->n) return -1;
        memcpy(v, &i, sizeof i);
        return 0;
    }
    case FT_STR:
    case FT_TEXT: {
        uint64_t n = le_read_uvarint(r);
        const uint8_t *t = r->bad || n >= f->n ? NULL : le_read_bytes(r, (size_t)n);
        if (!t) return -1;
        memcpy(v, t, (size_t)n);
        v[n] = 0;
        if (f->type == FT_TEXT) {
            int len = (int)n;
            memcpy(body + f->len_offset, &len, sizeof len);
        }
        return 0;
    }
    case FT_HEADS: {
        int n = get_int_at(body, f[-1].offset);
        if (n < 0 || n > (int)f->n) return -1;
        for (int h = 0; h < n; h++) {
            double d = le_read_f64(r);
            memcpy(v + (size_t)h * sizeof d, &d, sizeof d);
        }
        return 0;
    }
    }
    return -1;
}

int event_unpack(const uint8_t *buf, size_t n, Event *ev, size_t *used) {
    LeReader r = le_reader(buf, n);
    uint8_t tag = le_read_u8(&r);
    uint8_t kind = tag & (uint8_t) ~(TAG_FULL | TAG_COUNTED);
    if (r.bad || kind >= EV_KIND_COUNT || (tag & TAG_FULL && tag & TAG_COUNTED)) return -1;
    ev->kind = (EventKind)kind;
    const EventSchema *s = &event_schema[kind];
    int nf = (tag & TAG_FULL) ? s->v2_fields : s->v1_fields;
    if (tag & TAG_COUNTED) { /* fields beyond n_fields: a newer ablate's, not readable here */
        uint64_t c = le_read_uvarint(&r);
        if (r.bad || c < (uint64_t)s->v1_fields || c > (uint64_t)s->n_fields) return -1;
        nf = (int)c;
    }
    char *body = event_body(ev);
    for (int k = 0; k < nf; k++)
        if (read_field(&r, body, &s->fields[k]) != 0 || r.bad) return -1;
    if (nf < s->n_fields) event_fields_default(body, ev->kind, nf);
    if (ev->kind == EV_START) ev->u.start.config = NULL;
    if (used) *used = (size_t)(r.p - buf);
    return 0;
}
