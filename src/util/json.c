#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/utf8.h"

/* The escapes of both: json adds the quote and backslash (JSON's own syntax) */
static void escape(Buf *b, const char *s, size_t n, int json) {
    static const char hex[] = "0123456789abcdef";
    size_t run = 0; /* start of the pending stretch that needs no escape */
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = utf8_seq(s + i, n - i);
        if (k > 1 || (k == 1 && c >= 0x20 && c != 0x7f && (!json || (c != '"' && c != '\\')))) {
            i += k;
            continue;
        }
        buf_add(b, s + run, i - run);
        char esc[8];
        if (c == '"' || c == '\\')
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
    escape(b, s, n, 1);
    buf_addc(b, '"');
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
