#include "h5view.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../model/gpt.h"
#include "../worker/knobs.h"
#include "event_codec.h"
#include "fsutil.h"
#include "journal.h"
#include "run_exec.h"

#ifndef ABLATE_VERSION
#define ABLATE_VERSION "unknown"
#endif

const char *const h5view_status_names[6] = {"pending", "running",  "interrupted",
                                            "done",    "diverged", "failed"};
enum { ST_PENDING, ST_RUNNING, ST_INTERRUPTED, ST_DONE, ST_DIVERGED, ST_FAILED };

#define TABLE_MAX_ROWS  65536
#define TABLE_MAX_BYTES (8u << 20)
#define CHUNK_MAX_BYTES (1u << 20)
#define STATUS_LEN      12
#define MAX_RUN_INDEX   (1u << 24)

/* ---------------- errors ---------------- */

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
    if (n == 0) snprintf(data, 200, "%s (%s)", e->desc ? e->desc : "?", e->func_name);
    return 0;
}

/* One line: what failed, and why. HDF5's own text for a failed write embeds a ctime()
 * with its newline and a dump of the call; when it names an errno, strerror says it. */
static void h5err(char *err, const char *fmt, ...) {
    char what[300], h5[200] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, h5);
    const char *e = strstr(h5, "errno = ");
    int code = e ? atoi(e + 8) : 0;
    if (code > 0)
        snprintf(err, ABL_ERR_MAX, "%s: %s", what, strerror(code));
    else if (h5[0])
        snprintf(err, ABL_ERR_MAX, "%s: HDF5: %s", what, h5);
    else
        snprintf(err, ABL_ERR_MAX, "%s", what);
    for (char *c = err; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
}

void h5view_process_init(void) {
    /* A file whose close failed (a full disk) stays in HDF5's tables, and the library's
     * atexit handler then crashes closing it again (HDF5 1.10, exit 139). ablate closes
     * every file it opens itself, so it needs no cleanup at exit. */
    H5dont_atexit();
}

/* ---------------- tables: a chunked, compressed, extendible 1-D dataset ---------------- */

typedef enum { C_I32, C_I64, C_U64, C_F64, C_BOOL, C_STR, C_VSTR } ColType;

typedef struct {
    const char *name;
    ColType type;
    size_t len; /* C_STR: bytes including the NUL */
    const char *units;
} Col;

typedef struct {
    hid_t dset, type;
    int ncol, compound;
    size_t *off;
    ColType *types;
    size_t row_size;
    uint8_t *buf;
    size_t nbuf, cap, vbytes;
    hsize_t nrows;
} Table;

static size_t col_size(const Col *c) {
    switch (c->type) {
    case C_I32:
        return 4;
    case C_I64:
    case C_U64:
    case C_F64:
        return 8;
    case C_BOOL:
        return 1;
    case C_STR:
        return c->len;
    case C_VSTR:
        return sizeof(char *);
    }
    return 0;
}

static hid_t col_h5type(const Col *c) {
    hid_t t = -1;
    switch (c->type) {
    case C_I32:
        return H5Tcopy(H5T_NATIVE_INT32);
    case C_I64:
        return H5Tcopy(H5T_NATIVE_INT64);
    case C_U64:
        return H5Tcopy(H5T_NATIVE_UINT64);
    case C_F64:
        return H5Tcopy(H5T_NATIVE_DOUBLE);
    case C_BOOL: { /* h5py reads this enum as numpy bool */
        t = H5Tenum_create(H5T_NATIVE_INT8);
        int8_t f = 0, tr = 1;
        H5Tenum_insert(t, "FALSE", &f);
        H5Tenum_insert(t, "TRUE", &tr);
        return t;
    }
    case C_STR:
        t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, c->len);
        H5Tset_strpad(t, H5T_STR_NULLTERM);
        /* Tagged ASCII (the bytes are kept as given): C readers with a plain H5T_C_S1
         * memory type can read it; HDF5 does not convert between ASCII and UTF-8 tags. */
        H5Tset_cset(t, H5T_CSET_ASCII);
        return t;
    case C_VSTR:
        t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, H5T_VARIABLE);
        H5Tset_cset(t, H5T_CSET_UTF8);
        return t;
    }
    return -1;
}

static int attr_str(hid_t loc, const char *name, const char *value) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    const char *v = value ? value : "";
    herr_t rc = a < 0 ? -1 : H5Awrite(a, t, &v);
    if (a >= 0) H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
    return rc < 0 ? -1 : 0;
}

static int attr_i32(hid_t loc, const char *name, int value) {
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, H5T_NATIVE_INT, &value);
    if (a >= 0) H5Aclose(a);
    H5Sclose(s);
    return rc < 0 ? -1 : 0;
}

static hid_t make_dcpl(hsize_t chunk) {
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, 4);
    H5Pset_obj_track_times(dcpl, 0);
    return dcpl;
}

/* compound = 0: a single-column dataset of that column's type. */
static int table_create(Table *t, hid_t loc, const char *name, const Col *cols, int ncol,
                        int compound, const char *description, char *err) {
    memset(t, 0, sizeof *t);
    t->dset = t->type = -1;
    t->ncol = ncol;
    t->compound = compound;
    t->off = calloc((size_t)ncol, sizeof *t->off);
    t->types = calloc((size_t)ncol, sizeof *t->types);
    if (!t->off || !t->types) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        return -1;
    }
    for (int i = 0; i < ncol; i++) {
        t->off[i] = t->row_size;
        t->types[i] = cols[i].type;
        t->row_size += col_size(&cols[i]);
    }
    if (compound) {
        t->type = H5Tcreate(H5T_COMPOUND, t->row_size);
        for (int i = 0; i < ncol && t->type >= 0; i++) {
            hid_t ct = col_h5type(&cols[i]);
            if (ct < 0 || H5Tinsert(t->type, cols[i].name, t->off[i], ct) < 0) {
                if (ct >= 0) H5Tclose(ct);
                h5err(err, "cannot build the type of /%s (column %s)", name, cols[i].name);
                return -1;
            }
            H5Tclose(ct);
        }
    } else {
        t->type = col_h5type(&cols[0]);
    }
    if (t->type < 0) {
        h5err(err, "cannot build the type of /%s", name);
        return -1;
    }
    /* Power-of-two chunks of at most 1 MiB; the row buffer holds whole chunks. */
    hsize_t chunk = 64;
    while (chunk * 2 * t->row_size <= CHUNK_MAX_BYTES && chunk * 2 <= TABLE_MAX_ROWS)
        chunk *= 2;
    size_t cap = chunk;
    while (cap * 2 * t->row_size <= TABLE_MAX_BYTES && cap * 2 <= TABLE_MAX_ROWS)
        cap *= 2;
    t->cap = cap;
    t->buf = malloc(cap * t->row_size);
    if (!t->buf) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        return -1;
    }
    hsize_t dims = 0, maxdims = H5S_UNLIMITED;
    hid_t space = H5Screate_simple(1, &dims, &maxdims);
    hid_t dcpl = make_dcpl(chunk);
    t->dset = H5Dcreate2(loc, name, t->type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
    if (t->dset < 0) {
        h5err(err, "cannot create dataset /%s", name);
        return -1;
    }
    if (attr_str(t->dset, "description", description) != 0) {
        h5err(err, "cannot write attributes of /%s", name);
        return -1;
    }
    for (int i = 0; i < ncol; i++) {
        if (!cols[i].units) continue;
        char an[128];
        snprintf(an, sizeof an, "units.%s", cols[i].name);
        if (attr_str(t->dset, an, cols[i].units) != 0) {
            h5err(err, "cannot write attributes of /%s", name);
            return -1;
        }
    }
    return 0;
}

static void table_free_vstr(Table *t) {
    for (int c = 0; c < t->ncol; c++) {
        if (t->types[c] != C_VSTR) continue;
        for (size_t r = 0; r < t->nbuf; r++) {
            char *s;
            memcpy(&s, t->buf + r * t->row_size + t->off[c], sizeof s);
            free(s);
        }
    }
    t->vbytes = 0;
}

static int table_flush(Table *t, char *err) {
    if (t->nbuf == 0) return 0;
    hsize_t start = t->nrows, count = t->nbuf, total = t->nrows + t->nbuf;
    int rc = -1;
    hid_t fspace = -1, mspace = -1;
    if (H5Dset_extent(t->dset, &total) < 0) goto done;
    fspace = H5Dget_space(t->dset);
    if (fspace < 0 || H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &count, NULL) < 0)
        goto done;
    mspace = H5Screate_simple(1, &count, NULL);
    if (mspace < 0 || H5Dwrite(t->dset, t->type, mspace, fspace, H5P_DEFAULT, t->buf) < 0)
        goto done;
    rc = 0;
done:
    if (rc != 0) h5err(err, "cannot write rows");
    if (mspace >= 0) H5Sclose(mspace);
    if (fspace >= 0) H5Sclose(fspace);
    table_free_vstr(t);
    t->nrows = total;
    t->nbuf = 0;
    return rc;
}

/* The next (zeroed) row; NULL if a flush failed. */
static uint8_t *table_row(Table *t, char *err) {
    if ((t->nbuf == t->cap || t->vbytes > TABLE_MAX_BYTES) && table_flush(t, err) != 0) return NULL;
    uint8_t *row = t->buf + t->row_size * t->nbuf++;
    memset(row, 0, t->row_size); /* fixed strings rely on zero padding */
    return row;
}

/* Flushes (unless discard) and releases everything. */
static int table_close(Table *t, int discard, char *err) {
    int rc = 0;
    if (!discard && t->dset >= 0 && t->buf)
        rc = table_flush(t, err);
    else
        table_free_vstr(t);
    if (t->dset >= 0) H5Dclose(t->dset);
    if (t->type >= 0) H5Tclose(t->type);
    free(t->buf);
    free(t->off);
    free(t->types);
    memset(t, 0, sizeof *t);
    t->dset = t->type = -1;
    return rc;
}

static inline void set_i32(Table *t, uint8_t *row, int c, int32_t v) {
    memcpy(row + t->off[c], &v, 4);
}
static inline void set_i64(Table *t, uint8_t *row, int c, int64_t v) {
    memcpy(row + t->off[c], &v, 8);
}
static inline void set_u64(Table *t, uint8_t *row, int c, uint64_t v) {
    memcpy(row + t->off[c], &v, 8);
}
static inline void set_f64(Table *t, uint8_t *row, int c, double v) {
    memcpy(row + t->off[c], &v, 8);
}
static inline void set_bool(Table *t, uint8_t *row, int c, int v) {
    row[t->off[c]] = v != 0;
}
/* Fixed string: truncated to the column width (rows are zeroed, so NUL-terminated). */
static inline void set_str(Table *t, uint8_t *row, int c, const char *s, size_t width) {
    size_t n = strnlen(s, width - 1);
    memcpy(row + t->off[c], s, n);
}
static inline int set_vstr(Table *t, uint8_t *row, int c, const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return -1;
    memcpy(d, s, n);
    d[n] = 0;
    memcpy(row + t->off[c], &d, sizeof d);
    t->vbytes += n + 1;
    return 0;
}

/* ---------------- pass 1 state ---------------- */

typedef struct {
    char *key, *val;
    size_t vlen;
} Kv;

typedef struct {
    Kv *v;
    int n, cap;
} KvList;

static Kv *kv_find(KvList *l, const char *key, size_t klen) {
    for (int i = 0; i < l->n; i++)
        if (strlen(l->v[i].key) == klen && memcmp(l->v[i].key, key, klen) == 0) return &l->v[i];
    return NULL;
}

static const char *kv_get(KvList *l, const char *key) {
    Kv *kv = kv_find(l, key, strlen(key));
    return kv ? kv->val : NULL;
}

static int kv_set(KvList *l, const char *key, size_t klen, const char *val, size_t vlen,
                  int keep_first) {
    Kv *kv = kv_find(l, key, klen);
    if (kv && keep_first) return 0;
    if (!kv) {
        if (l->n == l->cap) {
            int nc = l->cap ? 2 * l->cap : 32;
            Kv *nv = realloc(l->v, (size_t)nc * sizeof *nv);
            if (!nv) return -1;
            l->v = nv;
            l->cap = nc;
        }
        kv = &l->v[l->n];
        kv->key = strndup(key, klen);
        kv->val = NULL;
        if (!kv->key) return -1;
        l->n++;
    }
    char *nv = malloc(vlen + 1);
    if (!nv) return -1;
    memcpy(nv, val, vlen);
    nv[vlen] = 0;
    free(kv->val);
    kv->val = nv;
    kv->vlen = vlen;
    return 0;
}

static void kv_free(KvList *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].val);
    }
    free(l->v);
}

typedef struct {
    uint64_t plan_off, begin_off, end_off;
    uint64_t *ev; /* offsets of the EVENTS records of the last attempt */
    uint32_t n_ev, cap_ev;
    uint32_t attempt, attempts, begin_session;
    int64_t resumed_from_step, ckpt_step;
    uint8_t planned, begun, has_end, has_start, has_step;
    /* from the events (pass 2) */
    long params;
    double flops, kv;
    char blas[32];
    long last_step, last_tokens;
    double last_time;
} RunState;

typedef struct {
    RunState *runs;
    uint32_t nruns; /* 1 + the highest run index seen */
    uint32_t cap;
    KvList header, end;
    uint32_t session, sweep_end_session;
    size_t name_w, host_w;
    H5ViewStats st;
    int writer_gone; /* no process holds the journal's lock: nothing is running */
} View;

static RunState *run_get(View *v, uint32_t index) {
    if (index >= MAX_RUN_INDEX) return NULL;
    if (index >= v->cap) {
        uint32_t nc = v->cap ? v->cap : 64;
        while (nc <= index)
            nc *= 2;
        RunState *nr = realloc(v->runs, (size_t)nc * sizeof *nr);
        if (!nr) return NULL;
        memset(nr + v->cap, 0, (size_t)(nc - v->cap) * sizeof *nr);
        v->runs = nr;
        v->cap = nc;
    }
    if (index >= v->nruns) v->nruns = index + 1;
    return &v->runs[index];
}

static int push_ev(RunState *rs, uint64_t off) {
    if (rs->n_ev == rs->cap_ev) {
        uint32_t nc = rs->cap_ev ? 2 * rs->cap_ev : 16;
        uint64_t *ne = realloc(rs->ev, (size_t)nc * sizeof *ne);
        if (!ne) return -1;
        rs->ev = ne;
        rs->cap_ev = nc;
    }
    rs->ev[rs->n_ev++] = off;
    return 0;
}

static void start_attempt(RunState *rs, uint32_t attempt) {
    rs->attempt = attempt;
    rs->n_ev = 0;
    rs->has_end = 0;
}

static int read_kv(View *v, const JournalRecord *rec, KvList *into, int is_header) {
    JournalKvIter it;
    journal_kv_begin(&it, rec->payload, rec->len);
    const char *k, *val;
    size_t kl, vl;
    int rc;
    while ((rc = journal_kv_next(&it, &k, &kl, &val, &vl)) == 1) {
        int keep_first = is_header && kl == 10 && memcmp(k, "start_time", 10) == 0;
        if (kv_set(into, k, kl, val, vl, keep_first) != 0) return -1;
    }
    if (rc < 0) v->st.skipped++;
    return 0;
}

static int pass1(View *v, JournalReader *r, char *err) {
    JournalRecord rec;
    int rc;
    while ((rc = journal_reader_next(r, &rec)) == 1) {
        v->st.records++;
        RunState *rs = NULL;
        if (rec.type == JREC_PLAN || rec.type == JREC_RUN_BEGIN || rec.type == JREC_EVENTS ||
            rec.type == JREC_RUN_END || rec.type == JREC_CHECKPOINT) {
            rs = run_get(v, rec.run);
            if (!rs) {
                if (rec.run >= MAX_RUN_INDEX) {
                    v->st.skipped++;
                    continue;
                }
                snprintf(err, ABL_ERR_MAX, "out of memory");
                return -1;
            }
        }
        switch (rec.type) {
        case JREC_HEADER:
            v->session++;
            if (read_kv(v, &rec, &v->header, 1) != 0) goto oom;
            break;
        case JREC_SWEEP_END:
            v->sweep_end_session = v->session ? v->session : 1;
            if (v->session == 0) v->session = 1;
            if (read_kv(v, &rec, &v->end, 0) != 0) goto oom;
            break;
        case JREC_PLAN: {
            JournalPlan p;
            if (journal_decode_plan(&rec, &p) != 0) {
                v->st.skipped++;
                break;
            }
            rs->planned = 1;
            rs->plan_off = rec.offset;
            size_t nl = strlen(p.name);
            if (nl > v->name_w) v->name_w = nl;
            break;
        }
        case JREC_RUN_BEGIN: {
            JournalBegin b;
            if (journal_decode_begin(&rec, &b) != 0) {
                v->st.skipped++;
                break;
            }
            start_attempt(rs, b.attempt);
            rs->begun = 1;
            rs->attempts++;
            rs->begin_session = v->session;
            rs->begin_off = rec.offset;
            rs->resumed_from_step = b.resumed_from_step;
            size_t hl = strlen(b.host);
            if (hl > v->host_w) v->host_w = hl;
            break;
        }
        case JREC_EVENTS: {
            uint32_t attempt;
            const uint8_t *packed;
            size_t n;
            v->st.event_records++;
            if (journal_decode_events(&rec, &attempt, &packed, &n) != 0) {
                v->st.skipped++;
                break;
            }
            if (attempt > rs->attempt) { /* events before their RUN_BEGIN: a new attempt */
                start_attempt(rs, attempt);
                rs->begin_session = v->session;
            }
            if (attempt == rs->attempt && push_ev(rs, rec.offset) != 0) goto oom;
            break;
        }
        case JREC_RUN_END: {
            JournalEnd e;
            if (journal_decode_end(&rec, &e) != 0) {
                v->st.skipped++;
                break;
            }
            if (e.attempt >= rs->attempt) {
                if (e.attempt > rs->attempt) start_attempt(rs, e.attempt);
                rs->has_end = 1;
                rs->end_off = rec.offset;
                size_t hl = strlen(e.host);
                if (hl > v->host_w) v->host_w = hl;
            }
            break;
        }
        case JREC_CHECKPOINT: {
            JournalCheckpoint c;
            if (journal_decode_checkpoint(&rec, &c) != 0) {
                v->st.skipped++;
                break;
            }
            rs->ckpt_step = c.step;
            break;
        }
        default:
            break; /* unknown record types: ignored */
        }
    }
    if (rc < 0) {
        snprintf(err, ABL_ERR_MAX, "%s", journal_reader_error(r));
        return -1;
    }
    v->st.journal_bytes = journal_reader_valid_end(r);
    v->st.torn_bytes = journal_reader_torn_bytes(r);
    return 0;
oom:
    snprintf(err, ABL_ERR_MAX, "out of memory");
    return -1;
}

static int sweep_complete(const View *v) {
    return v->sweep_end_session != 0 && v->sweep_end_session == v->session;
}

static int run_status(const View *v, const RunState *rs, const JournalEnd *end) {
    if (rs->has_end) {
        switch (end->end.status) {
        case RUN_DONE:
            return ST_DONE;
        case RUN_DIVERGED:
            return ST_DIVERGED;
        case RUN_FAILED:
            return ST_FAILED;
        default:
            return ST_INTERRUPTED;
        }
    }
    if (!rs->begun && rs->n_ev == 0 && rs->attempt == 0) return ST_PENDING;
    if (rs->begin_session < v->session || sweep_complete(v) || v->writer_gone)
        return ST_INTERRUPTED;
    return ST_RUNNING;
}

/* ---------------- pass 2: metric tables ---------------- */

enum { S_RUN, S_STEP, S_TOKENS, S_LOSS, S_LR, S_GRAD, S_TIME, S_NCOL };
static const Col steps_cols[] = {
    {"run", C_I32, 0, NULL},          {"step", C_I64, 0, "steps"}, {"tokens", C_I64, 0, "tokens"},
    {"loss", C_F64, 0, "nats/token"}, {"lr", C_F64, 0, "1"},       {"grad_norm", C_F64, 0, "1"},
    {"time", C_F64, 0, "s"},
};
enum { E_RUN, E_STEP, E_LOSS, E_ACC, E_NCOL };
static const Col evals_cols[] = {
    {"run", C_I32, 0, NULL},
    {"step", C_I64, 0, "steps"},
    {"val_loss", C_F64, 0, "nats/token"},
    {"val_acc", C_F64, 0, "fraction"},
};
enum { A_RUN, A_STEP, A_LAYER, A_ZERO, A_MAX, A_MIN, A_MEAN, A_RMS, A_RESID, A_GRAD, A_NCOL };
static const Col acts_cols[] = {
    {"run", C_I32, 0, NULL},      {"step", C_I64, 0, "steps"},
    {"layer", C_I32, 0, NULL},    {"zero_frac", C_F64, 0, "fraction"},
    {"max", C_F64, 0, "1"},       {"min", C_F64, 0, "1"},
    {"mean", C_F64, 0, "1"},      {"rms", C_F64, 0, "1"},
    {"resid_rms", C_F64, 0, "1"}, {"grad_norm", C_F64, 0, "1"},
};
enum { T_RUN, T_STEP, T_LAYER, T_HEAD, T_ENT, T_NCOL };
static const Col attn_cols[] = {
    {"run", C_I32, 0, NULL},  {"step", C_I64, 0, "steps"},   {"layer", C_I32, 0, NULL},
    {"head", C_I32, 0, NULL}, {"entropy", C_F64, 0, "nats"},
};
enum {
    P_RUN,
    P_KIND,
    P_TEMP,
    P_NTOK,
    P_TEXT,
    P_TPS,
    P_DISTINCT,
    P_LONGEST,
    P_TOP,
    P_DEGEN,
    P_IDS,
    P_NCOL
};
static const Col samples_cols[] = {
    {"run", C_I32, 0, NULL},
    {"kind", C_STR, 12, NULL},
    {"temperature", C_F64, 0, "1"},
    {"n_tokens", C_I32, 0, "tokens"},
    {"text", C_VSTR, 0, NULL},
    {"tokens_per_s", C_F64, 0, "tokens/s"},
    {"distinct_ratio", C_F64, 0, "fraction"},
    {"longest_run", C_I32, 0, "tokens"},
    {"top_token_frac", C_F64, 0, "fraction"},
    {"degenerate", C_BOOL, 0, NULL},
    {"ids", C_VSTR, 0, NULL}, /* the token ids, space-separated: "464 3290 ..." */
};

static const char *const sample_kinds[SAMPLE_KIND_COUNT] = {"greedy", "temperature"};

typedef struct {
    Table steps, evals, acts, attn, samples;
} Tables;

static int emit_event(Tables *tb, RunState *rs, int32_t run, const Event *ev, char *err) {
    uint8_t *row;
    switch (ev->kind) {
    case EV_START:
        rs->has_start = 1;
        rs->params = ev->u.start.params;
        rs->flops = ev->u.start.flops_per_token;
        rs->kv = ev->u.start.kv_bytes_per_token;
        snprintf(rs->blas, sizeof rs->blas, "%s", ev->u.start.blas_core);
        return 0;
    case EV_STEP: {
        const StepEvent *e = &ev->u.step;
        Table *t = &tb->steps;
        if (!(row = table_row(t, err))) return -1;
        set_i32(t, row, S_RUN, run);
        set_i64(t, row, S_STEP, e->step);
        set_i64(t, row, S_TOKENS, e->tokens);
        set_f64(t, row, S_LOSS, e->loss);
        set_f64(t, row, S_LR, e->lr);
        set_f64(t, row, S_GRAD, e->grad_norm);
        set_f64(t, row, S_TIME, e->time);
        rs->has_step = 1;
        rs->last_step = e->step;
        rs->last_tokens = e->tokens;
        rs->last_time = e->time;
        return 0;
    }
    case EV_EVAL: {
        const EvalEvent *e = &ev->u.eval;
        Table *t = &tb->evals;
        if (!(row = table_row(t, err))) return -1;
        set_i32(t, row, E_RUN, run);
        set_i64(t, row, E_STEP, e->step);
        set_f64(t, row, E_LOSS, e->val_loss);
        set_f64(t, row, E_ACC, e->val_acc);
        return 0;
    }
    case EV_ACT: {
        const ActEvent *e = &ev->u.act;
        Table *t = &tb->acts;
        if (!(row = table_row(t, err))) return -1;
        set_i32(t, row, A_RUN, run);
        set_i64(t, row, A_STEP, e->step);
        set_i32(t, row, A_LAYER, e->layer);
        set_f64(t, row, A_ZERO, e->zero_frac);
        set_f64(t, row, A_MAX, e->max);
        set_f64(t, row, A_MIN, e->min);
        set_f64(t, row, A_MEAN, e->mean);
        set_f64(t, row, A_RMS, e->rms);
        set_f64(t, row, A_RESID, e->resid_rms);
        set_f64(t, row, A_GRAD, e->grad_norm);
        t = &tb->attn;
        for (int h = 0; h < e->n_head; h++) {
            if (!(row = table_row(t, err))) return -1;
            set_i32(t, row, T_RUN, run);
            set_i64(t, row, T_STEP, e->step);
            set_i32(t, row, T_LAYER, e->layer);
            set_i32(t, row, T_HEAD, h);
            set_f64(t, row, T_ENT, e->attn_entropy[h]);
        }
        return 0;
    }
    case EV_SAMPLE: {
        const SampleEvent *e = &ev->u.sample;
        Table *t = &tb->samples;
        if (!(row = table_row(t, err))) return -1;
        set_i32(t, row, P_RUN, run);
        set_str(t, row, P_KIND, e->kind < SAMPLE_KIND_COUNT ? sample_kinds[e->kind] : "?", 12);
        set_f64(t, row, P_TEMP, e->temperature);
        set_i32(t, row, P_NTOK, e->n_tokens);
        if (set_vstr(t, row, P_TEXT, e->text, strlen(e->text)) != 0) {
            snprintf(err, ABL_ERR_MAX, "out of memory");
            return -1;
        }
        set_f64(t, row, P_TPS, e->tokens_per_s);
        set_f64(t, row, P_DISTINCT, e->distinct_ratio);
        set_i32(t, row, P_LONGEST, e->longest_run);
        set_f64(t, row, P_TOP, e->top_token_frac);
        char ids[ABL_SAMPLE_IDS * 12 + 1];
        size_t n = 0;
        for (int i = 0; i < e->n_ids && i < ABL_SAMPLE_IDS; i++)
            n += (size_t)snprintf(ids + n, sizeof ids - n, "%s%ld", i ? " " : "", (long)e->ids[i]);
        if (set_vstr(t, row, P_IDS, ids, n) != 0) {
            snprintf(err, ABL_ERR_MAX, "out of memory");
            return -1;
        }
        set_bool(t, row, P_DEGEN, e->degenerate);
        return 0;
    }
    default:
        return 0; /* EV_END: the RUN_END record is authoritative */
    }
}

static int pass2(View *v, JournalReader *r, hid_t file, char *err) {
    Tables tb;
    memset(&tb, 0, sizeof tb);
    Table *all[] = {&tb.steps, &tb.evals, &tb.acts, &tb.attn, &tb.samples};
    for (int i = 0; i < 5; i++)
        all[i]->dset = all[i]->type = -1;
    int rc = -1;
    Event *ev = malloc(sizeof *ev);
    if (!ev) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        return -1;
    }
    if (table_create(&tb.steps, file, "steps", steps_cols, S_NCOL, 1,
                     "One row per logged optimizer step of each run's last attempt, grouped "
                     "by run in plan order. run = plan index (row of /runs).",
                     err) != 0 ||
        table_create(&tb.evals, file, "evals", evals_cols, E_NCOL, 1,
                     "One row per validation evaluation.", err) != 0 ||
        table_create(&tb.acts, file, "acts", acts_cols, A_NCOL, 1,
                     "Activation statistics per layer: MLP hidden activation after the "
                     "nonlinearity (zero_frac, max, min, mean, rms), residual stream rms after "
                     "the block, gradient norm of the layer's parameters.",
                     err) != 0 ||
        table_create(&tb.attn, file, "attn", attn_cols, T_NCOL, 1,
                     "Attention entropy per layer and head (nats, mean over query positions), "
                     "recorded with each /acts row.",
                     err) != 0 ||
        table_create(&tb.samples, file, "samples", samples_cols, P_NCOL, 1,
                     "Generated samples and their degeneracy statistics.", err) != 0)
        goto done;
    for (uint32_t i = 0; i < v->nruns; i++) {
        RunState *rs = &v->runs[i];
        if (!rs->planned) {
            v->st.skipped += rs->n_ev;
            continue;
        }
        for (uint32_t k = 0; k < rs->n_ev; k++) {
            JournalRecord rec;
            uint32_t attempt;
            const uint8_t *p;
            size_t n;
            if (journal_reader_read_at(r, rs->ev[k], &rec) != 0) {
                snprintf(err, ABL_ERR_MAX, "%s", journal_reader_error(r));
                goto done;
            }
            if (journal_decode_events(&rec, &attempt, &p, &n) != 0) {
                v->st.skipped++;
                continue;
            }
            while (n > 0) {
                size_t used;
                if (event_unpack(p, n, ev, &used) != 0) {
                    v->st.skipped++;
                    break;
                }
                v->st.events++;
                if (emit_event(&tb, rs, (int32_t)i, ev, err) != 0) goto done;
                p += used;
                n -= used;
            }
        }
        free(rs->ev);
        rs->ev = NULL;
    }
    rc = 0;
done:
    free(ev);
    v->st.steps = (long long)(tb.steps.nrows + tb.steps.nbuf);
    v->st.evals = (long long)(tb.evals.nrows + tb.evals.nbuf);
    v->st.acts = (long long)(tb.acts.nrows + tb.acts.nbuf);
    v->st.attn = (long long)(tb.attn.nrows + tb.attn.nbuf);
    v->st.samples = (long long)(tb.samples.nrows + tb.samples.nbuf);
    for (int i = 0; i < 5; i++) {
        char e2[ABL_ERR_MAX];
        if (table_close(all[i], rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    }
    return rc;
}

/* ---------------- the runs table and /plan_text ---------------- */

enum {
    R_INDEX,
    R_ID,
    R_NAME,
    R_SEED,
    R_STATUS,
    R_NFIXED /* then the knobs, then the tail */
};
enum {
    R_PARAMS,
    R_FLOPS,
    R_KV,
    R_STEPS,
    R_TOKENS,
    R_SECONDS,
    R_TPS,
    R_VLOSS,
    R_VACC,
    R_RANK,
    R_HOST,
    R_ATTEMPTS,
    R_RESUMED,
    R_CKPT,
    R_MESSAGE,
    R_BLAS,
    R_NTAIL
};

static const char *const tail_names[R_NTAIL] = {"params",
                                                "flops_per_token",
                                                "kv_bytes_per_token",
                                                "steps",
                                                "tokens",
                                                "train_seconds",
                                                "tokens_per_s",
                                                "final_val_loss",
                                                "final_val_acc",
                                                "rank",
                                                "host",
                                                "attempts",
                                                "resumed_from_step",
                                                "last_checkpoint_step",
                                                "message",
                                                "blas_core"};

static int name_taken(const char *name) {
    static const char *const fixed[] = {"index", "id", "name", "seed", "status"};
    for (int i = 0; i < 5; i++)
        if (strcmp(name, fixed[i]) == 0) return 1;
    for (int i = 0; i < R_NTAIL; i++)
        if (strcmp(name, tail_names[i]) == 0) return 1;
    return 0;
}

static int write_runs(View *v, JournalReader *r, hid_t file, char *err) {
    int nk = knob_count;
    int ncol = R_NFIXED + nk + R_NTAIL;
    Col *cols = calloc((size_t)ncol, sizeof *cols);
    char(*knames)[128] = calloc((size_t)(nk ? nk : 1), sizeof *knames);
    RunConfig *cfg = malloc(sizeof *cfg);
    JournalEnd *end = malloc(sizeof *end);
    JournalPlan *plan = malloc(sizeof *plan);
    Table runs, text;
    memset(&runs, 0, sizeof runs);
    memset(&text, 0, sizeof text);
    runs.dset = runs.type = text.dset = text.type = -1;
    int rc = -1;
    if (!cols || !knames || !cfg || !end || !plan) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        goto done;
    }
    size_t name_w = v->name_w + 1, host_w = v->host_w + 1;
    if (name_w < 2) name_w = 2;
    if (host_w < 2) host_w = 2;
    cols[R_INDEX] = (Col){"index", C_I32, 0, NULL};
    cols[R_ID] = (Col){"id", C_STR, 17, NULL};
    cols[R_NAME] = (Col){"name", C_STR, name_w, NULL};
    cols[R_SEED] = (Col){"seed", C_U64, 0, NULL};
    cols[R_STATUS] = (Col){"status", C_STR, STATUS_LEN, NULL};
    for (int k = 0; k < nk; k++) {
        const Knob *kn = &knob_table[k];
        Col *c = &cols[R_NFIXED + k];
        if (name_taken(kn->name))
            snprintf(knames[k], sizeof knames[k], "config.%s", kn->name);
        else
            snprintf(knames[k], sizeof knames[k], "%s", kn->name);
        c->name = knames[k];
        switch (kn->type) {
        case KNOB_INT:
            c->type = C_I32;
            break;
        case KNOB_LONG:
            c->type = C_I64;
            break;
        case KNOB_DOUBLE:
            c->type = C_F64;
            break;
        case KNOB_BOOL:
            c->type = C_BOOL;
            break;
        case KNOB_ENUM: {
            size_t w = 2;
            for (int i = 0; i < kn->n_choices; i++)
                if (strlen(kn->choices[i]) + 1 > w) w = strlen(kn->choices[i]) + 1;
            c->type = C_STR;
            c->len = w;
            break;
        }
        case KNOB_STRING:
            c->type = C_STR;
            c->len = kn->size > 1 ? kn->size : 2;
            break;
        }
    }
    Col *tc = cols + R_NFIXED + nk;
    tc[R_PARAMS] = (Col){tail_names[R_PARAMS], C_I64, 0, "parameters"};
    tc[R_FLOPS] = (Col){tail_names[R_FLOPS], C_F64, 0, "FLOP/token"};
    tc[R_KV] = (Col){tail_names[R_KV], C_F64, 0, "bytes/token"};
    tc[R_STEPS] = (Col){tail_names[R_STEPS], C_I64, 0, "steps"};
    tc[R_TOKENS] = (Col){tail_names[R_TOKENS], C_I64, 0, "tokens"};
    tc[R_SECONDS] = (Col){tail_names[R_SECONDS], C_F64, 0, "s"};
    tc[R_TPS] = (Col){tail_names[R_TPS], C_F64, 0, "tokens/s"};
    tc[R_VLOSS] = (Col){tail_names[R_VLOSS], C_F64, 0, "nats/token"};
    tc[R_VACC] = (Col){tail_names[R_VACC], C_F64, 0, "fraction"};
    tc[R_RANK] = (Col){tail_names[R_RANK], C_I32, 0, NULL};
    tc[R_HOST] = (Col){tail_names[R_HOST], C_STR, host_w, NULL};
    tc[R_ATTEMPTS] = (Col){tail_names[R_ATTEMPTS], C_I32, 0, NULL};
    tc[R_RESUMED] = (Col){tail_names[R_RESUMED], C_I64, 0, "steps"};
    tc[R_CKPT] = (Col){tail_names[R_CKPT], C_I64, 0, "steps"};
    tc[R_MESSAGE] = (Col){tail_names[R_MESSAGE], C_STR, 256, NULL};
    tc[R_BLAS] = (Col){tail_names[R_BLAS], C_STR, 32, NULL};

    if (table_create(&runs, file, "runs", cols, ncol, 1,
                     "One row per planned run, in plan order (row i = plan index i = the run "
                     "column of the metric tables). Config knobs are columns named by the knob. "
                     "Unknown numbers are NaN (floats) or -1 (params, rank).",
                     err) != 0)
        goto done;
    Col tcol = {"plan_text", C_VSTR, 0, NULL};
    if (table_create(&text, file, "plan_text", &tcol, 1, 0,
                     "Per run (plan order): the canonical config text, one knob=value line per "
                     "knob in knob-table order (\\ \\n \\r escaped), as in the journal's PLAN "
                     "record.",
                     err) != 0)
        goto done;

    const int T0 = R_NFIXED + nk;
    for (uint32_t i = 0; i < v->nruns; i++) {
        RunState *rs = &v->runs[i];
        if (!rs->planned) continue;
        JournalRecord rec;
        if (journal_reader_read_at(r, rs->plan_off, &rec) != 0 ||
            journal_decode_plan(&rec, plan) != 0) {
            snprintf(err, ABL_ERR_MAX, "run %u: cannot re-read its plan: %s", i,
                     journal_reader_error(r));
            goto done;
        }
        uint8_t *row = table_row(&runs, err);
        uint8_t *trow = table_row(&text, err);
        if (!row || !trow) goto done;
        if (set_vstr(&text, trow, 0, plan->config_text, plan->config_len) != 0) {
            snprintf(err, ABL_ERR_MAX, "out of memory");
            goto done;
        }
        char message[256] = "";
        char cerr[ABL_ERR_MAX];
        if (journal_plan_config(plan, cfg, cerr) != 0) {
            v->st.skipped++;
            snprintf(message, sizeof message, "config: %.240s", cerr);
        }
        set_i32(&runs, row, R_INDEX, (int32_t)i);
        set_str(&runs, row, R_ID, plan->id, 17);
        set_str(&runs, row, R_NAME, plan->name, name_w);
        set_u64(&runs, row, R_SEED, plan->seed);
        for (int k = 0; k < nk; k++) {
            const Knob *kn = &knob_table[k];
            const char *field = (const char *)cfg + kn->offset;
            int c = R_NFIXED + k, iv;
            long lv;
            double dv;
            switch (kn->type) {
            case KNOB_INT:
                memcpy(&iv, field, sizeof iv);
                set_i32(&runs, row, c, iv);
                break;
            case KNOB_BOOL:
                memcpy(&iv, field, sizeof iv);
                set_bool(&runs, row, c, iv);
                break;
            case KNOB_LONG:
                memcpy(&lv, field, sizeof lv);
                set_i64(&runs, row, c, lv);
                break;
            case KNOB_DOUBLE:
                memcpy(&dv, field, sizeof dv);
                set_f64(&runs, row, c, dv);
                break;
            case KNOB_ENUM:
                memcpy(&iv, field, sizeof iv);
                set_str(&runs, row, c, iv >= 0 && iv < kn->n_choices ? kn->choices[iv] : "?",
                        cols[c].len);
                break;
            case KNOB_STRING:
                set_str(&runs, row, c, field, cols[c].len);
                break;
            }
        }
        /* Result columns: RUN_END if any, else progress from the streamed step events. */
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
                v->st.skipped++;
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
        int st = run_status(v, rs, end);
        if (st == ST_DONE) v->st.runs_done++;
        v->st.runs++;
        set_str(&runs, row, R_STATUS, h5view_status_names[st], STATUS_LEN);
        set_i64(&runs, row, T0 + R_PARAMS, rs->has_start ? rs->params : -1);
        set_f64(&runs, row, T0 + R_FLOPS, rs->has_start ? rs->flops : NAN);
        set_f64(&runs, row, T0 + R_KV, rs->has_start ? rs->kv : NAN);
        if (have_end) {
            set_i64(&runs, row, T0 + R_STEPS, end->end.steps);
            set_i64(&runs, row, T0 + R_TOKENS, end->end.tokens);
            set_f64(&runs, row, T0 + R_SECONDS, end->end.train_seconds);
            set_f64(&runs, row, T0 + R_TPS, end->end.tokens_per_s);
            set_f64(&runs, row, T0 + R_VLOSS, end->end.final_val_loss);
            set_f64(&runs, row, T0 + R_VACC, end->end.final_val_acc);
            if (!message[0]) snprintf(message, sizeof message, "%s", end->end.message);
        } else {
            set_i64(&runs, row, T0 + R_STEPS, rs->has_step ? rs->last_step : 0);
            set_i64(&runs, row, T0 + R_TOKENS, rs->has_step ? rs->last_tokens : 0);
            set_f64(&runs, row, T0 + R_SECONDS, rs->has_step ? rs->last_time : NAN);
            set_f64(&runs, row, T0 + R_TPS,
                    rs->has_step && rs->last_time > 0 ? (double)rs->last_tokens / rs->last_time
                                                      : NAN);
            set_f64(&runs, row, T0 + R_VLOSS, NAN);
            set_f64(&runs, row, T0 + R_VACC, NAN);
        }
        set_i32(&runs, row, T0 + R_RANK, rank);
        set_str(&runs, row, T0 + R_HOST, host, host_w);
        set_i32(&runs, row, T0 + R_ATTEMPTS, (int32_t)rs->attempts);
        set_i64(&runs, row, T0 + R_RESUMED, rs->resumed_from_step);
        set_i64(&runs, row, T0 + R_CKPT, rs->ckpt_step);
        set_str(&runs, row, T0 + R_MESSAGE, message, 256);
        set_str(&runs, row, T0 + R_BLAS, rs->has_start ? rs->blas : "", 32);
    }
    rc = 0;
done:;
    char e2[ABL_ERR_MAX];
    if (table_close(&runs, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    if (table_close(&text, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    free(cols);
    free(knames);
    free(cfg);
    free(end);
    free(plan);
    return rc;
}

/* ---------------- root attributes, /spec, /vocab ---------------- */

static int write_string_dataset(hid_t file, const char *name, const char *value,
                                const char *description) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(dcpl, 0);
    hid_t d = H5Dcreate2(file, name, t, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    const char *v = value ? value : "";
    int rc = (d >= 0 && H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) >= 0 &&
              attr_str(d, "description", description) == 0)
                 ? 0
                 : -1;
    if (d >= 0) H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(s);
    H5Tclose(t);
    return rc;
}

static const char *const known_attrs[] = {
    "ablate_version", "git_rev",          "compiler",  "c_flags",   "mpi_version",
    "hdf5_version",   "openblas_version", "blas_core", "hostnames", "start_time"};

static int write_root(View *v, hid_t file, char *err) {
    const int nknown = (int)(sizeof known_attrs / sizeof *known_attrs);
    if (attr_i32(file, "ablate_schema_version", ABLATE_SCHEMA_VERSION) != 0) goto fail;
    for (int i = 0; i < nknown; i++)
        if (attr_str(file, known_attrs[i], kv_get(&v->header, known_attrs[i])) != 0) goto fail;
    const char *ranks = kv_get(&v->header, "ranks");
    if (attr_i32(file, "ranks", ranks ? atoi(ranks) : 0) != 0) goto fail;
    const char *end_time = sweep_complete(v) ? kv_get(&v->end, "end_time") : NULL;
    if (attr_str(file, "end_time", end_time) != 0) goto fail;
    /* a sweep that left without a SWEEP_END (kill -9, a node failure) is "stopped" once no
     * process holds its journal */
    const char *status = v->writer_gone ? "stopped" : "running";
    if (sweep_complete(v)) {
        const char *s = kv_get(&v->end, "status");
        status = s && s[0] ? s : "complete";
    }
    if (attr_str(file, "status", status) != 0) goto fail;
    if (attr_i32(file, "sessions", (int)v->session) != 0) goto fail;
    if (attr_str(file, "view_built_by", "ablate " ABLATE_VERSION) != 0) goto fail;
    /* how much of the journal this view shows: `ablate inspect` compares it with the
     * journal to say when the view is older */
    long long jb = (long long)v->st.journal_bytes;
    hid_t sp = H5Screate(H5S_SCALAR), a = -1;
    if (sp >= 0) a = H5Acreate2(file, "journal_bytes", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    int bad = a < 0 || H5Awrite(a, H5T_NATIVE_LLONG, &jb) < 0;
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    if (bad) goto fail;
    /* Any other header keys, as string attributes (first appearance order). */
    for (int i = 0; i < v->header.n; i++) {
        const char *k = v->header.v[i].key;
        int skip = !strcmp(k, "spec") || !strcmp(k, "vocab") || !strcmp(k, "ranks") ||
                   !strcmp(k, "end_time") || !strcmp(k, "status") || !strcmp(k, "sessions") ||
                   !strcmp(k, "ablate_schema_version") || !strcmp(k, "view_built_by") || !k[0];
        for (int j = 0; j < nknown && !skip; j++)
            skip = !strcmp(k, known_attrs[j]);
        if (!skip && attr_str(file, k, v->header.v[i].val) != 0) goto fail;
    }
    if (write_string_dataset(file, "spec", kv_get(&v->header, "spec"),
                             "The sweep spec (YAML) as given.") != 0)
        goto fail;
    const char *vocab = kv_get(&v->header, "vocab");
    if (vocab && write_string_dataset(file, "vocab", vocab,
                                      "The character vocabulary: token i is the i-th "
                                      "character (UTF-8) of this string.") != 0)
        goto fail;
    return 0;
fail:
    h5err(err, "cannot write the root attributes");
    return -1;
}

/* ---------------- the build ---------------- */

/* ---------------- /weights (save_weights) ---------------- */

/* /weights/<id>: one dataset per parameter tensor, shaped as in the tensor table, for every
 * finished run whose weights file (OUT.h5.d/weights/<id>.f32) exists. One run in memory at
 * a time. */
static int write_weights(View *v, JournalReader *r, const char *journal_path, hid_t file,
                         char *err) {
    char dir[ABL_PATH_MAX];
    fs_dir_of(journal_path, dir, sizeof dir);
    hid_t group = -1;
    float *buf = NULL;
    int rc = 0;
    for (uint32_t i = 0; i < v->nruns && rc == 0; i++) {
        RunState *rs = &v->runs[i];
        JournalRecord rec;
        JournalPlan plan;
        if (!rs->planned || !rs->has_end || journal_reader_read_at(r, rs->plan_off, &rec) != 0 ||
            journal_decode_plan(&rec, &plan) != 0)
            continue;
        char path[ABL_PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/weights/%s.f32", dir, plan.id);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        WeightsHeader h;
        RunConfig cfg;
        char msg[ABL_ERR_MAX];
        TensorInfo t[T_COUNT];
        float *nb = NULL;
        int ok = fread(&h, sizeof h, 1, f) == 1 && h.magic == RUN_WEIGHTS_MAGIC &&
                 journal_plan_config(&plan, &cfg, msg) == 0;
        if (ok) {
            cfg.model.vocab_size = h.vocab_size;
            ok = gpt_tensor_table(&cfg.model, t) == h.n_params &&
                 (nb = realloc(buf, h.n_params * sizeof(float))) != NULL;
        }
        if (nb) buf = nb;
        ok = ok && fread(buf, sizeof(float), h.n_params, f) == h.n_params;
        fclose(f);
        if (!ok) continue; /* a torn or foreign file: the run's weights are simply absent */
        if (group < 0 &&
            (group = H5Gcreate2(file, "weights", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0) {
            h5err(err, "cannot create /weights");
            rc = -1;
            break;
        }
        hid_t g = H5Gcreate2(group, plan.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g < 0 || attr_str(g, "name", plan.name) != 0 || attr_i32(g, "run", (int)i) != 0) {
            h5err(err, "cannot create /weights/%s", plan.id);
            rc = -1;
        }
        for (int k = 0; k < T_COUNT && rc == 0; k++) {
            if (t[k].size == 0) continue;
            hsize_t dims[3];
            for (int d = 0; d < t[k].ndim; d++)
                dims[d] = (hsize_t)t[k].shape[d];
            hid_t space = H5Screate_simple(t[k].ndim, dims, NULL);
            hid_t ds = H5Dcreate2(g, t[k].name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                                  H5P_DEFAULT);
            if (ds < 0 || H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                   buf + t[k].offset) < 0) {
                h5err(err, "cannot write /weights/%s/%s", plan.id, t[k].name);
                rc = -1;
            }
            if (ds >= 0) H5Dclose(ds);
            H5Sclose(space);
        }
        if (g >= 0) H5Gclose(g);
    }
    if (group >= 0) {
        if (rc == 0)
            rc = attr_str(group, "description",
                          "Final parameters of runs with save_weights: /weights/<run id>/<tensor>, "
                          "float32, shaped and named as in src/model/gpt.h's tensor table "
                          "(matrices are (out, in) like torch.nn.Linear).");
        H5Gclose(group);
    }
    free(buf);
    return rc;
}

int h5view_build_stats(const char *journal_path, const char *out_path, H5ViewStats *stats,
                       char err[ABL_ERR_MAX]) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    View v;
    memset(&v, 0, sizeof v);
    char tmp[ABL_PATH_MAX + 32], dir[ABL_PATH_MAX];
    /* per process: `ablate view` may rebuild while the sweep does */
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out_path, (long)getpid()) >= (int)sizeof tmp - 4) {
        snprintf(err, ABL_ERR_MAX, "%s: path too long", out_path);
        return -1;
    }
    JournalReader *r = journal_reader_open(journal_path, err);
    if (!r) return -1;
    char lerr[ABL_ERR_MAX];
    int lock = journal_lock_existing(journal_path, lerr);
    v.writer_gone = lock >= 0;
    if (lock >= 0) close(lock);

    H5E_auto2_t old_func;
    void *old_data;
    H5Eget_auto2(H5E_DEFAULT, &old_func, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);

    int rc = -1;
    hid_t file = -1, fapl = -1, fcpl = -1;
    if (pass1(&v, r, err) != 0) goto done;

    fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, 0, 1);
#endif
    fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_obj_track_times(fcpl, 0);
    file = H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, fapl);
    if (file < 0) {
        h5err(err, "cannot create %s", tmp);
        goto done;
    }
    if (write_root(&v, file, err) != 0) goto done;
    if (pass2(&v, r, file, err) != 0) goto done;
    if (write_runs(&v, r, file, err) != 0) goto done;
    if (write_weights(&v, r, journal_path, file, err) != 0) goto done;
    herr_t cl = H5Fclose(file);
    file = -1;
    if (cl < 0) {
        h5err(err, "cannot close %s", tmp);
        goto done;
    }
    if (fs_fsync(tmp, 0) != 0) {
        snprintf(err, ABL_ERR_MAX, "cannot fsync %.300s: %s", tmp, strerror(errno));
        goto done;
    }
    if (rename(tmp, out_path) != 0) {
        snprintf(err, ABL_ERR_MAX, "cannot rename %.200s to %.200s: %s", tmp, out_path,
                 strerror(errno));
        goto done;
    }
    fs_dir_of(out_path, dir, sizeof dir);
    if (fs_fsync(dir, 1) != 0) {
        snprintf(err, ABL_ERR_MAX, "cannot fsync directory %.300s: %s", dir, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    if (file >= 0) H5Fclose(file);
    if (fapl >= 0) H5Pclose(fapl);
    if (fcpl >= 0) H5Pclose(fcpl);
    if (rc != 0) {
        /* emptied before the unlink: a file HDF5 failed to close keeps its descriptor, and
         * its blocks would stay allocated on the full disk until the process exits */
        if (truncate(tmp, 0) != 0) { /* nothing more to free */
        }
        unlink(tmp);
    }
    H5Eclear2(H5E_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, old_func, old_data);
    journal_reader_close(r);
    for (uint32_t i = 0; i < v.nruns; i++)
        free(v.runs[i].ev);
    free(v.runs);
    kv_free(&v.header);
    kv_free(&v.end);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    v.st.seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (stats) *stats = v.st;
    return rc;
}

int h5view_build(const char *journal_path, const char *out_path, char err[ABL_ERR_MAX]) {
    return h5view_build_stats(journal_path, out_path, NULL, err);
}
