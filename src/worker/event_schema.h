/* The event field tables generated from the lists in events.h: one FieldDesc per declared
 * field, in declaration order, with its place in the struct. Everything that walks events
 * field by field (the codec, the JSON printer, the HDF5 columns, the docs table) reads
 * these tables, so no field is named anywhere else. */
#ifndef ABLATE_WORKER_EVENT_SCHEMA_H
#define ABLATE_WORKER_EVENT_SCHEMA_H

#include <stddef.h>

#include "events.h"

typedef struct {
    const char *name; /* "step" */
    const FieldDesc *fields;
    int n_fields;
    int v1_fields; /* the prefix that version-1 journals carry */
    int v2_fields; /* the prefix of events tagged full (event_codec.h) */
} EventSchema;

extern const EventSchema event_schema[EV_KIND_COUNT];

/* The fields of ev's kind as raw bytes (all kinds start at Event.u). */
static inline void *event_body(Event *ev) {
    return &ev->u;
}
static inline const void *event_cbody(const Event *ev) {
    return &ev->u;
}
/* Sets every field from index `from` on to "unknown": -1 for integers, NaN for doubles,
 * empty strings, 0 for bools and enums. */
void event_fields_default(void *body, EventKind kind, int from);
/* The END event of an attempt whose measures nobody has (it failed before training, its
 * message arrived malformed, journal damage took its records, a replicate: rule settled the
 * run untrained): every field "unknown" as above (peak_rss and slurm_restart_count -1, the
 * losses NaN), then what holds by construction: status, message, nothing trained (steps,
 * tokens, seconds 0) and no instability (unstable_step 0: never). The one constructor of such
 * events, so that they keep the sentinels docs/hdf5-schema.md gives. */
void event_end_unknown(EndEvent *e, RunStatus status, const char *message);

#endif
