/* OUT.h5 as a view of the journal: rebuilt from the journal alone into OUT.h5.tmp, fsynced
 * and renamed over OUT.h5 (then the directory is fsynced), so OUT.h5 is always a complete,
 * closed file that readers may open at any time. Layout: docs/hdf5-schema.md.
 *
 * Memory is bounded regardless of sweep length: pass 1 keeps, per planned run, a small
 * state plus the file offsets of the EVENTS records of its last attempt (8 bytes per
 * record); pass 2 streams those records run by run (plan order) into chunked,
 * shuffle+gzip(4) datasets, buffering at most 64K rows (and 8 MiB) per table.
 *
 * Cost: a full rebuild reads the whole journal; ~1-1.5 M rows/s on these machines, 65% of
 * it in zlib (5 M step rows: ~4 s). Callers should throttle rebuilds (sweep.c keeps them
 * to ~10% of wall time) and always rebuild once at the end. */
#ifndef ABLATE_ORCH_H5VIEW_H
#define ABLATE_ORCH_H5VIEW_H

#include <stdint.h>

#include "model/config.h"
#include "util/buf.h"

#define ABLATE_SCHEMA_VERSION 2

typedef struct {
    long runs;                                   /* planned runs (rows of /runs) */
    long runs_done;                              /* with status done */
    long long steps, evals, acts, attn, samples; /* rows written */
    long long records, event_records, events;    /* journal records, EVENTS records, events */
    long long skipped; /* malformed payloads/events and records of unplanned runs, skipped */
    unsigned long long journal_bytes, torn_bytes; /* valid journal bytes; torn tail ignored */
    double seconds;                               /* wall time of the build */
    long lost_segments;      /* live view: segments found gone, truncated or replaced (rewritten) */
    long long mappings;      /* live view: virtual-dataset mappings of OUT.h5, all tables */
    long decision_conflicts; /* joined replicate: sweep: DECISION records of the same look
                                that differ between journals (the first is kept) */
    long long plan_reads;    /* PLAN records read again for /runs (the live view keeps the rows
                                of ended runs: none for them) */
    long long runs_rows;     /* live view: rows of /runs written (OUT.h5 and a segment) */
    long segments;           /* live view: segment files kept (mapped, or left out for less
                                than the grace) */
    /* journal damage no --resume has handled (h5view_damage.c): bytes between valid records
     * that fail their CRC; the view may lack or misstate what they held, and says so (status
     * `damaged`, attributes journal_damaged_bytes and journal_damage) */
    long damaged_regions;
    unsigned long long damaged_bytes;
    char damage[ABL_ERR_MAX]; /* the regions and the runs they may have held, a line each
                                 (cut to fit; the file's journal_damage has them all) */
} H5ViewStats;

/* Rebuilds out_path from the journal at journal_path. 0, or -1 with a message. A torn
 * journal tail is ignored (the view covers the valid records). A writer that is still
 * appending must journal_flush first for its latest records to be included. */
int h5view_build(const char *journal_path, const char *out_path, char err[ABL_ERR_MAX]);
/* The same, reporting counts and timing in *stats (may be NULL). */
int h5view_build_stats(const char *journal_path, const char *out_path, H5ViewStats *stats,
                       char err[ABL_ERR_MAX]);

/* The column tables of docs/hdf5-schema.md (metric tables and /runs), generated from the
 * same declarations the writer uses; tests/schema_doc.c checks the docs against them. */
void h5view_schema_markdown(Buf *b);

/* The same over the records that end within the first `limit` bytes of the journal (what
 * a writer has flushed so far, while it keeps appending). */
int h5view_build_upto(const char *journal_path, const char *out_path, uint64_t limit,
                      H5ViewStats *stats, char err[ABL_ERR_MAX]);

/* The view of a joined sweep (join.h) from all its processes' journals: each run shows the
 * attempt of the journal that got furthest with it (ended > running > interrupted). The
 * limit applies to journals[limited] (the caller's own, still being appended; -1: none);
 * data_dir holds weights/ (OUT.h5.d). The first journal's header gives the root
 * attributes. */
int h5view_build_many(const char *const *journals, int n, int limited, uint64_t limit,
                      const char *data_dir, const char *out_path, H5ViewStats *stats,
                      char err[ABL_ERR_MAX]);

/* The live view (h5view_live.c): OUT.h5 kept current while the sweep writing journal_path
 * runs, at a cost that follows what is new, not the journal's size: the rows that arrived
 * since the last update go into a segment file OUT.h5.d/view/seg-*.h5, and OUT.h5 (root
 * attributes, /runs, and each metric table as a virtual dataset over the segments; no
 * /weights) is rewritten small. A full build (h5view_build*) then makes the self-contained
 * file, after which h5live_remove_segments lets the segments go. */
typedef struct H5Live H5Live;
H5Live *h5live_open(const char *journal_path, const char *out_path, char err[ABL_ERR_MAX]);
/* Brings OUT.h5 up to the journal's first `limit` bytes. 0, or -1 with a message (the live
 * view stays usable: the next update tries again). */
int h5live_update(H5Live *lv, uint64_t limit, H5ViewStats *stats, char err[ABL_ERR_MAX]);
void h5live_close(H5Live *lv);
/* Rows of /runs per page of the live view (default H5LIVE_RUNS_PAGE; tests use fewer). */
#define H5LIVE_RUNS_PAGE 1024
void h5live_set_runs_page(H5Live *lv, uint32_t runs);
/* A segment no OUT.h5 maps any more is removed once it has been left out by two updates in
 * a row and for this many seconds (a reader of an older OUT.h5 has that long to read it);
 * tests set 0. */
#define H5LIVE_SEGMENT_GRACE 60.0
void h5live_set_segment_grace(H5Live *lv, double seconds);
/* Removes OUT.h5.d/view/ (call only once OUT.h5 is a full build). 0 or -1. */
int h5live_remove_segments(const char *out_path);

/* Names used in the status column of /runs. */
extern const char *const h5view_status_names[7]; /* pending running interrupted done ... */

#endif
