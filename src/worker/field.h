/* One descriptor for every typed field ablate declares: a knob (a field of RunConfig, rows
 * in knobs.c) and an event field (a field of an event struct, rows in events.h) are both a
 * FieldDesc. Whatever walks fields (the canonical text run ids hash, the JSON writer, the
 * HDF5 column of the view and its /schema row, the docs' tables) reads these rows, so a
 * new knob or event field is one row and nothing else names it. */
#ifndef ABLATE_WORKER_FIELD_H
#define ABLATE_WORKER_FIELD_H

#include <stddef.h>

#include "util/buf.h"

/* FT_LONG (long), FT_INT (int), FT_DOUBLE, FT_BOOL (int 0/1), FT_ENUM (int index into
 * names), FT_STR (char[n], NUL-terminated), FT_TEXT (char[n] bytes plus an int name_len: may
 * hold NUL and bytes that are not UTF-8), FT_HEADS (double[n], one per attention head; its
 * count is the FT_INT field just before it). Knobs use the first six. */
typedef enum { FT_LONG, FT_INT, FT_DOUBLE, FT_BOOL, FT_ENUM, FT_STR, FT_TEXT, FT_HEADS } FieldType;

typedef struct {
    const char *name; /* "model.n_head", "val_loss" */
    FieldType type;
    size_t offset;            /* into the struct the field is in */
    size_t n;                 /* FT_STR/FT_TEXT: buffer bytes; FT_HEADS: capacity; FT_ENUM: names */
    size_t len_offset;        /* FT_TEXT: offset of the name_len member */
    const char *const *names; /* FT_ENUM: names, indexed by value */
    const char *units;        /* "tokens", "s", "1" for dimensionless numbers; NULL: none (enums,
                                 booleans, strings, counts of things) */
    const char *desc;
} FieldDesc;

/* A field's value as a double (FT_LONG, FT_INT, FT_DOUBLE, FT_BOOL, FT_ENUM; NaN others). */
double field_number(const void *base, const FieldDesc *f);
/* An FT_LONG or FT_INT (FT_BOOL, FT_ENUM) field's value exactly. */
long field_integer(const void *base, const FieldDesc *f);
/* The bytes of an FT_STR or FT_TEXT field and their count (an FT_TEXT whose name_len is 0
 * is read as a C string). */
const char *field_text(const void *base, const FieldDesc *f, size_t *len);
/* An FT_ENUM field's name ("?" if out of range). */
const char *field_enum_name(const void *base, const FieldDesc *f);
/* Canonical text of a field's value: integers in decimal, booleans true/false, enums by
 * name, strings as themselves, doubles as the shortest text that reads back to the same
 * double (so run ids, which hash it, are stable). Returns the length snprintf would. */
int field_format(const void *base, const FieldDesc *f, char *buf, size_t n);

/* How a JSON object shows doubles: canonical (field_format's text: what configs show, so a
 * config reads back to the same run id) or as JSON numbers (json_number: integers below 1e15
 * without exponent, non-finite as null: what events show). */
typedef enum { FIELD_JSON_CANONICAL, FIELD_JSON_NUMBER } FieldJsonStyle;
/* Appends "name":value for fields[0..n) of the struct at base, comma-separated (a leading
 * comma too unless first). */
void field_json_members(Buf *b, const void *base, const FieldDesc *fields, int n, int first,
                        FieldJsonStyle style);

#endif
