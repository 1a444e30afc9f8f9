#include "utf8.h"

#include <string.h>

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

int utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int need;
    uint32_t v;
    unsigned lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0; /* no overlong forms */
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        v = c & 0x07;
        if (c == 0xF0) lo = 0x90; /* no overlong forms */
        if (c == 0xF4) hi = 0x8F; /* nothing past U+10FFFF */
    } else {
        *cp = UTF8_INVALID; /* a stray continuation byte, C0, C1 or F5..FF */
        return 1;
    }
    int i = 1;
    for (; i <= need; i++) {
        if ((size_t)i >= n) break;
        unsigned b = s[i];
        if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) break;
        v = v << 6 | (b & 0x3F);
    }
    if (i <= need) {
        *cp = UTF8_INVALID;
        return i;
    }
    *cp = v;
    return need + 1;
}

size_t utf8_replace_copy(const unsigned char *s, size_t n, char *out, size_t cap) {
    if (cap == 0) return 0;
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int len = utf8_next(s + i, n - i, &cp);
        const char *src = (const char *)s + i;
        int wlen = len;
        if (cp == UTF8_INVALID) {
            src = "\xEF\xBF\xBD"; /* U+FFFD REPLACEMENT CHARACTER */
            wlen = 3;
        }
        if (w + (size_t)wlen > cap - 1) break;
        memcpy(out + w, src, (size_t)wlen);
        w += (size_t)wlen;
        i += (size_t)len;
    }
    out[w] = '\0';
    return w;
}
