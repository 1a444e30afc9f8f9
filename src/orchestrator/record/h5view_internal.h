/* The internals of the sweep view shared by the full build (h5view.c) and the live,
 * incremental one (h5view_live.c): the per-run state pass 1 collects, the metric tables'
 * layout, and the passes themselves. Not a public interface: beyond the view's files only
 * its reader in this directory (inspect.c) uses it, for the columns as they are written. */
#ifndef ABLATE_ORCH_H5VIEW_INTERNAL_H
#define ABLATE_ORCH_H5VIEW_INTERNAL_H

#include <hdf5.h>
#include <stdint.h>

#include "util/buf.h"
#include "worker/event_schema.h"
#include "h5table.h"
#include "h5view.h"
#include "journal.h"
#include "journal_calibration.h"
#include "journal_tune.h"
#include "journal_replicate.h"
#include "worker/data_identity.h"

enum {
    ST_PENDING,
    ST_RUNNING,
    ST_INTERRUPTED,
    ST_DONE,
    ST_DIVERGED,
    ST_FAILED,
    ST_NOT_NEEDED,
    ST_COUNT
};

#define STATUS_LEN    12
#define MAX_RUN_INDEX (1u << 24)
#define MAX_AXES      64

typedef struct {
    char *key, *val;
    size_t vlen;
} Kv;

typedef struct {
    Kv *v;
    int n;
    size_t cap;
} KvList;

#define N_METRICS 4               /* steps, evals, acts (+ attn), samples */
#define N_TABLES  (2 * N_METRICS) /* table 2m is metric m's, 2m+1 its child table (attn) */

typedef struct {
    uint64_t plan_off, begin_off, end_off;
    uint64_t *ev; /* offsets of the EVENTS records of the last attempt */
    uint32_t n_ev;
    size_t cap_ev;
    uint32_t attempt, attempts, begin_session;
    int64_t resumed_from_step, ckpt_step;
    uint8_t planned, begun, has_end, has_start, has_step;
    uint8_t stale;     /* begun, not ended, and its writer gone or a later session began */
    int8_t end_status; /* RunStatus of the RUN_END (has_end) */
    uint16_t src;      /* the journal these offsets are in (View.rd) */
    /* from the events (pass 2) */
    StartEvent start;
    long last_step, last_tokens;
    double last_time;
    long tokens_per_step;   /* from the plan's config: fills /evals tokens of 0.1.0 journals
                               (0: not read yet, -1: unreadable) */
    int64_t rows[N_TABLES]; /* rows of each metric table the view holds for it (/runs rows_*) */
} RunState;

typedef struct RunsCache RunsCache; /* h5view_runs.c */
typedef struct H5Damage H5Damage;   /* h5view_damage.c */
typedef struct {
    int journal;
    uint64_t offset;
} H5DamageHandled; /* a DAMAGE record: a region an earlier --resume handled */

typedef struct {
    RunState *runs;
    uint32_t nruns; /* 1 + the highest run index seen */
    size_t cap;     /* allocated entries of runs (util/grow.h) */
    KvList header, end;
    uint32_t session, sweep_end_session;
    /* the alpha ledger of a fixed design: planned runs so far, and at each session that
     * ended complete (a report of it may have been read: a look at that many runs) */
    uint32_t n_planned, complete_at[16];
    int n_complete_at;
    char *axes[MAX_AXES]; /* grid axis labels as run names write them, first-seen order */
    int n_axes;
    H5ViewStats st;
    int writer_gone; /* no process holds the journal's lock: nothing is running */
    /* several journals (a joined sweep, join.h): one reader each; each run shows the attempt
     * of the journal that got furthest with it */
    JournalReader **rd;
    int nrd;
    int joined, any_writer; /* several journals; some journal's writer still holds it */
    KvList *header_into;    /* the first journal's header is the file's; others are read
                               into a scratch list */
    DataIdentity *data;     /* the sweep's data: the first DATA record of each source */
    int n_data;
    size_t cap_data;
    H5Table *schema; /* the /schema of the view file being written (NULL: none) */
    /* a replicate: sweep (h5view_replicate.c): its last REPLICATE record, its decisions */
    JournalReader *rep_rd; /* NULL: not a replicate: sweep */
    uint64_t rep_off;
    JournalDecision *dec;
    int n_dec;
    size_t cap_dec;
    /* calibrated fixed time (h5view_calibration.c): the trials, first of each */
    JournalCalibration *cal;
    int n_cal;
    size_t cap_cal;
    /* a tune: sweep (h5view_tuning.c): the last TUNE record of each configuration */
    JournalTune **tune;
    int n_tune;
    size_t cap_tune;
    RunsCache *runs_cache; /* the live view's /runs rows of ended runs; NULL: none */
    /* journal damage (h5view_damage.c): regions met in pass 1, those DAMAGE records name */
    int cur_journal; /* the View.rd index pass 1 reads */
    H5Damage *dmg;
    int n_dmg;
    size_t cap_dmg;
    H5DamageHandled *dmg_handled;
    int n_dmg_handled;
    size_t cap_dmg_handled;
    char *dmg_text; /* the unhandled regions, a line each (h5v_damage_settle) */
} View;

#define METRIC_MAX_COLS 32

/* Every field of a metric table's kind is a column (plus run): a field appended to one of
 * events.h's lists past the limit stops the build here instead of going silently missing
 * from OUT.h5. (The count is an upper bound: an FT_HEADS field and its count go to the
 * child table.) */
#define H5V_COUNT_FIELD(S, name, type, n, names, units, desc) +1
#define H5V_FITS(LIST)                                        (1 + (0 LIST(H5V_COUNT_FIELD, _)) <= METRIC_MAX_COLS)
_Static_assert(H5V_FITS(EVENT_STEP_FIELDS), "EVENT_STEP_FIELDS: raise METRIC_MAX_COLS");
_Static_assert(H5V_FITS(EVENT_EVAL_FIELDS), "EVENT_EVAL_FIELDS: raise METRIC_MAX_COLS");
_Static_assert(H5V_FITS(EVENT_ACT_FIELDS), "EVENT_ACT_FIELDS: raise METRIC_MAX_COLS");
_Static_assert(H5V_FITS(EVENT_SAMPLE_FIELDS), "EVENT_SAMPLE_FIELDS: raise METRIC_MAX_COLS");

typedef struct {
    EventKind kind;
    const char *name, *desc;
    const char *child, *child_value, *child_desc; /* the table of an FT_HEADS field */
    H5Table t, c;
    H5Col cols[METRIC_MAX_COLS], ccols[8];
    int field[METRIC_MAX_COLS]; /* field index of each column (column 0 is run) */
    int ncol, nccol, heads, ckeys[6], nckeys;
} Metric;

/* Pass 1: indexes the records of r that end within limit into v (continuing from whatever
 * v holds); 0 or -1 with err. */
int h5v_pass1(View *v, JournalReader *r, uint64_t limit, char *err);
/* After pass 1 of one journal: which of its unended attempts are no longer running. */
void h5v_mark_stale(View *v);
/* The metric tables' definitions and columns (no file touched). */
void h5v_metrics_layout(Metric *ms);
/* Creates the metric tables in file, listing them in schema (NULL: a segment, no schema). */
int h5v_metrics_create(Metric *ms, hid_t file, H5Table *schema, char *err);
/* Streams EVENTS records [from, n_ev) of run i into the tables (and its pass-2 state). */
int h5v_run_events(View *v, Metric *ms, uint32_t i, uint32_t from, Event *ev, char *err);
int h5v_write_root(View *v, hid_t file, char *err);
int h5v_write_runs(View *v, hid_t file, char *err);
/* /runs row by row (the live view writes it in pages, h5view_live.c): open takes the layout
 * (and drops kept rows made for another); table creates /runs (name "runs": its attributes
 * too; virtual over blocks when blocks is not NULL) or a table of the same columns, listed
 * in schema (NULL: nowhere, as in a segment); put appends run i's row (nothing for a run not
 * planned) and, when count, counts it in v->st (runs, runs_done, skipped; every PLAN record it
 * reads counts in plan_reads whatever count says); sig is 0 unless run i's row is kept and would
 * be put as it is, else a value that changes whenever the row would; settled: run i has not
 * begun or has ended (put keeps its row, as a rule); tally counts run i in v->st as put does,
 * for a row kept (sig != 0) but not put with count. */
typedef struct RunsRows RunsRows;
RunsRows *h5v_runs_rows_open(View *v, char *err);
int h5v_runs_rows_table(RunsRows *w, hid_t loc, const char *name, const TableBlock *blocks,
                        int nblocks, H5Table *schema, H5Table *t, char *err);
int h5v_runs_rows_put(RunsRows *w, H5Table *t, uint32_t i, int count, char *err);
uint64_t h5v_runs_rows_sig(RunsRows *w, uint32_t i);
int h5v_runs_rows_settled(RunsRows *w, uint32_t i);
void h5v_runs_rows_tally(RunsRows *w, uint32_t i);
void h5v_runs_rows_close(RunsRows *w);
/* The column of /runs named name as the writer lays it out (the fixed, knob, start and end
 * event, tail, calibration and rows_* columns; a grid axis is a file's own) into *col, its
 * name pointing to name: 0, or -1 when /runs has none such. For the readers of /runs
 * (inspect.c), so that they read each column as it is written. */
int h5v_runs_col(const char *name, H5Col *col);
/* From now on h5v_write_runs keeps the rows of ended runs and uses them again (the live
 * view); 0 or -1 (memory). h5v_view_free frees them. */
int h5v_runs_cache_enable(View *v);
void h5v_runs_cache_free(View *v);
/* The name of metric table t (N_TABLES numbering) or NULL where metric t/2 has no child. */
const char *h5v_table_name(int t);
/* Calls fn for each "label=value" segment of a run name (the variant segment, without '=',
 * with label NULL). */
typedef int (*NameFn)(void *ctx, const char *label, size_t llen, const char *val, size_t vlen);
int h5v_parse_name(const char *name, NameFn fn, void *ctx);
/* The reader of the journal a run's offsets are in. */
JournalReader *h5v_run_reader(const View *v, const RunState *rs);
/* ST_* of a run, from its state and (has_end) its decoded RUN_END. */
int h5v_run_status(const RunState *rs, const JournalEnd *end);
/* The HDF5 column of a field (an event field or a knob), and its value into a row. */
H5Col h5v_field_col(const FieldDesc *f);
int h5v_put_field(H5Table *t, uint8_t *row, int c, const H5Col *col, const void *body,
                  const FieldDesc *f);
/* The /runs part of the docs' schema tables; md_rows writes column rows. */
void h5v_runs_markdown(Buf *b, const char *head);
void h5v_md_rows(Buf *b, const H5Col *cols, int n);
/* The live view's /view_blocks part of the docs' tables (h5view_live.c). */
void h5v_live_markdown(Buf *b, const char *head);
/* Pass 1 of a REPLICATE or DECISION record read with r; 0 or -1 (memory). */
int h5v_replicate_record(View *v, JournalReader *r, const JournalRecord *rec);
/* /contrasts, /decisions and the rule's root attributes of a replicate: sweep (nothing for
 * another sweep); 0 or -1 with err. */
int h5v_write_replicate(View *v, hid_t file, char *err);
void h5v_replicate_markdown(Buf *b, const char *head);
/* Pass 1 of a CALIBRATION record; 0 or -1 (memory). */
int h5v_calibration_record(View *v, const JournalRecord *rec);
/* /calibration (nothing without trials); 0 or -1 with err. */
int h5v_write_calibration(View *v, hid_t file, char *err);
void h5v_calibration_markdown(Buf *b, const char *head);
/* The calibrated-budget columns of /runs, and a run's values into them from column c0. */
#define H5V_CALIB_RUN_COLS 5
extern const H5Col h5v_calib_run_cols[H5V_CALIB_RUN_COLS];
void h5v_calibration_put(const View *v, H5Table *t, uint8_t *row, int c0, const RunConfig *cfg);
/* Pass 1 of a TUNE record; 0 or -1 (memory). /tuning (nothing without choices); 0 or -1
 * with err. free: the records kept. */
int h5v_tune_record(View *v, const JournalRecord *rec);
int h5v_write_tuning(View *v, hid_t file, char *err);
void h5v_tuning_markdown(Buf *b, const char *head);
void h5v_tune_free(View *v);
/* Journal damage (h5view_damage.c). Pass 1: a gap of damaged bytes before a record (the
 * runs it may have held are found now, from the runs in progress), and a DAMAGE record
 * (a region an earlier --resume handled); 0 or -1 (memory). settle: the regions no DAMAGE
 * record names into v->st and v->dmg_text (before the root is written); write_damage: the
 * root attributes (0 or -1); free: what they hold. */
int h5v_damage_gap(View *v, JournalReader *r, uint64_t offset, uint64_t length);
int h5v_damage_handled(View *v, const JournalRecord *rec);
void h5v_damage_settle(View *v);
int h5v_write_damage(View *v, hid_t file);
void h5v_damage_free(View *v);
/* Frees what v holds (not the readers). */
void h5v_view_free(View *v);

#endif
