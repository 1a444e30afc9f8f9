#include "json.h"

#include <math.h>

size_t json_escape(const char *s, char *out, size_t n) {
    size_t o = 0;
    if (n == 0) return 0;
    for (; *s && o + 7 < n; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            out[o++] = '\\', out[o++] = (char)ch;
        else if (ch == '\n')
            out[o++] = '\\', out[o++] = 'n';
        else if (ch == '\t')
            out[o++] = '\\', out[o++] = 't';
        else if (ch == '\r')
            out[o++] = '\\', out[o++] = 'r';
        else if (ch < 0x20 || ch == 0x7f)
            o += (size_t)snprintf(out + o, n - o, "\\u%04x", ch);
        else
            out[o++] = (char)ch;
    }
    out[o] = '\0';
    return o;
}

void json_print_string(FILE *f, const char *s) {
    char buf[256];
    fputc('"', f);
    /* escape in pieces so long strings need no big buffer */
    while (*s) {
        char chunk[32];
        size_t k = 0;
        while (s[k] && k < sizeof chunk - 1)
            k++;
        for (size_t i = 0; i < k; i++)
            chunk[i] = s[i];
        chunk[k] = '\0';
        json_escape(chunk, buf, sizeof buf);
        fputs(buf, f);
        s += k;
    }
    fputc('"', f);
}

void json_print_number(FILE *f, double v) {
    if (!isfinite(v))
        fputs("null", f);
    else if (v == floor(v) && fabs(v) < 1e15)
        fprintf(f, "%.0f", v);
    else
        fprintf(f, "%.9g", v);
}
