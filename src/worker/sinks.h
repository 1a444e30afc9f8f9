/* Event sinks for a single run: JSON Lines (machine) and human progress (stderr). */
#ifndef ABLATE_WORKER_SINKS_H
#define ABLATE_WORKER_SINKS_H

#include <stdio.h>

#include "util/buf.h"
#include "events.h"

typedef struct {
    EventSink base;
    FILE *out;
    int write_errno; /* the first write that failed (0: none); nothing is written after it */
} JsonSink;

/* One JSON object per event and line; flushed per line so pipes see progress. A line that
 * cannot be written whole is cut off a regular file (file_write_record) and sets
 * write_errno: the caller stops its run (a full disk, a closed pipe). */
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
