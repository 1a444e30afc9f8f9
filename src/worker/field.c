#include "field.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/json.h"

static const char *at(const void *base, const FieldDesc *f) {
    return (const char *)base + f->offset;
}

long field_integer(const void *base, const FieldDesc *f) {
    long l;
    int i;
    if (f->type == FT_LONG) {
        memcpy(&l, at(base, f), sizeof l);
        return l;
    }
    memcpy(&i, at(base, f), sizeof i);
    return i;
}

double field_number(const void *base, const FieldDesc *f) {
    double d;
    switch (f->type) {
    case FT_LONG:
    case FT_INT:
    case FT_BOOL:
    case FT_ENUM:
        return (double)field_integer(base, f);
    case FT_DOUBLE:
        memcpy(&d, at(base, f), sizeof d);
        return d;
    case FT_STR:
    case FT_TEXT:
    case FT_HEADS:
        break;
    }
    return NAN;
}

const char *field_text(const void *base, const FieldDesc *f, size_t *len) {
    const char *p = at(base, f);
    if (f->type == FT_TEXT) {
        int n;
        memcpy(&n, (const char *)base + f->len_offset, sizeof n);
        /* 0 means "a C string": producers that never set name_len still work */
        if (n > 0) {
            *len = (size_t)n < f->n ? (size_t)n : f->n - 1;
            return p;
        }
    }
    *len = strnlen(p, f->n - 1);
    return p;
}

const char *field_enum_name(const void *base, const FieldDesc *f) {
    long v = field_integer(base, f);
    return v >= 0 && (size_t)v < f->n ? f->names[v] : "?";
}

int field_format(const void *base, const FieldDesc *f, char *buf, size_t n) {
    switch (f->type) {
    case FT_INT:
        return snprintf(buf, n, "%d", (int)field_integer(base, f));
    case FT_LONG:
        return snprintf(buf, n, "%ld", field_integer(base, f));
    case FT_BOOL:
        return snprintf(buf, n, "%s", field_integer(base, f) ? "true" : "false");
    case FT_ENUM:
        return snprintf(buf, n, "%s", field_enum_name(base, f));
    case FT_STR:
    case FT_TEXT: {
        size_t len;
        const char *t = field_text(base, f, &len);
        return snprintf(buf, n, "%.*s", (int)len, t);
    }
    case FT_DOUBLE:
        return json_format_double(buf, n, field_number(base, f));
    case FT_HEADS:
        break;
    }
    return snprintf(buf, n, "?");
}

static void json_value(Buf *b, const void *base, const FieldDesc *f, FieldJsonStyle style) {
    char t[64];
    switch (f->type) {
    case FT_LONG:
    case FT_INT:
        buf_printf(b, "%ld", field_integer(base, f));
        return;
    case FT_BOOL:
        buf_adds(b, field_integer(base, f) ? "true" : "false");
        return;
    case FT_ENUM: {
        const char *s = field_enum_name(base, f);
        json_string(b, s, strlen(s));
        return;
    }
    case FT_STR:
    case FT_TEXT: {
        size_t n;
        const char *s = field_text(base, f, &n);
        json_string(b, s, n);
        return;
    }
    case FT_DOUBLE:
        if (style == FIELD_JSON_NUMBER) {
            json_number(b, field_number(base, f));
        } else {
            int n = field_format(base, f, t, sizeof t);
            buf_add(b, t, (size_t)n < sizeof t ? (size_t)n : sizeof t - 1);
        }
        return;
    case FT_HEADS: {
        long n = field_integer(base, f - 1); /* the count field just before it */
        const double *v = (const double *)(const void *)at(base, f);
        buf_addc(b, '[');
        for (long h = 0; h < n && h < (long)f->n; h++) {
            if (h) buf_addc(b, ',');
            json_number(b, v[h]);
        }
        buf_addc(b, ']');
        return;
    }
    }
}

void field_json_members(Buf *b, const void *base, const FieldDesc *fields, int n, int first,
                        FieldJsonStyle style) {
    for (int k = 0; k < n; k++) {
        buf_printf(b, "%s\"%s\":", first && k == 0 ? "" : ",", fields[k].name);
        json_value(b, base, &fields[k], style);
    }
}
