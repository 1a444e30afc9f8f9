/* The event field tables generated from the lists in events.h: one EventField per declared
 * field, in declaration order, with its place in the struct. Everything that walks events
 * field by field (the codec, the JSON printer, the HDF5 columns, the docs table) reads
 * these tables, so no field is named anywhere else. */
#ifndef ABLATE_WORKER_EVENT_SCHEMA_H
#define ABLATE_WORKER_EVENT_SCHEMA_H

#include <stddef.h>

#include "events.h"

typedef struct {
    const char *name;
    EventFieldType type;
    size_t offset;            /* into the kind's struct (= into Event.u) */
    size_t n;                 /* EF_STR/EF_TEXT: buffer bytes; EF_HEADS: capacity; EF_ENUM: names */
    size_t len_offset;        /* EF_TEXT: offset of the name_len member */
    const char *const *names; /* EF_ENUM */
    const char *units;        /* NULL: none */
    const char *desc;
} EventField;

typedef struct {
    const char *name; /* "step" */
    const EventField *fields;
    int n_fields;
    int v1_fields; /* the prefix that version-1 journals carry */
} EventSchema;

extern const EventSchema event_schema[EV_KIND_COUNT];

/* The fields of ev's kind as raw bytes (all kinds start at Event.u). */
static inline void *event_body(Event *ev) {
    return &ev->u;
}
static inline const void *event_cbody(const Event *ev) {
    return &ev->u;
}
/* A field's value as a double (EF_LONG, EF_INT, EF_DOUBLE, EF_BOOL, EF_ENUM). */
double event_field_number(const void *body, const EventField *f);
/* Sets every field from index `from` on to "unknown": -1 for integers, NaN for doubles,
 * empty strings, 0 for bools and enums. */
void event_fields_default(void *body, EventKind kind, int from);
/* The bytes of an EF_STR or EF_TEXT field and their count (an EF_TEXT whose name_len is 0
 * is read as a C string). */
const char *event_field_text(const void *body, const EventField *f, size_t *len);

#endif
