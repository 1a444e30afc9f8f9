/* The sweep journal: the durable, append-only record beside the output. For `-o OUT.h5`
 * it lives at OUT.h5.d/journal; OUT.h5 itself is a view rebuilt from it (h5view.h).
 *
 * Record layout (all integers little-endian):
 *   offset 0   4 bytes  magic "ABLJ"
 *          4   u8       type (JournalRecordType)
 *          5   u32      run index (plan index; JOURNAL_NO_RUN for sweep-level records)
 *          9   u32      payload length n (at most JOURNAL_MAX_PAYLOAD)
 *         13   n bytes  payload
 *       13+n   u32      CRC-32C (Castagnoli) of bytes [4, 13+n): type, run, length, payload
 * A record is JOURNAL_RECORD_OVERHEAD (17) + n bytes. The file is records back to back.
 * Bytes that are not a valid record (bad magic, length or CRC) are damage: a reader
 * resynchronises on the next offset where a whole record's CRC holds and reports the gap
 * (JournalRecord.gap_before); damage with no valid record after it is a torn tail, where
 * reading ends and which journal_open_append truncates before appending.
 *
 * Payloads (u32/i32/u64/i64 fixed width LE; "str" = u32 length + bytes, no NUL):
 *   HEADER      key/value block: repeated (str key, str value). Known keys: spec,
 *               journal_version, ablate_version, git_rev, compiler, c_flags, mpi_version,
 *               hdf5_version, openblas_version, blas_core, ranks, hostnames, start_time,
 *               vocab. One HEADER per session (the first run and every resume).
 *   PLAN        char id[16] (hex, no NUL), u64 seed, str name, str config text: one line
 *               "knob=value\n" per knob in knob_table order, value as knob_format writes it
 *               with '\\', '\n', '\r' escaped as \\ \n \r; then (since 0.2) str
 *               overrides: what the variant and grid set, as `ablate plan` prints it.
 *   RUN_BEGIN   u32 attempt (1-based), i32 rank, i64 resumed_from_step (0 = fresh), str host
 *   EVENTS      u32 attempt, then packed events (event_codec.h) back to back
 *   RUN_END     u32 attempt, i32 rank, str host, one packed EV_END event
 *   CHECKPOINT  u32 attempt, i64 step, str path (may be empty)
 *   SWEEP_END   key/value block; keys: end_time, optionally status
 *   DAMAGE      u64 offset, u64 length, str saved_path: damaged bytes found between valid
 *               records at a resume, reported, saved, and the runs they may have held
 *               invalidated (a RUN_BEGIN/RUN_END pair each); later resumes skip it silently
 *   DATA        key/value block: the identity of one data source (data_guard.h): path,
 *               tokenizer, vocab (SHA-256 hex), vocab_size, val_fraction, sha256, bytes;
 *               written when the sweep first sees the source, and again after a change
 *               accepted with --accept-data-change (the first one per path is the sweep's)
 *   REPLICATE, DECISION: a replicate: sweep's rule and contrasts, and its decisions
 *               (layouts in journal_replicate.h)
 *   CALIBRATION one timing trial of a configuration with train.calibrate (its layout in
 *               journal_calibration.h)
 * Readers ignore record types they do not know.
 *
 * Two files implement this header: journal.c the records (framing, CRC, buffered appends,
 * fsync, torn tails and damage, locking, the readers), journal_records.c the payloads above
 * (the typed appends and decoders below), both through util/le.h's little-endian writer and
 * bounds-checked reader. */
#ifndef ABLATE_ORCH_JOURNAL_H
#define ABLATE_ORCH_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "worker/events.h"
#include "worker/run_config.h"

#define JOURNAL_RECORD_OVERHEAD 17
#define JOURNAL_HEADER_BYTES    13
#define JOURNAL_MAX_PAYLOAD     (64u << 20)
#define JOURNAL_NO_RUN          0xFFFFFFFFu
#define JOURNAL_BUFFER_BYTES    (1u << 20)
#define JOURNAL_FORMAT_VERSION  "1"
#define JOURNAL_NAME_MAX        256
#define JOURNAL_HOST_MAX        256

typedef enum {
    JREC_HEADER = 1,
    JREC_PLAN = 2,
    JREC_RUN_BEGIN = 3,
    JREC_EVENTS = 4,
    JREC_RUN_END = 5,
    JREC_CHECKPOINT = 6,
    JREC_SWEEP_END = 7,
    JREC_DAMAGE = 8,
    JREC_DATA = 9,
    JREC_REPLICATE = 10, /* replicate: sweeps (journal_replicate.h) */
    JREC_DECISION = 11,
    JREC_CALIBRATION = 12, /* calibrated fixed time (journal_calibration.h) */
    JREC_TUNE = 13,        /* a tune: sweep's choice (journal_tune.h) */
} JournalRecordType;

/* "header", "plan", ...; "unknown" for other values. */
const char *journal_type_name(int type);
/* Does a record of this type hold one run's results (RUN_BEGIN, EVENTS, RUN_END,
 * CHECKPOINT)? Damage to one costs that run (resume.c re-runs it, the view names it). */
int journal_type_of_run(int type);
/* CRC-32C, chainable like zlib's crc32: start with crc = 0. */
uint32_t journal_crc32c(uint32_t crc, const void *data, size_t n);
/* OUT.h5 -> "OUT.h5.d" and "OUT.h5.d/journal"; -1 if it does not fit. */
int journal_dir_for(const char *out_path, char *buf, size_t n);
int journal_path_for(const char *out_path, char *buf, size_t n);
/* Creates OUT.h5.d (if missing) and fsyncs its parent directory. */
int journal_ensure_dir(const char *out_path, char err[ABL_ERR_MAX]);

/* ---------------- writing ---------------- */

typedef struct Journal Journal;

typedef struct {
    uint64_t valid_bytes;   /* bytes kept: whole valid records */
    uint64_t dropped_bytes; /* torn tail removed by journal_open_append */
    uint64_t records;       /* valid records kept */
    /* damage between valid records, left in place (resume.c reports and handles it) */
    uint64_t damaged_bytes, damaged_regions;
} JournalScan;

/* Creates a new journal (fails if path exists), takes an exclusive lock on it and fsyncs
 * the directory. NULL with a message on failure. */
Journal *journal_create(const char *path, char err[ABL_ERR_MAX]);
/* Opens an existing journal for appending: scans every record, validates CRCs, truncates
 * a torn tail (reported in *scan, which may be NULL) and fsyncs. Fails if another process
 * holds the journal's lock. */
Journal *journal_open_append(const char *path, JournalScan *scan, char err[ABL_ERR_MAX]);
/* Takes the lock of an existing journal without opening it for writing (--force must not
 * delete a journal another sweep is writing): the fd holding the lock, -2 if there is no
 * journal, -1 with a message if it is locked or cannot be opened. */
int journal_lock_existing(const char *path, char err[ABL_ERR_MAX]);
/* Does a live process hold the journal's lock (a sweep writing it)? 1 yes, 0 no, -1 cannot
 * tell (no journal, or no flock on its file system). Probes with a shared lock dropped at
 * once, so it never waits and never holds one (`ablate inspect`). */
int journal_lock_held(const char *path);
/* Copies bytes [from, from+len) of a journal to dst, durably. */
int journal_save_range(const char *path, uint64_t from, uint64_t len, const char *dst,
                       char err[ABL_ERR_MAX]);

/* Appends one record (buffered in user space; written when the 1 MiB buffer fills or on
 * flush/sync). The two-part form writes payload a then b as one record. 0 or -1. */
int journal_append(Journal *j, int type, uint32_t run, const void *payload, size_t len);
int journal_append2(Journal *j, int type, uint32_t run, const void *a, size_t alen, const void *b,
                    size_t blen);
/* Appends a record whose payload was built in b (util/le.h's writers), then frees b's bytes:
 * a b that ran out of memory is an error of the journal, nothing appended. 0 or -1. */
int journal_append_buf(Journal *j, int type, uint32_t run, Buf *b);
/* Writes buffered records to the file (no fsync): readers of the path then see them. */
int journal_flush(Journal *j);
/* journal_flush + fdatasync: everything appended so far survives kill -9 and power loss.
 * Call it after RUN_END, before reporting the run done. */
int journal_sync(Journal *j);
/* Syncs and closes; returns -1 if that or any earlier operation failed. j is freed. */
int journal_close(Journal *j);
/* The last error of a failed operation ("" if none). After a failed write the file is
 * truncated back to the last whole record and the unwritten records stay buffered, so a
 * later flush/sync may succeed. */
const char *journal_error(const Journal *j);
/* Sets the journal's error to "PATH: what" (a record that could not be built); returns -1. */
int journal_set_error(Journal *j, const char *what);
/* Logical size: bytes on disk plus bytes buffered. */
uint64_t journal_size(const Journal *j);
/* The file descriptor records are written to: another thread may fdatasync it (group
 * commit, process/group_sync.h) while this one appends. */
int journal_fd(const Journal *j);
/* Bytes of whole records in the file (what a reader sees; after a failed write, the part
 * that was written). */
uint64_t journal_written_size(const Journal *j);

/* ---------------- reading ---------------- */

typedef struct JournalReader JournalReader;

typedef struct {
    uint64_t offset;     /* file offset of the record's magic */
    uint64_t gap_before; /* damaged bytes skipped just before it (0 normally) */
    uint8_t type;
    uint32_t run;
    uint32_t len;
    const uint8_t *payload; /* valid until the next call on the reader */
} JournalRecord;

JournalReader *journal_reader_open(const char *path, char err[ABL_ERR_MAX]);
/* 1: *rec is the next valid record; 0: end of the valid records (clean end or torn tail;
 * see journal_reader_torn_bytes); -1: I/O error (journal_reader_error). */
int journal_reader_next(JournalReader *r, JournalRecord *rec);
/* Reads on from offset (a record boundary), as if the reader had just been opened there:
 * a reader of a journal that is still being appended picks up what was added. 0 or -1. */
int journal_reader_seek(JournalReader *r, uint64_t offset);
/* After next returned 0: offset just past the last valid record, and the bytes after it. */
uint64_t journal_reader_valid_end(const JournalReader *r);
uint64_t journal_reader_torn_bytes(const JournalReader *r);
/* Damage stepped over so far (between valid records). */
uint64_t journal_reader_damaged_bytes(const JournalReader *r);
uint64_t journal_reader_damaged_regions(const JournalReader *r);
/* Re-reads (pread) and re-validates the record at offset; 0 or -1. Independent of next(). */
int journal_reader_read_at(JournalReader *r, uint64_t offset, JournalRecord *rec);
const char *journal_reader_error(const JournalReader *r);
/* Which run a damaged region may have held, the one answer for resume and the view:
 * JDMG_RUN with *run (one record of a run < n_runs whose header survived), JDMG_NO_RUN (a
 * record of no run, or of a run the plan does not have), JDMG_UNKNOWN (the header is gone:
 * any run then in progress). *type: the record's type when its header survived, else 0. */
typedef enum { JDMG_UNKNOWN = 0, JDMG_RUN, JDMG_NO_RUN } JournalDamagedRun;
JournalDamagedRun journal_reader_damaged_run(JournalReader *r, uint64_t offset, uint64_t len,
                                             uint32_t n_runs, uint8_t *type, uint32_t *run);
void journal_reader_close(JournalReader *r);

/* ---------------- payloads (journal_records.c): appending ---------------- */

/* Typed appends (payload layouts above). kv is n_pairs (key, value) pairs. */
int journal_append_header(Journal *j, const char *const *kv, int n_pairs);
int journal_append_sweep_end(Journal *j, const char *const *kv, int n_pairs);
int journal_append_data(Journal *j, const char *const *kv, int n_pairs);
int journal_append_plan(Journal *j, uint32_t index, const char *id16, const char *name,
                        uint64_t seed, const RunConfig *config);
/* The same with the run's overrides ("model.norm=post model.n_head=4", as ablate plan
 * prints them); NULL omits them. */
int journal_append_plan2(Journal *j, uint32_t index, const char *id16, const char *name,
                         uint64_t seed, const RunConfig *config, const char *overrides);
int journal_append_begin(Journal *j, uint32_t run, uint32_t attempt, int32_t rank, const char *host,
                         int64_t resumed_from_step);
/* packed: events packed with event_pack, back to back (a worker's batch as received). */
int journal_append_events(Journal *j, uint32_t run, uint32_t attempt, const void *packed,
                          size_t len);
int journal_append_end(Journal *j, uint32_t run, uint32_t attempt, int32_t rank, const char *host,
                       const EndEvent *end);
int journal_append_checkpoint(Journal *j, uint32_t run, uint32_t attempt, int64_t step,
                              const char *path);
int journal_append_damage(Journal *j, uint64_t offset, uint64_t length, const char *saved_path);

/* ---------------- payloads (journal_records.c): decoding ---------------- */

typedef struct {
    const uint8_t *p, *end;
} JournalKvIter;
/* Iterates a HEADER/SWEEP_END block: 1 with key/value (not NUL-terminated), 0 at the end,
 * -1 if malformed. */
void journal_kv_begin(JournalKvIter *it, const uint8_t *payload, size_t len);
int journal_kv_next(JournalKvIter *it, const char **key, size_t *klen, const char **val,
                    size_t *vlen);

typedef struct {
    uint32_t index;
    char id[RUN_ID_CHARS];
    uint64_t seed;
    char name[JOURNAL_NAME_MAX];
    const char *config_text; /* escaped "knob=value\n" lines; points into the payload */
    size_t config_len;
    const char *overrides; /* what the variant and grid set (NULL in 0.1.0 journals) */
    size_t overrides_len;
} JournalPlan;

typedef struct {
    uint32_t attempt;
    int32_t rank;
    int64_t resumed_from_step;
    char host[JOURNAL_HOST_MAX];
} JournalBegin;

typedef struct {
    uint32_t attempt;
    int32_t rank;
    char host[JOURNAL_HOST_MAX];
    EndEvent end;
} JournalEnd;

typedef struct {
    uint32_t attempt;
    int64_t step;
    char path[ABL_PATH_MAX];
} JournalCheckpoint;

typedef struct {
    uint64_t offset, length;
    char saved_path[ABL_PATH_MAX];
} JournalDamage;

/* Each returns 0, or -1 if the payload is malformed. */
int journal_decode_damage(const JournalRecord *rec, JournalDamage *d);
int journal_decode_plan(const JournalRecord *rec, JournalPlan *plan);
int journal_decode_begin(const JournalRecord *rec, JournalBegin *b);
int journal_decode_end(const JournalRecord *rec, JournalEnd *e);
int journal_decode_checkpoint(const JournalRecord *rec, JournalCheckpoint *c);
/* The attempt and the packed events of an EVENTS record. */
int journal_decode_events(const JournalRecord *rec, uint32_t *attempt, const uint8_t **packed,
                          size_t *len);

/* The canonical config text (escaped "knob=value\n" per knob, knob_table order); returns
 * its length, or -1 if it does not fit in n bytes (including the NUL). */
int journal_config_text(const RunConfig *c, char *buf, size_t n);
/* Rebuilds a config from the defaults plus every line of a plan's config text. */
int journal_plan_config(const JournalPlan *plan, RunConfig *c, char err[ABL_ERR_MAX]);

#endif
