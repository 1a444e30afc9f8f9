/* Little-endian bytes, written and read: the one encoding of the journal's records and
 * framing (orchestrator/record/journal*.c), the packed events (event_codec.c) and llm.c
 * token files, whatever the host's byte order.
 *
 * Writing: le_put_* store at p (the caller guarantees room) and return p past the value;
 * le_buf_* append to a Buf (an allocation failure sets its oom, as buf_add does).
 * Reading: le_get_* load from bytes the caller has checked; an LeReader is a cursor over
 * [p, end) whose every read is bounds-checked: a read past the end returns 0 (or NULL),
 * sets bad and moves the cursor to the end, so a truncated buffer is an error the caller
 * checks once (r.bad) and never an overread.
 *
 * Formats: u32/u64 fixed width; f64 the 8 bytes of the IEEE-754 double as a u64; uvarint
 * LEB128 (7 bits a byte, low first, at most 10 bytes); str a u32 length and the bytes, no
 * NUL. */
#ifndef ABLATE_UTIL_LE_H
#define ABLATE_UTIL_LE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"

#define LE_UVARINT_MAX 10

/* ---- writing ---- */

static inline uint8_t *le_put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
    return p + 4;
}

static inline uint8_t *le_put_u64(uint8_t *p, uint64_t v) {
    le_put_u32(p, (uint32_t)v);
    return le_put_u32(p + 4, (uint32_t)(v >> 32));
}

static inline uint8_t *le_put_f64(uint8_t *p, double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return le_put_u64(p, u);
}

static inline uint8_t *le_put_uvarint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Bytes le_put_uvarint writes for v (1 to LE_UVARINT_MAX). */
static inline size_t le_uvarint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline void le_buf_u32(Buf *b, uint32_t v) {
    uint8_t t[4];
    le_put_u32(t, v);
    buf_add(b, t, sizeof t);
}

static inline void le_buf_u64(Buf *b, uint64_t v) {
    uint8_t t[8];
    le_put_u64(t, v);
    buf_add(b, t, sizeof t);
}

static inline void le_buf_f64(Buf *b, double v) {
    uint8_t t[8];
    le_put_f64(t, v);
    buf_add(b, t, sizeof t);
}

/* A str of n bytes; longer than a u32 can say sets oom. */
static inline void le_buf_str(Buf *b, const char *s, size_t n) {
    if (n > 0xFFFFFFFFu) {
        b->oom = 1;
        return;
    }
    le_buf_u32(b, (uint32_t)n);
    buf_add(b, s, n);
}

/* A NUL-terminated string as a str (NULL: ""). */
static inline void le_buf_cstr(Buf *b, const char *s) {
    le_buf_str(b, s ? s : "", s ? strlen(s) : 0);
}

/* ---- reading bytes already checked ---- */

static inline uint32_t le_get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t le_get_u64(const uint8_t *p) {
    return le_get_u32(p) | (uint64_t)le_get_u32(p + 4) << 32;
}

static inline double le_get_f64(const uint8_t *p) {
    uint64_t u = le_get_u64(p);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* ---- the bounds-checked cursor ---- */

typedef struct {
    const uint8_t *p, *end;
    int bad; /* a read ran past end (or a caller's check failed): stays set */
} LeReader;

static inline LeReader le_reader(const void *buf, size_t n) {
    LeReader r = {(const uint8_t *)buf, (const uint8_t *)buf + n, 0};
    return r;
}

static inline size_t le_left(const LeReader *r) {
    return (size_t)(r->end - r->p);
}

/* Marks the reader bad (a truncated or malformed buffer) and returns NULL. */
static inline const uint8_t *le_fail(LeReader *r) {
    r->bad = 1;
    r->p = r->end;
    return NULL;
}

/* The next n bytes (advancing past them), or NULL if fewer are left. */
static inline const uint8_t *le_read_bytes(LeReader *r, size_t n) {
    if (n > le_left(r)) return le_fail(r);
    const uint8_t *s = r->p;
    r->p += n;
    return s;
}

static inline uint8_t le_read_u8(LeReader *r) {
    const uint8_t *s = le_read_bytes(r, 1);
    return s ? s[0] : 0;
}

static inline uint32_t le_read_u32(LeReader *r) {
    const uint8_t *s = le_read_bytes(r, 4);
    return s ? le_get_u32(s) : 0;
}

static inline uint64_t le_read_u64(LeReader *r) {
    const uint8_t *s = le_read_bytes(r, 8);
    return s ? le_get_u64(s) : 0;
}

static inline double le_read_f64(LeReader *r) {
    const uint8_t *s = le_read_bytes(r, 8);
    return s ? le_get_f64(s) : 0;
}

/* A uvarint; one that runs past the end or past LE_UVARINT_MAX bytes is bad. */
static inline uint64_t le_read_uvarint(LeReader *r) {
    uint64_t v = 0;
    for (int shift = 0; shift < 7 * LE_UVARINT_MAX; shift += 7) {
        if (r->p >= r->end) break;
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    le_fail(r);
    return 0;
}

/* A str: its bytes in place (not NUL-terminated) and their count in *len; "" if bad. */
static inline const char *le_read_str(LeReader *r, size_t *len) {
    uint32_t n = le_read_u32(r);
    const uint8_t *s = r->bad ? NULL : le_read_bytes(r, n);
    *len = s ? n : 0;
    return s ? (const char *)s : "";
}

/* A str into out (NUL-terminated): 0, or -1 if the reader is bad or it does not fit in cap
 * bytes with its NUL (a record's fixed-size text field). */
static inline int le_read_str_into(LeReader *r, char *out, size_t cap) {
    size_t n;
    const char *s = le_read_str(r, &n);
    if (r->bad || n >= cap) return -1;
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

#endif
