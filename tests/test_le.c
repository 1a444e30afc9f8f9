/* The shared little-endian writer and bounds-checked reader (util/le.h) that the journal's
 * records and the packed events are made of: the exact bytes, and a truncated or malformed
 * buffer read as an error, never past its end (each prefix is its own allocation, so an
 * overread is also an ASan error). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "util/buf.h"
#include "util/le.h"

/* One of each: u32, u64, f64, uvarint (300), str "abc". */
static size_t encode_sample(uint8_t *buf) {
    uint8_t *p = buf;
    p = le_put_u32(p, 0x01020304u);
    p = le_put_u64(p, 0x1122334455667788ull);
    p = le_put_f64(p, -2.5);
    p = le_put_uvarint(p, 300);
    p = le_put_u32(p, 3);
    memcpy(p, "abc", 3);
    p += 3;
    return (size_t)(p - buf);
}

TEST(bytes) {
    uint8_t buf[64];
    size_t n = encode_sample(buf);
    static const uint8_t want[] = {
        0x04, 0x03, 0x02, 0x01,                         /* u32 */
        0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, /* u64 */
        0,    0,    0,    0,    0,    0,    0x04, 0xC0, /* -2.5 as IEEE-754 */
        0xAC, 0x02,                                     /* 300 as LEB128 */
        3,    0,    0,    0,    'a',  'b',  'c'};
    CHECK(n == sizeof want);
    CHECK(memcmp(buf, want, sizeof want) == 0);
    CHECK(le_get_u32(buf) == 0x01020304u);
    CHECK(le_get_u64(buf + 4) == 0x1122334455667788ull);
    CHECK(le_get_f64(buf + 12) == -2.5);
    CHECK(le_uvarint_len(0) == 1 && le_uvarint_len(127) == 1 && le_uvarint_len(128) == 2);
    CHECK(le_uvarint_len(UINT64_MAX) == LE_UVARINT_MAX);

    /* the Buf appenders write the same bytes */
    Buf b = {0};
    le_buf_u32(&b, 0x01020304u);
    le_buf_u64(&b, 0x1122334455667788ull);
    le_buf_str(&b, "abc", 3);
    CHECK(!b.oom && b.len == 4 + 8 + 4 + 3);
    CHECK(b.p && memcmp(b.p, want, 12) == 0 && memcmp(b.p + 12, want + 22, 7) == 0);
    buf_free(&b);
}

TEST(round_trip) {
    uint8_t buf[64];
    size_t n = encode_sample(buf);
    LeReader r = le_reader(buf, n);
    CHECK(le_read_u32(&r) == 0x01020304u);
    CHECK(le_read_u64(&r) == 0x1122334455667788ull);
    CHECK(le_read_f64(&r) == -2.5);
    CHECK(le_read_uvarint(&r) == 300);
    size_t len;
    const char *s = le_read_str(&r, &len);
    CHECK(len == 3 && memcmp(s, "abc", 3) == 0);
    CHECK(!r.bad && le_left(&r) == 0);

    /* the extremes of a uvarint */
    uint64_t vals[] = {0, 1, 127, 128, 16383, 16384, UINT32_MAX, UINT64_MAX};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        uint8_t v[LE_UVARINT_MAX];
        size_t vn = (size_t)(le_put_uvarint(v, vals[i]) - v);
        CHECK(vn == le_uvarint_len(vals[i]));
        LeReader vr = le_reader(v, vn);
        CHECK(le_read_uvarint(&vr) == vals[i] && !vr.bad && le_left(&vr) == 0);
    }
}

/* Every proper prefix of the sample, read the same way: the first read that does not fit
 * fails, reads 0, and leaves the cursor at the end; no byte past the prefix is touched. */
TEST(truncated) {
    uint8_t buf[64];
    size_t n = encode_sample(buf);
    for (size_t cut = 0; cut < n; cut++) {
        uint8_t *pre = malloc(cut ? cut : 1);
        CHECK(pre != NULL);
        if (!pre) return;
        memcpy(pre, buf, cut);
        LeReader r = le_reader(pre, cut);
        uint32_t a = le_read_u32(&r);
        uint64_t b = le_read_u64(&r);
        double d = le_read_f64(&r);
        uint64_t v = le_read_uvarint(&r);
        size_t len = 99;
        const char *s = le_read_str(&r, &len);
        CHECK_MSG(r.bad, "a %zu-byte prefix of %zu read without error", cut, n);
        CHECK(r.p == r.end && r.end == pre + cut);
        CHECK(len == 0 && s && s[0] == 0);
        /* the reads before the cut got their values, the rest 0 */
        CHECK(a == (cut >= 4 ? 0x01020304u : 0));
        CHECK(b == (cut >= 12 ? 0x1122334455667788ull : 0));
        CHECK(d == (cut >= 20 ? -2.5 : 0));
        CHECK(v == (cut >= 22 ? 300 : 0));
        /* and once bad, it stays so */
        CHECK(le_read_u8(&r) == 0 && le_read_bytes(&r, 1) == NULL && r.bad);
        free(pre);
    }
}

TEST(malformed) {
    /* a str whose length claims more than is left */
    uint8_t s[6] = {5, 0, 0, 0, 'h', 'i'};
    LeReader r = le_reader(s, sizeof s);
    size_t len = 99;
    const char *t = le_read_str(&r, &len);
    CHECK(r.bad && len == 0 && t[0] == 0);

    /* a huge length must not wrap the bounds check */
    uint8_t h[5] = {0xFF, 0xFF, 0xFF, 0xFF, 'x'};
    r = le_reader(h, sizeof h);
    le_read_str(&r, &len);
    CHECK(r.bad && len == 0);
    r = le_reader(h, sizeof h);
    CHECK(le_read_bytes(&r, SIZE_MAX) == NULL && r.bad);

    /* a uvarint longer than 10 bytes, and one cut inside */
    uint8_t v[11];
    memset(v, 0x80, sizeof v);
    r = le_reader(v, sizeof v);
    CHECK(le_read_uvarint(&r) == 0 && r.bad);
    r = le_reader(v, 3);
    CHECK(le_read_uvarint(&r) == 0 && r.bad && r.p == v + 3);

    /* an empty buffer */
    r = le_reader(v, 0);
    CHECK(le_read_u8(&r) == 0 && r.bad);
}

/* A str into a fixed field: fits with its NUL, or -1 (too long for it; a bad reader). */
TEST(str_into) {
    Buf b = {0};
    le_buf_str(&b, "host-a", 6);
    le_buf_str(&b, "toolong", 7);
    CHECK(!b.oom);
    LeReader r = le_reader(b.p, b.len);
    char out[7];
    CHECK(le_read_str_into(&r, out, sizeof out) == 0 && !strcmp(out, "host-a"));
    CHECK(le_read_str_into(&r, out, sizeof out) == -1); /* 7 bytes and a NUL: 8 */
    LeReader empty = le_reader(b.p, 2);                 /* a length cut short */
    CHECK(le_read_str_into(&empty, out, sizeof out) == -1 && empty.bad);
    free(b.p);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_le");
}
