/* Event sinks for a single run: JSON Lines (machine) and human progress (stderr). */
#ifndef ABLATE_WORKER_SINKS_H
#define ABLATE_WORKER_SINKS_H

#include <stdio.h>

#include "util/buf.h"
#include "events.h"

typedef struct {
    EventSink base;
    FILE *out;
} JsonSink;

/* One JSON object per event and line; flushed per line so pipes see progress. */
void json_sink_init(JsonSink *s, FILE *out);
/* One event as a JSON object (no newline): {"event":"step", field: value, ...} with every
 * field of the kind in declaration order (events.h), the start event adding "config". */
void event_json(Buf *b, const Event *ev);
/* The same, printed. */
void json_print_event(FILE *f, const Event *ev);

typedef struct {
    EventSink base;
    FILE *out;
    long total_steps; /* -1 when unknown (time budget) */
    double last_print;
} ProgressSink;

void progress_sink_init(ProgressSink *s, FILE *out, long total_steps);

#endif
