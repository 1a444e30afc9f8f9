/* Compact little-endian binary packing of Event, used for the journal's EVENTS records and
 * for the worker -> rank 0 event batches over MPI.
 *
 * Encoding (one event): [u8 kind] then the fields of that kind in declaration order.
 * Integers (long/int) are zigzag LEB128 varints (1-10 bytes), doubles are 8 raw IEEE-754
 * bytes little-endian, enums/flags are one byte, strings are a varint length followed by
 * the bytes (no NUL). EV_START packs params, flops_per_token, kv_bytes_per_token and
 * blas_core, never the config pointer (unpacked as NULL). EV_ACT packs n_head and then
 * n_head entropies. A batch is simply packed events back to back.
 *
 * Typical sizes: step 37-45 bytes, eval ~27, act ~70 + 8 per head, end ~50 + message. */
#ifndef ABLATE_ORCH_EVENT_CODEC_H
#define ABLATE_ORCH_EVENT_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "../worker/events.h"

/* No single packed event is longer than this (a sample with 4095 bytes of text and
 * ABL_SAMPLE_IDS token ids). */
#define EVENT_PACK_MAX (4352 + 5 + 5 * ABL_SAMPLE_IDS)

/* Packs ev into buf; returns the bytes written, 0 if cap is too small (buf then holds
 * garbage up to cap) or ev is not a valid kind. */
size_t event_pack(const Event *ev, uint8_t *buf, size_t cap);
/* Exact number of bytes event_pack would write. */
size_t event_packed_size(const Event *ev);
/* Unpacks one event from buf[0..n); sets *used to the bytes consumed. Returns 0, or -1 if
 * the bytes are truncated or malformed (ev is then unspecified). Only the fields of the
 * event's kind are written (not the whole union); strings are NUL-terminated; the start
 * event's config is NULL. */
int event_unpack(const uint8_t *buf, size_t n, Event *ev, size_t *used);

#endif
