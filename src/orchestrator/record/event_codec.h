/* Compact little-endian binary packing of Event, used for the journal's EVENTS records and
 * for the worker -> rank 0 event batches over MPI. Generated from the field tables
 * (src/worker/event_schema.h): no field is named here.
 *
 * Encoding (one event): [u8 tag] then the fields of that kind in declaration order. The
 * tag is the kind, plus 0x40 when a varint count of the fields the event carries follows
 * it (the first that many of the kind's declared fields: every one, as written now, for a
 * kind that has fields beyond its version-2 prefix), or 0x80 when it carries the kind's
 * version-2 prefix (EVENT_*_V2: what every event carried before the count existed, and what
 * the kinds without later fields still write, byte for byte), or neither for the version-1
 * prefix (journals written by ablate 0.1.0). Fields an event does not carry read as unknown
 * (-1, NaN, "", the enum's first name), so a journal stays readable when fields are
 * appended to the lists in events.h. Integers
 * (FT_LONG, FT_INT) are zigzag LEB128 varints (1-10 bytes), doubles 8 raw IEEE-754 bytes
 * little-endian, FT_BOOL/FT_ENUM one byte, FT_STR/FT_TEXT a varint length and the bytes
 * (no NUL), FT_HEADS the entries its count field gave (the count is packed just before).
 * A batch is simply packed events back to back.
 *
 * Typical sizes: step 37-45 bytes, eval ~45, act ~70 + 8 per head, end ~100 + message. */
#ifndef ABLATE_ORCH_EVENT_CODEC_H
#define ABLATE_ORCH_EVENT_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "worker/events.h"

/* No single packed event is longer than this (test_journal checks event_packed_max). */
#define EVENT_PACK_MAX (4352 + ABL_SAMPLE_IDS)

/* Packs ev into buf; returns the bytes written, 0 if cap is too small or ev is not a
 * valid kind. */
size_t event_pack(const Event *ev, uint8_t *buf, size_t cap);
/* Exact number of bytes event_pack would write. */
size_t event_packed_size(const Event *ev);
/* The most bytes an event of this kind can pack to. */
size_t event_packed_max(EventKind kind);
/* Unpacks one event from buf[0..n); sets *used to the bytes consumed. Returns 0, or -1 if
 * the bytes are truncated or malformed (ev is then unspecified). Only the fields of the
 * event's kind are written (not the whole union); strings are NUL-terminated; the start
 * event's config is NULL. */
int event_unpack(const uint8_t *buf, size_t n, Event *ev, size_t *used);

#endif
