/* /runs of the sweep view: one row per planned run (identity, grid axes, knobs, the start
 * and end events' fields, where and how often it ran), for the full build and the live one
 * alike. Layout: docs/hdf5-schema.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/knobs.h"
#include "h5view_internal.h"
#include "orchestrator/plan/run_id.h"
#include "util/grow.h"

/* ---------------- /runs ---------------- */

#define COL_NAME_MAX 160

/* The columns of /runs: fixed, one per grid axis, one per knob, the start event's fields,
 * the end event's fields (but status), then where and how often the run ran. */
typedef struct {
    H5Col *cols;
    char (*names)[COL_NAME_MAX];
    int ncol;
    int axis0, knob0, start0, end0, tail0, calib0, rows0;
    int rows_table[N_TABLES], n_rows; /* the metric table of each rows_* column */
    int start_field[32], end_field[32], n_start, n_end;
} RunsLayout;

enum { R_INDEX, R_ID, R_NAME, R_SEED, R_STATUS, R_VARIANT, R_GROUP, R_OVERRIDES, R_NFIXED };
enum { R_RANK, R_HOST, R_ATTEMPTS, R_RESUMED, R_CKPT, R_NTAIL };

static const H5Col fixed_cols[R_NFIXED] = {
    {"index", H5C_I32, 0, NULL, "plan index (= run in the metric tables)"},
    {"id", H5C_STR, RUN_ID_CHARS, NULL, "stable run id: 16 hex digits (id_scheme)"},
    {"name", H5C_VSTR, 0, NULL, "run name: variant/axis=value/.../seedN"},
    {"seed", H5C_U64, 0, NULL, "the run's seed"},
    {"status", H5C_STR, STATUS_LEN, NULL,
     "pending, running, interrupted, done, diverged, failed or not_needed (the attribute "
     "unfinished lists "
     "those of runs that have not ended, one a line)"},
    {"variant", H5C_VSTR, 0, NULL, "variant name (empty for a grid without variants)"},
    {"group", H5C_STR, RUN_ID_CHARS, NULL,
     "hash of the configuration without the seed: seeds of one "
     "configuration share it (and their data: a run trained on data other than the "
     "sweep's first, accepted with --accept-data-change, has a group of its own)"},
    {"overrides", H5C_VSTR, 0, NULL, "what the variant and grid set, as `ablate plan` prints it"},
};
static const H5Col tail_cols[R_NTAIL] = {
    {"rank", H5C_I32, 0, NULL, "MPI rank of the last attempt (-1 if never started)"},
    {"host", H5C_VSTR, 0, NULL, "host of the last attempt"},
    {"attempts", H5C_I32, 0, NULL, "attempts begun"},
    {"resumed_from_step", H5C_I64, 0, "steps",
     "the last attempt resumed from this checkpoint (0 = fresh)"},
    {"last_checkpoint_step", H5C_I64, 0, "steps", "latest checkpoint (0 if none)"},
};

/* What one row of /runs counts for in the view's stats (H5ViewStats runs, runs_done,
 * skipped): h5v_runs_rows_put adds it there or not, as its caller says. */
typedef struct {
    long runs, done;
    long long skipped;
} RowCount;

static void count_row(View *v, const RowCount *c) {
    v->st.runs += c->runs;
    v->st.runs_done += c->done;
    v->st.skipped += c->skipped;
}

static int layout_has(const RunsLayout *L, int upto, const char *name) {
    for (int i = 0; i < upto; i++)
        if (!strcmp(L->cols[i].name, name)) return 1;
    return 0;
}

/* Adds a column, renamed prefix.name if the name is taken. */
static void layout_add(RunsLayout *L, H5Col c, const char *prefix) {
    int i = L->ncol++;
    if (layout_has(L, i, c.name) && prefix) {
        snprintf(L->names[i], COL_NAME_MAX, "%s.%s", prefix, c.name);
        c.name = L->names[i];
    }
    L->cols[i] = c;
}

static int runs_layout(const View *v, RunsLayout *L) {
    const EventSchema *ss = &event_schema[EV_START], *es = &event_schema[EV_END];
    int max = R_NFIXED + v->n_axes + knob_count + ss->n_fields + es->n_fields + R_NTAIL +
              H5V_CALIB_RUN_COLS + N_TABLES;
    memset(L, 0, sizeof *L);
    L->cols = calloc((size_t)max, sizeof *L->cols);
    L->names = calloc((size_t)max, sizeof *L->names);
    if (!L->cols || !L->names) return -1;
    for (int i = 0; i < R_NFIXED; i++)
        layout_add(L, fixed_cols[i], NULL);
    L->axis0 = L->ncol;
    for (int a = 0; a < v->n_axes; a++)
        layout_add(L, (H5Col){v->axes[a], H5C_VSTR, 0, NULL, "grid axis value, as in the run name"},
                   "axis");
    L->knob0 = L->ncol;
    for (int k = 0; k < knob_count; k++)
        layout_add(L, h5v_field_col(&knob_table[k]), "config");
    L->start0 = L->ncol;
    for (int k = 0; k < ss->n_fields && L->n_start < 32; k++) {
        L->start_field[L->n_start++] = k;
        layout_add(L, h5v_field_col(&ss->fields[k]), "start");
    }
    L->end0 = L->ncol;
    for (int k = 0; k < es->n_fields && L->n_end < 32; k++) {
        if (!strcmp(es->fields[k].name, "status")) continue; /* the view's own status column */
        L->end_field[L->n_end++] = k;
        layout_add(L, h5v_field_col(&es->fields[k]), "end");
    }
    L->tail0 = L->ncol;
    for (int i = 0; i < R_NTAIL; i++)
        layout_add(L, tail_cols[i], "run");
    L->calib0 = L->ncol;
    for (int i = 0; i < H5V_CALIB_RUN_COLS; i++)
        layout_add(L, h5v_calib_run_cols[i], "run");
    /* what a reader must get: any reader (h5py, pandas, R) compares its rows per run with
     * these, so a live view's rows that cannot be read are never taken for fewer rows */
    L->rows0 = L->ncol;
    for (int t = 0; t < N_TABLES; t++) {
        const char *tn = h5v_table_name(t);
        if (!tn) continue;
        L->rows_table[L->n_rows++] = t;
        snprintf(L->names[L->ncol], COL_NAME_MAX, "rows_%s", tn);
        layout_add(L,
                   (H5Col){L->names[L->ncol], H5C_I64, 0, "rows",
                           "rows of the metric table it names (rows_steps: /steps) that this view "
                           "holds for the run; a reader that gets fewer, or rows with run = -1 "
                           "(the fill value), read rows that are unavailable"},
                   NULL);
    }
    return 0;
}

static void layout_free(RunsLayout *L) {
    free(L->cols);
    free(L->names);
}

typedef struct {
    H5Table *t;
    uint8_t *row;
    const RunsLayout *L;
    const View *v;
    int bad;
} AxisCtx;

static int put_axis(void *ctx, const char *label, size_t llen, const char *val, size_t vlen) {
    AxisCtx *a = ctx;
    if (!label) {
        a->bad |= h5t_set_vstr(a->t, a->row, R_VARIANT, val, vlen);
        return 0;
    }
    for (int i = 0; i < a->v->n_axes; i++)
        if (strlen(a->v->axes[i]) == llen && !memcmp(a->v->axes[i], label, llen))
            a->bad |= h5t_set_vstr(a->t, a->row, a->L->axis0 + i, val, vlen);
    return 0;
}

static int put_knobs(H5Table *t, uint8_t *row, int c0, const H5Col *cols, const RunConfig *cfg) {
    int bad = 0;
    for (int k = 0; k < knob_count; k++)
        bad |= h5v_put_field(t, row, c0 + k, &cols[c0 + k], cfg, &knob_table[k]);
    return bad;
}

/* The plan's part of a row: identity, variant, group, overrides, axes, knobs. Sets
 * message (and counts a skip in *n) when the config cannot be read back. */
static int put_plan(const View *v, const RunsLayout *L, H5Table *t, uint8_t *row, uint32_t i,
                    const JournalPlan *plan, RunConfig *cfg, char *message, size_t mn,
                    RowCount *n) {
    char cerr[ABL_ERR_MAX], group[RUN_ID_CHARS] = "";
    if (journal_plan_config(plan, cfg, cerr) != 0) {
        n->skipped++;
        snprintf(message, mn, "config: %.240s", cerr);
    } else {
        run_id_format(run_id_hash(cfg, NULL), group);
    }
    h5t_set_i32(t, row, R_INDEX, (int32_t)i);
    h5t_set_str(t, row, R_ID, plan->id, RUN_ID_CHARS);
    h5t_set_u64(t, row, R_SEED, plan->seed);
    h5t_set_str(t, row, R_GROUP, group, RUN_ID_CHARS);
    AxisCtx a = {t, row, L, v, 0};
    a.bad |= h5t_set_vstr(t, row, R_NAME, plan->name, strlen(plan->name));
    a.bad |= h5t_set_vstr(t, row, R_VARIANT, "", 0);
    a.bad |= h5t_set_vstr(t, row, R_OVERRIDES, plan->overrides ? plan->overrides : "",
                          plan->overrides ? plan->overrides_len : 0);
    for (int k = 0; k < v->n_axes; k++)
        a.bad |= h5t_set_vstr(t, row, L->axis0 + k, "", 0);
    h5v_parse_name(plan->name, put_axis, &a);
    return a.bad || put_knobs(t, row, L->knob0, L->cols, cfg) != 0 ? -1 : 0;
}

/* The results part of a row: status, the start and end events' fields, where it ran;
 * the run, and a RUN_END that cannot be read, counted in *n. */
static int put_results(const View *v, const RunsLayout *L, H5Table *t, uint8_t *row, RunState *rs,
                       JournalEnd *end, const char *message, int *status, RowCount *n) {
    JournalReader *r = h5v_run_reader(v, rs);
    JournalRecord rec;
    int have_end = 0;
    int32_t rank = -1;
    char host[JOURNAL_HOST_MAX] = "";
    if (rs->has_end) {
        if (journal_reader_read_at(r, rs->end_off, &rec) == 0 &&
            journal_decode_end(&rec, end) == 0) {
            have_end = 1;
            rank = end->rank;
            snprintf(host, sizeof host, "%s", end->host);
        } else {
            n->skipped++;
            rs->has_end = 0;
        }
    }
    if (!have_end && rs->begun) {
        JournalBegin b;
        if (journal_reader_read_at(r, rs->begin_off, &rec) == 0 &&
            journal_decode_begin(&rec, &b) == 0) {
            rank = b.rank;
            snprintf(host, sizeof host, "%s", b.host);
        }
    }
    if (!have_end) { /* progress so far, from the streamed step events */
        EndEvent *e = &end->end;
        event_fields_default(e, EV_END, 0);
        e->steps = rs->has_step ? rs->last_step : 0;
        e->tokens = rs->has_step ? rs->last_tokens : 0;
        e->train_seconds = rs->has_step ? rs->last_time : NAN;
        e->tokens_per_s =
            rs->has_step && rs->last_time > 0 ? (double)rs->last_tokens / rs->last_time : NAN;
    }
    if (message[0]) snprintf(end->end.message, sizeof end->end.message, "%s", message);
    int st = *status = h5v_run_status(rs, end);
    n->done += st == ST_DONE;
    n->runs++;
    h5t_set_str(t, row, R_STATUS, h5view_status_names[st], STATUS_LEN);
    if (!rs->has_start) event_fields_default(&rs->start, EV_START, 0);
    const EventSchema *ss = &event_schema[EV_START], *es = &event_schema[EV_END];
    int bad = 0;
    for (int k = 0; k < L->n_start; k++)
        bad |= h5v_put_field(t, row, L->start0 + k, &L->cols[L->start0 + k], &rs->start,
                             &ss->fields[L->start_field[k]]);
    for (int k = 0; k < L->n_end; k++)
        bad |= h5v_put_field(t, row, L->end0 + k, &L->cols[L->end0 + k], &end->end,
                             &es->fields[L->end_field[k]]);
    h5t_set_i32(t, row, L->tail0 + R_RANK, rank);
    bad |= h5t_set_vstr(t, row, L->tail0 + R_HOST, host, strlen(host));
    h5t_set_i32(t, row, L->tail0 + R_ATTEMPTS, (int32_t)rs->attempts);
    h5t_set_i64(t, row, L->tail0 + R_RESUMED, rs->resumed_from_step);
    h5t_set_i64(t, row, L->tail0 + R_CKPT, rs->ckpt_step);
    for (int k = 0; k < L->n_rows; k++)
        h5t_set_i64(t, row, L->rows0 + k, rs->rows[L->rows_table[k]]);
    return bad ? -1 : 0;
}

/* What was trained, where the plan's record says otherwise: the vocabulary of the model as
 * built (data whose change was accepted with --accept-data-change resolves another one than
 * the run's PLAN record holds), and a group of its own for a run trained on data other than
 * the sweep's first for its source, so that no analysis pools runs of different data. */
static void put_trained(const View *v, const RunsLayout *L, H5Table *t, uint8_t *row,
                        const RunState *rs, const RunConfig *cfg) {
    if (!rs->has_start) return;
    const StartEvent *se = &rs->start;
    const Knob *vk = knob_find("model.vocab_size");
    if (se->data_vocab_size > 0 && vk)
        h5t_set_i32(t, row, L->knob0 + (int)(vk - knob_table), (int32_t)se->data_vocab_size);
    const DataIdentity *first = NULL;
    for (int i = 0; i < v->n_data && !first; i++)
        if (data_source_is(&v->data[i], &cfg->data)) first = &v->data[i];
    if (!first || !se->data_sha256[0] || !strcmp(first->sha256, se->data_sha256)) return;
    char group[RUN_ID_CHARS];
    uint64_t h = fnv1a(run_id_hash(cfg, NULL), "data_sha256=", 12);
    run_id_format(fnv1a(h, se->data_sha256, strlen(se->data_sha256)), group);
    h5t_set_str(t, row, R_GROUP, group, RUN_ID_CHARS);
}

static int runs_axes_attr(const View *v, const RunsLayout *L, hid_t dset) {
    Buf b = {0};
    for (int a = 0; a < v->n_axes; a++) {
        buf_adds(&b, L->cols[L->axis0 + a].name);
        buf_addc(&b, '\n');
    }
    int rc = b.oom ? -1 : h5_attr_str(dset, "axes", b.p ? b.p : "");
    buf_free(&b);
    return rc;
}

/* The knob columns, one name a line (as /runs names them; a reader needs no list of knob
 * sections), and the statuses of runs that have not ended (the sweep is partial while a
 * run has one), so that readers take both from the file. */
static int runs_kind_attrs(const RunsLayout *L, hid_t dset) {
    Buf b = {0}, u = {0};
    for (int k = 0; k < knob_count; k++) {
        buf_adds(&b, L->cols[L->knob0 + k].name);
        buf_addc(&b, '\n');
    }
    for (int s = ST_PENDING; s < ST_DONE; s++) {
        buf_adds(&u, h5view_status_names[s]);
        buf_addc(&u, '\n');
    }
    int rc = -1;
    if (!b.oom && !u.oom && h5_attr_str(dset, "knobs", b.p ? b.p : "") == 0 &&
        h5_attr_str(dset, "unfinished", u.p ? u.p : "") == 0)
        rc = 0;
    buf_free(&b);
    buf_free(&u);
    return rc;
}

/* ---------------- the live view's rows of ended runs ---------------- */

/* A run that has ended (done, diverged, failed, not needed) keeps its /runs row while its
 * attempt and RUN_END stay the same, and a run not begun yet keeps its row while its PLAN
 * record and the calibrations stay the same, so the live view keeps those rows instead of
 * re-reading and re-formatting the run's PLAN record at every update: an update re-reads
 * only the runs that began or ended since the last (before: an update cost ~0.4 s at
 * 2,000 planned runs with nothing new, and 8.7 s at 10^5 planned runs when only the ended
 * runs were kept). The rows' text cells point to strings interned here, so runs share
 * their knobs' text. A change of the layout (a new grid axis) drops every row. */
typedef struct {
    uint8_t *row;      /* NULL: nothing cached */
    uint64_t end_off;  /* ended: its RUN_END */
    uint64_t plan_off; /* pending: its PLAN record */
    int64_t resumed, ckpt;
    uint32_t attempt, attempts;
    int32_t n_cal; /* pending: the calibration trials its row was made with */
    uint16_t src;
    uint8_t pending;       /* the row of a run not begun (else of an ended run) */
    uint8_t skipped, done; /* counted in the stats when the row is used */
    uint32_t stamp;        /* which row this is: a new one at every store (h5v_runs_rows_sig) */
} CachedRow;

struct RunsCache {
    size_t row_size;
    int ncol, n_axes; /* the layout of the rows */
    CachedRow *rows;
    size_t cap; /* entries of rows (util/grow.h) */
    char **str; /* interned strings: open addressing, a power of two slots */
    size_t str_cap, str_n;
    uint32_t stamps; /* rows stored so far */
};

int h5v_runs_cache_enable(View *v) {
    if (!v->runs_cache && !(v->runs_cache = calloc(1, sizeof *v->runs_cache))) return -1;
    return 0;
}

static void cache_drop_rows(RunsCache *c) {
    for (size_t i = 0; i < c->cap; i++)
        free(c->rows[i].row);
    if (c->rows) memset(c->rows, 0, c->cap * sizeof *c->rows);
}

void h5v_runs_cache_free(View *v) {
    RunsCache *c = v->runs_cache;
    if (!c) return;
    cache_drop_rows(c);
    free(c->rows);
    for (size_t i = 0; i < c->str_cap; i++)
        free(c->str[i]);
    free(c->str);
    free(c);
    v->runs_cache = NULL;
}

static size_t str_slot(const RunsCache *c, const char *s) {
    size_t h = (size_t)fnv1a(FNV1A_BASIS, s, strlen(s)) & (c->str_cap - 1);
    while (c->str[h] && strcmp(c->str[h], s))
        h = (h + 1) & (c->str_cap - 1);
    return h;
}

static const char *intern(RunsCache *c, const char *s) {
    if (2 * (c->str_n + 1) > c->str_cap) {
        size_t cap = c->str_cap ? 2 * c->str_cap : 256;
        char **old = c->str;
        size_t old_cap = c->str_cap;
        if (!(c->str = calloc(cap, sizeof *c->str))) return c->str = old, NULL;
        c->str_cap = cap;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i]) c->str[str_slot(c, old[i])] = old[i];
        free(old);
    }
    size_t h = str_slot(c, s);
    if (!c->str[h]) {
        if (!(c->str[h] = strdup(s))) return NULL;
        c->str_n++;
    }
    return c->str[h];
}

/* The rows fit the layout they were made with, or go. */
static void cache_layout(RunsCache *c, size_t row_size, int ncol, const View *v) {
    if (c->row_size == row_size && c->ncol == ncol && c->n_axes == v->n_axes) return;
    cache_drop_rows(c);
    c->row_size = row_size;
    c->ncol = ncol;
    c->n_axes = v->n_axes;
}

/* A run planned and never begun: its row is its plan's (and the calibrations'). */
static int run_pending(const RunState *rs) {
    return !rs->has_end && !rs->begun && rs->n_ev == 0 && rs->attempt == 0;
}

static int cache_valid(const CachedRow *e, const RunState *rs, int n_cal) {
    if (!e->row || e->src != rs->src) return 0;
    if (e->pending)
        return run_pending(rs) && e->plan_off == rs->plan_off && e->n_cal == n_cal &&
               e->resumed == rs->resumed_from_step && e->ckpt == rs->ckpt_step &&
               e->attempts == rs->attempts;
    return rs->has_end && e->end_off == rs->end_off && e->attempt == rs->attempt &&
           e->attempts == rs->attempts;
}

/* Run i's row from the cache into a new row of t, what it counts for in *n: 1, 0 when none
 * is cached, -1 (memory). */
static int cache_use(const View *v, const RunsLayout *L, H5Table *t, uint32_t i, const RunState *rs,
                     RowCount *n, char *err) {
    RunsCache *c = v->runs_cache;
    if (!c || i >= c->cap || !cache_valid(&c->rows[i], rs, v->n_cal)) return 0;
    const CachedRow *e = &c->rows[i];
    uint8_t *row = h5t_row(t, err);
    if (!row) return -1;
    memcpy(row, e->row, c->row_size);
    for (int k = 0; k < t->ncol; k++) {
        if (t->types[k] != H5C_VSTR) continue;
        const char *s;
        memcpy(&s, row + t->off[k], sizeof s);
        if (!s) continue;                     /* a cell never set stays so */
        memset(row + t->off[k], 0, sizeof s); /* the table's own copy goes there */
        if (h5t_set_vstr(t, row, k, s, strlen(s)) != 0)
            return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    }
    for (int k = 0; k < L->n_rows; k++)
        h5t_set_i64(t, row, L->rows0 + k, rs->rows[L->rows_table[k]]);
    *n = (RowCount){1, e->done, e->skipped};
    return 1;
}

/* Keeps run i's row just made (row) if the run has ended for good or has not begun. 0, or
 * -1 (memory). */
static int cache_store(View *v, H5Table *t, uint32_t i, const RunState *rs, const uint8_t *row,
                       int status, int skipped) {
    RunsCache *c = v->runs_cache;
    int pending = status == ST_PENDING && run_pending(rs);
    /* a run part-way (running, or interrupted: it runs again) changes at every update */
    if (!c || (!pending && (!rs->has_end || status < ST_DONE))) return 0;
    if (i >= c->cap) {
        size_t old = c->cap;
        if (GROW(c->rows, c->cap, (size_t)i + 1) != 0) return -1;
        memset(c->rows + old, 0, (c->cap - old) * sizeof *c->rows);
    }
    CachedRow *e = &c->rows[i];
    if (!e->row && !(e->row = malloc(c->row_size))) return -1;
    memcpy(e->row, row, c->row_size);
    for (int k = 0; k < t->ncol; k++) {
        if (t->types[k] != H5C_VSTR) continue;
        const char *s, *in = NULL;
        memcpy(&s, row + t->off[k], sizeof s);
        if (s && !(in = intern(c, s))) return free(e->row), e->row = NULL, -1;
        memcpy(e->row + t->off[k], &in, sizeof in);
    }
    e->end_off = rs->end_off;
    e->plan_off = rs->plan_off;
    e->resumed = rs->resumed_from_step;
    e->ckpt = rs->ckpt_step;
    e->n_cal = v->n_cal;
    e->pending = (uint8_t)pending;
    e->attempt = rs->attempt;
    e->attempts = rs->attempts;
    e->src = rs->src;
    e->skipped = (uint8_t)skipped;
    e->done = status == ST_DONE;
    e->stamp = ++c->stamps;
    return 0;
}

/* The rows of /runs being made (h5view_internal.h): the layout, and scratch for one run. */
struct RunsRows {
    View *v;
    RunsLayout L;
    RunConfig *cfg;
    JournalEnd *end;
    JournalPlan *plan;
};

static const char runs_desc[] =
    "One row per planned run, in plan order (row i = plan index i = the run column of the "
    "metric tables): identity, grid axes (attribute axes), config knobs named by the knob "
    "(attribute knobs), the start and end events' fields. Unknown numbers are NaN (floats) or "
    "-1 (integers).";

void h5v_runs_rows_close(RunsRows *w) {
    if (!w) return;
    layout_free(&w->L);
    free(w->cfg);
    free(w->end);
    free(w->plan);
    free(w);
}

RunsRows *h5v_runs_rows_open(View *v, char *err) {
    RunsRows *w = calloc(1, sizeof *w);
    if (!w || runs_layout(v, &w->L) != 0 || !(w->cfg = malloc(sizeof *w->cfg)) ||
        !(w->end = malloc(sizeof *w->end)) || !(w->plan = malloc(sizeof *w->plan))) {
        h5v_runs_rows_close(w);
        snprintf(err, ABL_ERR_MAX, "out of memory");
        return NULL;
    }
    w->v = v;
    /* the rows kept fit this layout, or go (before any sig is taken) */
    if (v->runs_cache)
        cache_layout(v->runs_cache, h5t_row_size(w->L.cols, w->L.ncol), w->L.ncol, v);
    return w;
}

int h5v_runs_rows_table(RunsRows *w, hid_t loc, const char *name, const TableBlock *blocks,
                        int nblocks, H5Table *schema, H5Table *t, char *err) {
    View *v = w->v;
    int user = !strcmp(name, "runs"); /* the table readers see (else a live view's rows) */
    const char *desc = user ? runs_desc
                            : "Live view: the rows of /runs that change between updates "
                              "(/runs maps them; docs/hdf5-schema.md, the live view).";
    int rc = blocks ? h5t_create_virtual(t, loc, name, w->L.cols, w->L.ncol, 1, desc, blocks,
                                         nblocks, err)
                    : h5t_create(t, loc, name, w->L.cols, w->L.ncol, 1, desc, err);
    if (rc != 0) return -1;
    if (user && (runs_axes_attr(v, &w->L, t->dset) != 0 || runs_kind_attrs(&w->L, t->dset) != 0)) {
        h5_err(err, "cannot write the attributes of /runs");
        return -1;
    }
    /* every table of a view file is in its /schema (a segment has none) */
    return h5t_schema_add(schema, name, w->L.cols, w->L.ncol, err);
}

int h5v_runs_rows_put(RunsRows *w, H5Table *t, uint32_t i, int count, char *err) {
    View *v = w->v;
    RunState *rs = &v->runs[i];
    if (!rs->planned) return 0;
    RowCount n = {0};
    int cached = cache_use(v, &w->L, t, i, rs, &n, err);
    if (cached < 0) return -1;
    if (count) count_row(v, &n);
    if (cached) return 0;
    JournalRecord rec;
    JournalReader *r = h5v_run_reader(v, rs);
    v->st.plan_reads++;
    if (journal_reader_read_at(r, rs->plan_off, &rec) != 0 ||
        journal_decode_plan(&rec, w->plan) != 0) {
        snprintf(err, ABL_ERR_MAX, "run %u: cannot re-read its plan: %s", i,
                 journal_reader_error(r));
        return -1;
    }
    uint8_t *row = h5t_row(t, err);
    if (!row) return -1;
    char message[256] = "";
    int status;
    int bad = put_plan(v, &w->L, t, row, i, w->plan, w->cfg, message, sizeof message, &n) != 0 ||
              put_results(v, &w->L, t, row, rs, w->end, message, &status, &n) != 0;
    if (count) count_row(v, &n);
    if (bad) return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    if (!message[0]) put_trained(v, &w->L, t, row, rs, w->cfg);
    h5v_calibration_put(v, t, row, w->L.calib0, message[0] ? NULL : w->cfg);
    if (cache_store(v, t, i, rs, row, status, message[0] != 0) != 0) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        return -1;
    }
    return 0;
}

uint64_t h5v_runs_rows_sig(RunsRows *w, uint32_t i) {
    View *v = w->v;
    RunsCache *c = v->runs_cache;
    const RunState *rs = &v->runs[i];
    if (!rs->planned || !c || i >= c->cap || !cache_valid(&c->rows[i], rs, v->n_cal)) return 0;
    uint64_t h = fnv1a(FNV1A_BASIS, (const char *)&c->rows[i].stamp, sizeof c->rows[i].stamp);
    h = fnv1a(h, (const char *)rs->rows, sizeof rs->rows);
    return h | 1;
}

int h5v_runs_rows_settled(RunsRows *w, uint32_t i) {
    const RunState *rs = &w->v->runs[i];
    return rs->planned && (run_pending(rs) || (rs->has_end && rs->end_status != RUN_INTERRUPTED));
}

void h5v_runs_rows_tally(RunsRows *w, uint32_t i) {
    const CachedRow *e = &w->v->runs_cache->rows[i];
    count_row(w->v, &(RowCount){1, e->done, e->skipped});
}

int h5v_write_runs(View *v, hid_t file, char *err) {
    RunsRows *w = h5v_runs_rows_open(v, err);
    if (!w) return -1;
    H5Table runs;
    h5t_init(&runs);
    int rc = h5v_runs_rows_table(w, file, "runs", NULL, 0, v->schema, &runs, err);
    for (uint32_t i = 0; i < v->nruns && rc == 0; i++)
        rc = h5v_runs_rows_put(w, &runs, i, 1, err);
    char e2[ABL_ERR_MAX];
    if (h5t_close(&runs, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    h5v_runs_rows_close(w);
    return rc;
}

int h5v_runs_col(const char *name, H5Col *col) {
    View v;
    memset(&v, 0, sizeof v); /* no grid axes: their columns are each file's own */
    RunsLayout L;
    int rc = -1;
    if (runs_layout(&v, &L) == 0)
        for (int i = 0; i < L.ncol && rc != 0; i++)
            if (!strcmp(L.cols[i].name, name)) {
                *col = L.cols[i];
                col->name = name; /* L's names go with it */
                rc = 0;
            }
    layout_free(&L);
    return rc;
}

/* The /runs part of docs/hdf5-schema.md's tables (h5view_schema_markdown). */
void h5v_runs_markdown(Buf *b, const char *head) {
    View v;
    memset(&v, 0, sizeof v);
    RunsLayout L;
    if (runs_layout(&v, &L) != 0) return;
    buf_printf(b,
               "#### `/runs`\nFixed columns, then one str column per grid axis (listed in the "
               "attribute `axes`), then one column per knob (below; listed in the attribute "
               "`knobs`), then:\n\n%s",
               head);
    h5v_md_rows(b, L.cols, R_NFIXED);
    h5v_md_rows(b, L.cols + L.start0, L.ncol - L.start0);
    buf_printf(b, "\nKnob columns (named by the knob; `units.<knob>` attributes):\n\n%s", head);
    h5v_md_rows(b, L.cols + L.knob0, L.start0 - L.knob0);
    layout_free(&L);
}
