#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* The escapes of all three. ESC_JSON adds the quote and backslash (JSON's own syntax) and
 * leaves C1 controls as they are (valid JSON, and the bytes JSON configs already recorded
 * have); text escapes C1 (U+0080 to U+009F: some terminals act on them as on ESC
 * sequences) like C0. ESC_KEEP_LINES leaves \n and \t as they are (text meant as lines). */
enum { ESC_JSON = 1, ESC_KEEP_LINES = 2 };

static void escape(Buf *b, const char *s, size_t n, int flags) {
    static const char hex[] = "0123456789abcdef";
    size_t run = 0; /* start of the pending stretch that needs no escape */
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = utf8_seq(s + i, n - i);
        int c1 = !(flags & ESC_JSON) && k == 2 && c == 0xc2 && (unsigned char)s[i + 1] < 0xa0;
        if ((k > 1 && !c1) ||
            (k == 1 && c >= 0x20 && c != 0x7f &&
             (!(flags & ESC_JSON) || (c != '"' && c != '\\'))) ||
            (k == 1 && (flags & ESC_KEEP_LINES) && (c == '\n' || c == '\t'))) {
            i += k;
            continue;
        }
        buf_add(b, s + run, i - run);
        char esc[8];
        if (c1) {
            c = (unsigned char)s[++i]; /* the code point is the second byte */
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4], esc[5] = hex[c & 15], esc[6] = 0;
        } else if (c == '"' || c == '\\')
            esc[0] = '\\', esc[1] = (char)c, esc[2] = 0;
        else if (c == '\n')
            memcpy(esc, "\\n", 3);
        else if (c == '\t')
            memcpy(esc, "\\t", 3);
        else if (c == '\r')
            memcpy(esc, "\\r", 3);
        else { /* control character (k == 1) or a byte outside valid UTF-8 (k == 0) */
            memcpy(esc, k ? "\\u00" : "\\udc", 4);
            esc[4] = hex[c >> 4], esc[5] = hex[c & 15], esc[6] = 0;
        }
        buf_adds(b, esc);
        run = ++i;
    }
    buf_add(b, s + run, n - run);
}

void json_string(Buf *b, const char *s, size_t n) {
    buf_addc(b, '"');
    escape(b, s, n, ESC_JSON);
    buf_addc(b, '"');
}

void text_escape_buf(Buf *b, const char *s, size_t n, int keep_lines) {
    escape(b, s, n, keep_lines ? ESC_KEEP_LINES : 0);
}

const char *text_escape(const char *s, char *out, size_t n) {
    Buf b = {0};
    escape(&b, s, strlen(s), 0);
    snprintf(out, n, "%s", b.oom || !b.p ? "" : b.p);
    buf_free(&b);
    return out;
}

int json_format_double(char *buf, size_t n, double v) {
    for (int prec = 1; prec <= 17; prec++) {
        int len = snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return len;
    }
    return snprintf(buf, n, "%.17g", v);
}

void json_number(Buf *b, double v) {
    char t[40];
    if (!isfinite(v))
        buf_adds(b, "null");
    else if (v == floor(v) && fabs(v) < 1e15)
        buf_printf(b, "%.0f", v);
    else {
        json_format_double(t, sizeof t, v);
        buf_adds(b, t);
    }
}

static void put(FILE *f, Buf *b) {
    if (b->len) fwrite(b->p, 1, b->len, f);
    buf_free(b);
}

void json_print_string(FILE *f, const char *s) {
    Buf b = {0};
    json_string(&b, s, strlen(s));
    put(f, &b);
}

void json_print_number(FILE *f, double v) {
    Buf b = {0};
    json_number(&b, v);
    put(f, &b);
}
