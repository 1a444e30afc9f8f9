#include "utf8.h"

size_t utf8_seq(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0; /* overlong */
        if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90; /* overlong */
        if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

int utf8_is_clean(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(s + i, n - i);
        if (k == 0 || s[i] == '\0') return 0;
        i += k;
    }
    return 1;
}

void utf8_sanitize(Buf *b, const char *s, size_t n) {
    size_t run = 0; /* start of the pending stretch of valid bytes */
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(s + i, n - i);
        if (k > 0 && s[i] != '\0') {
            i += k;
            continue;
        }
        buf_add(b, s + run, i - run);
        buf_add(b, "\xEF\xBF\xBD", 3);
        run = ++i;
    }
    buf_add(b, s + run, n - run);
}
