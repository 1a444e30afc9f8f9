/* The sweep view (h5view.h): pass 1 indexes the journal per run, pass 2 streams each run's
 * events into the metric tables, then /runs, the root attributes and /weights. Tables are
 * written with the generic writer of h5table.h; the metric tables' columns come from the
 * event field tables (src/worker/event_schema.h). Layout: docs/hdf5-schema.md. */
#include "h5view.h"

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../model/gpt.h"
#include "../worker/clock.h"
#include "../worker/event_schema.h"
#include "../worker/knobs.h"
#include "event_codec.h"
#include "fsutil.h"
#include "h5table.h"
#include "h5view_internal.h"
#include "journal.h"
#include "run_exec.h"
#include "run_id.h"

#ifndef ABLATE_VERSION
#define ABLATE_VERSION "unknown"
#endif

const char *const h5view_status_names[6] = {"pending", "running",  "interrupted",
                                            "done",    "diverged", "failed"};

/* ---------------- pass 1 state ---------------- */

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

/* One "label=value" segment of a run name per grid axis: "variant/n_head=4/act=gelu/seed1".
 * Calls fn for each (the variant segment, without '=', gets label NULL). */
typedef int (*NameFn)(void *ctx, const char *label, size_t llen, const char *val, size_t vlen);
static int parse_name(const char *name, NameFn fn, void *ctx) {
    const char *p = name;
    while (*p) {
        const char *slash = strchr(p, '/');
        if (!slash) break; /* the last segment is the seed */
        const char *eq = memchr(p, '=', (size_t)(slash - p));
        int rc = eq ? fn(ctx, p, (size_t)(eq - p), eq + 1, (size_t)(slash - eq - 1))
                    : (p == name ? fn(ctx, NULL, 0, p, (size_t)(slash - p)) : 0);
        if (rc) return rc;
        p = slash + 1;
    }
    return 0;
}

static int add_axis(void *ctx, const char *label, size_t llen, const char *val, size_t vlen) {
    View *v = ctx;
    (void)val, (void)vlen;
    if (!label) return 0;
    for (int i = 0; i < v->n_axes; i++)
        if (strlen(v->axes[i]) == llen && !memcmp(v->axes[i], label, llen)) return 0;
    if (v->n_axes == MAX_AXES) return 0;
    if (!(v->axes[v->n_axes] = strndup(label, llen))) return -1;
    v->n_axes++;
    return 0;
}

static int collect_axes(View *v, const char *name) {
    return parse_name(name, add_axis, v);
}

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

int h5v_pass1(View *v, JournalReader *r, uint64_t limit, char *err) {
    JournalRecord rec;
    int rc;
    while ((rc = journal_reader_next(r, &rec)) == 1) {
        /* records past the limit are still being appended: a later build shows them */
        if (rec.offset + JOURNAL_RECORD_OVERHEAD + rec.len > limit) {
            v->st.journal_bytes = rec.offset;
            return 0;
        }
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
            if (read_kv(v, &rec, v->header_into, 1) != 0) goto oom;
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
            if (collect_axes(v, p.name) != 0) goto oom;
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
                rs->end_status = (int8_t)e.end.status;
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

static int journal_complete(const View *v) {
    return v->sweep_end_session != 0 && v->sweep_end_session == v->session;
}

/* A joined sweep is complete when every run has ended (no process writes a SWEEP_END for
 * all of them); a single journal when its last session ended it. */
static int sweep_complete(const View *v) {
    if (!v->joined) return journal_complete(v);
    uint32_t planned = 0;
    for (uint32_t i = 0; i < v->nruns; i++) {
        const RunState *rs = &v->runs[i];
        if (!rs->planned) continue;
        planned++;
        if (!rs->has_end || rs->end_status == RUN_INTERRUPTED) return 0;
    }
    return planned > 0;
}

/* After pass 1 of one journal: which of its unended attempts are no longer running. */
void h5v_mark_stale(View *v) {
    int over = journal_complete(v) || v->writer_gone;
    for (uint32_t i = 0; i < v->nruns; i++) {
        RunState *rs = &v->runs[i];
        rs->stale = !rs->has_end && (over || rs->begin_session < v->session);
    }
}

/* How far a journal got with a run: ended (not interrupted) > running > interrupted >
 * planned; among interrupted attempts, the one with more history. */
static int run_score(const RunState *rs) {
    if (!rs->planned) return -1;
    if (rs->has_end && rs->end_status != RUN_INTERRUPTED) return 3;
    if ((rs->begun || rs->n_ev) && !rs->has_end && !rs->stale) return 2;
    return rs->begun || rs->n_ev || rs->has_end ? 1 : 0;
}

/* Merges one journal's runs (cand, from pass 1) into the view's: each keeps the better. */
static int merge_runs(View *v, RunState *cand, uint32_t n, uint16_t src) {
    for (uint32_t i = 0; i < n; i++) {
        cand[i].src = src;
        if (!run_get(v, i)) return -1;
        RunState *old = &v->runs[i];
        int a = run_score(old), b = run_score(&cand[i]);
        uint32_t attempts = old->attempts + cand[i].attempts;
        if (b > a || (b == a && b == 1 && cand[i].n_ev > old->n_ev)) {
            free(old->ev);
            *old = cand[i];
        } else {
            free(cand[i].ev);
        }
        old->attempts = attempts;
    }
    return 0;
}

static JournalReader *run_reader(const View *v, const RunState *rs) {
    return v->rd[rs->src];
}

static int run_status(const RunState *rs, const JournalEnd *end) {
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
    if (rs->stale) return ST_INTERRUPTED;
    return ST_RUNNING;
}

/* ---------------- pass 2: metric tables, generated from the event schema ---------------- */

static const Metric metric_defs[] = {
    {.kind = EV_STEP,
     .name = "steps",
     .desc = "One row per logged optimizer step of each run's last attempt."},
    {.kind = EV_EVAL, .name = "evals", .desc = "One row per validation evaluation."},
    {.kind = EV_ACT,
     .name = "acts",
     .desc = "Activation statistics, one row per (run, step, layer).",
     .child = "attn",
     .child_value = "entropy",
     .child_desc = "Attention entropy, one row per (run, step, layer, head), recorded with "
                   "each /acts row."},
    {.kind = EV_SAMPLE,
     .name = "samples",
     .desc = "Generated samples and their degeneracy statistics."},
};
_Static_assert(sizeof metric_defs / sizeof metric_defs[0] == N_METRICS, "N_METRICS");

static const char *const run_doc = "plan index of the run (row of /runs)";

/* The HDF5 column of a field: numbers as themselves, enums as fixed strings, text as
 * variable-length UTF-8. */
static Col field_col(const EventField *f) {
    Col c = {f->name, C_F64, 0, f->units, f->desc};
    switch (f->type) {
    case EF_LONG:
        c.type = C_I64;
        break;
    case EF_INT:
        c.type = C_I32;
        break;
    case EF_BOOL:
        c.type = C_BOOL;
        break;
    case EF_ENUM:
        c.type = C_STR;
        c.len = 2;
        for (size_t i = 0; i < f->n; i++)
            if (strlen(f->names[i]) + 1 > c.len) c.len = strlen(f->names[i]) + 1;
        break;
    case EF_STR:
    case EF_TEXT:
        c.type = C_VSTR;
        break;
    default:
        break;
    }
    return c;
}

/* The count field of an EF_HEADS is its table's row count, not a column. */
static int is_heads_count(const EventSchema *s, int k) {
    return k + 1 < s->n_fields && s->fields[k + 1].type == EF_HEADS;
}

static void metric_columns(Metric *m) {
    const EventSchema *s = &event_schema[m->kind];
    m->cols[0] = (Col){"run", C_I32, 0, NULL, run_doc};
    m->field[0] = -1;
    m->ncol = 1;
    m->heads = -1;
    for (int k = 0; k < s->n_fields && m->ncol < METRIC_MAX_COLS; k++) {
        const EventField *f = &s->fields[k];
        if (f->type == EF_HEADS) {
            m->heads = k;
            continue;
        }
        if (is_heads_count(s, k)) continue;
        m->field[m->ncol] = k;
        m->cols[m->ncol++] = field_col(f);
    }
    if (m->heads < 0) return;
    /* child rows: run, the parent's integer keys (step, layer), head, the value */
    m->ccols[0] = m->cols[0];
    m->nccol = 1;
    m->nckeys = 0;
    for (int k = 0; k < m->heads && m->nckeys < 6; k++) {
        const EventField *f = &s->fields[k];
        if ((f->type != EF_LONG && f->type != EF_INT) || is_heads_count(s, k)) continue;
        m->ckeys[m->nckeys++] = k;
        m->ccols[m->nccol++] = field_col(f);
    }
    m->ccols[m->nccol++] = (Col){"head", C_I32, 0, NULL, "attention head (0-based)"};
    m->ccols[m->nccol++] =
        (Col){m->child_value, C_F64, 0, s->fields[m->heads].units, s->fields[m->heads].desc};
}

static int put_field(Table *t, uint8_t *row, int c, const Col *col, const void *body,
                     const EventField *f) {
    double x = event_field_number(body, f);
    switch (f->type) {
    case EF_LONG:
        set_i64(t, row, c, (int64_t)x);
        return 0;
    case EF_INT:
        set_i32(t, row, c, (int32_t)x);
        return 0;
    case EF_BOOL:
        set_bool(t, row, c, x != 0);
        return 0;
    case EF_ENUM: {
        int v = (int)x;
        set_str(t, row, c, v >= 0 && (size_t)v < f->n ? f->names[v] : "?", col->len);
        return 0;
    }
    case EF_STR:
    case EF_TEXT: {
        size_t n;
        const char *s = event_field_text(body, f, &n);
        return set_vstr(t, row, c, s, n);
    }
    case EF_DOUBLE:
        set_f64(t, row, c, x);
        return 0;
    default:
        return 0;
    }
}

static int metric_row(Metric *m, int32_t run, const Event *ev, char *err) {
    const EventSchema *s = &event_schema[m->kind];
    const void *body = event_cbody(ev);
    uint8_t *row = table_row(&m->t, err);
    if (!row) return -1;
    set_i32(&m->t, row, 0, run);
    for (int c = 1; c < m->ncol; c++)
        if (put_field(&m->t, row, c, &m->cols[c], body, &s->fields[m->field[c]]) != 0) goto oom;
    if (m->heads < 0) return 0;
    const EventField *hf = &s->fields[m->heads];
    int n = (int)event_field_number(body, hf - 1);
    const double *v = (const double *)(const void *)((const char *)body + hf->offset);
    for (int h = 0; h < n && h < (int)hf->n; h++) {
        if (!(row = table_row(&m->c, err))) return -1;
        set_i32(&m->c, row, 0, run);
        for (int k = 0; k < m->nckeys; k++)
            put_field(&m->c, row, 1 + k, &m->ccols[1 + k], body, &s->fields[m->ckeys[k]]);
        set_i32(&m->c, row, 1 + m->nckeys, h);
        set_f64(&m->c, row, 2 + m->nckeys, v[h]);
    }
    return 0;
oom:
    snprintf(err, ABL_ERR_MAX, "out of memory");
    return -1;
}

/* What the view keeps of a run from its events; metric rows for the rest. */
static int view_event(Metric *ms, RunState *rs, int32_t run, Event *ev, char *err) {
    switch (ev->kind) {
    case EV_START:
        rs->has_start = 1;
        rs->start = ev->u.start;
        rs->start.config = NULL;
        return 0;
    case EV_STEP:
        rs->has_step = 1;
        rs->last_step = ev->u.step.step;
        rs->last_tokens = ev->u.step.tokens;
        rs->last_time = ev->u.step.time;
        break;
    case EV_EVAL: /* 0.1.0 journals: the tokens of that step, from the config */
        if (ev->u.eval.tokens < 0 && rs->tokens_per_step > 0)
            ev->u.eval.tokens = ev->u.eval.step * rs->tokens_per_step;
        break;
    case EV_END:
        return 0; /* the RUN_END record is authoritative */
    default:
        break;
    }
    for (int i = 0; i < N_METRICS; i++)
        if (ms[i].kind == ev->kind) return metric_row(&ms[i], run, ev, err);
    return 0;
}

void h5v_metrics_layout(Metric *ms) {
    for (int i = 0; i < N_METRICS; i++) {
        ms[i] = metric_defs[i];
        table_init(&ms[i].t);
        table_init(&ms[i].c);
        metric_columns(&ms[i]);
    }
}

int h5v_metrics_create(Metric *ms, hid_t file, char *err) {
    h5v_metrics_layout(ms);
    for (int i = 0; i < N_METRICS; i++) {
        Metric *m = &ms[i];
        if (table_create(&m->t, file, m->name, m->cols, m->ncol, 1, m->desc, err) != 0) return -1;
        if (m->heads >= 0 &&
            table_create(&m->c, file, m->child, m->ccols, m->nccol, 1, m->child_desc, err) != 0)
            return -1;
    }
    return 0;
}

/* The plan's tokens per step (batch_size x context), for 0.1.0 evals. */
static long plan_tokens_per_step(JournalReader *r, const RunState *rs) {
    JournalRecord rec;
    JournalPlan p;
    RunConfig c;
    char e[ABL_ERR_MAX];
    if (journal_reader_read_at(r, rs->plan_off, &rec) != 0 || journal_decode_plan(&rec, &p) != 0 ||
        journal_plan_config(&p, &c, e) != 0)
        return 0;
    return (long)c.train.batch_size * c.model.context;
}

/* Streams the run's EVENTS records (last attempt) into the tables. */
int h5v_run_events(View *v, Metric *ms, uint32_t i, uint32_t from, Event *ev, char *err) {
    RunState *rs = &v->runs[i];
    JournalReader *r = run_reader(v, rs);
    rs->tokens_per_step = plan_tokens_per_step(r, rs);
    for (uint32_t k = from; k < rs->n_ev; k++) {
        JournalRecord rec;
        uint32_t attempt;
        const uint8_t *p;
        size_t n;
        if (journal_reader_read_at(r, rs->ev[k], &rec) != 0) {
            snprintf(err, ABL_ERR_MAX, "%s", journal_reader_error(r));
            return -1;
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
            if (view_event(ms, rs, (int32_t)i, ev, err) != 0) return -1;
            p += used;
            n -= used;
        }
    }
    return 0;
}

static int pass2(View *v, hid_t file, char *err) {
    Metric ms[N_METRICS];
    int rc = -1;
    Event *ev = malloc(sizeof *ev);
    if (!ev) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        return -1;
    }
    if (h5v_metrics_create(ms, file, err) != 0) goto done;
    for (uint32_t i = 0; i < v->nruns; i++) {
        RunState *rs = &v->runs[i];
        if (!rs->planned) {
            v->st.skipped += rs->n_ev;
            continue;
        }
        if (h5v_run_events(v, ms, i, 0, ev, err) != 0) goto done;
        free(rs->ev);
        rs->ev = NULL;
    }
    rc = 0;
done:
    free(ev);
    long long *counts[] = {&v->st.steps, &v->st.evals, &v->st.acts, &v->st.samples};
    for (int i = 0; i < N_METRICS; i++) {
        *counts[i] = table_rows(&ms[i].t);
        if (ms[i].heads >= 0) v->st.attn = table_rows(&ms[i].c);
        char e2[ABL_ERR_MAX];
        if (table_close(&ms[i].t, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
        if (table_close(&ms[i].c, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    }
    return rc;
}

/* ---------------- /runs ---------------- */

#define COL_NAME_MAX 160

/* The columns of /runs: fixed, one per grid axis, one per knob, the start event's fields,
 * the end event's fields (but status), then where and how often the run ran. */
typedef struct {
    Col *cols;
    char (*names)[COL_NAME_MAX];
    int ncol;
    int axis0, knob0, start0, end0, tail0;
    int start_field[32], end_field[32], n_start, n_end;
} RunsLayout;

enum { R_INDEX, R_ID, R_NAME, R_SEED, R_STATUS, R_VARIANT, R_GROUP, R_OVERRIDES, R_NFIXED };
enum { R_RANK, R_HOST, R_ATTEMPTS, R_RESUMED, R_CKPT, R_NTAIL };

static const Col fixed_cols[R_NFIXED] = {
    {"index", C_I32, 0, NULL, "plan index (= run in the metric tables)"},
    {"id", C_STR, 17, NULL, "stable run id: 16 hex digits (id_scheme)"},
    {"name", C_VSTR, 0, NULL, "run name: variant/axis=value/.../seedN"},
    {"seed", C_U64, 0, NULL, "the run's seed"},
    {"status", C_STR, STATUS_LEN, NULL, "pending, running, interrupted, done, diverged or failed"},
    {"variant", C_VSTR, 0, NULL, "variant name (empty for a grid without variants)"},
    {"group", C_STR, 17, NULL,
     "hash of the configuration without the seed: seeds of one "
     "configuration share it"},
    {"overrides", C_VSTR, 0, NULL, "what the variant and grid set, as `ablate plan` prints it"},
};
static const Col tail_cols[R_NTAIL] = {
    {"rank", C_I32, 0, NULL, "MPI rank of the last attempt (-1 if never started)"},
    {"host", C_VSTR, 0, NULL, "host of the last attempt"},
    {"attempts", C_I32, 0, NULL, "attempts begun"},
    {"resumed_from_step", C_I64, 0, "steps",
     "the last attempt resumed from this checkpoint (0 = fresh)"},
    {"last_checkpoint_step", C_I64, 0, "steps", "latest checkpoint (0 if none)"},
};

static int layout_has(const RunsLayout *L, int upto, const char *name) {
    for (int i = 0; i < upto; i++)
        if (!strcmp(L->cols[i].name, name)) return 1;
    return 0;
}

/* Adds a column, renamed prefix.name if the name is taken. */
static void layout_add(RunsLayout *L, Col c, const char *prefix) {
    int i = L->ncol++;
    if (layout_has(L, i, c.name) && prefix) {
        snprintf(L->names[i], COL_NAME_MAX, "%s.%s", prefix, c.name);
        c.name = L->names[i];
    }
    L->cols[i] = c;
}

static Col knob_col(const Knob *kn) {
    Col c = {kn->name, C_F64, 0, knob_units(kn), kn->help};
    switch (kn->type) {
    case KNOB_INT:
        c.type = C_I32;
        break;
    case KNOB_LONG:
        c.type = C_I64;
        break;
    case KNOB_DOUBLE:
        break;
    case KNOB_BOOL:
        c.type = C_BOOL;
        break;
    case KNOB_ENUM:
        c.type = C_STR;
        c.len = 2;
        for (int i = 0; i < kn->n_choices; i++)
            if (strlen(kn->choices[i]) + 1 > c.len) c.len = strlen(kn->choices[i]) + 1;
        break;
    case KNOB_STRING:
        c.type = C_VSTR;
        break;
    }
    return c;
}

static int runs_layout(const View *v, RunsLayout *L) {
    const EventSchema *ss = &event_schema[EV_START], *es = &event_schema[EV_END];
    int max = R_NFIXED + v->n_axes + knob_count + ss->n_fields + es->n_fields + R_NTAIL;
    memset(L, 0, sizeof *L);
    L->cols = calloc((size_t)max, sizeof *L->cols);
    L->names = calloc((size_t)max, sizeof *L->names);
    if (!L->cols || !L->names) return -1;
    for (int i = 0; i < R_NFIXED; i++)
        layout_add(L, fixed_cols[i], NULL);
    L->axis0 = L->ncol;
    for (int a = 0; a < v->n_axes; a++)
        layout_add(L, (Col){v->axes[a], C_VSTR, 0, NULL, "grid axis value, as in the run name"},
                   "axis");
    L->knob0 = L->ncol;
    for (int k = 0; k < knob_count; k++)
        layout_add(L, knob_col(&knob_table[k]), "config");
    L->start0 = L->ncol;
    for (int k = 0; k < ss->n_fields && L->n_start < 32; k++) {
        L->start_field[L->n_start++] = k;
        layout_add(L, field_col(&ss->fields[k]), "start");
    }
    L->end0 = L->ncol;
    for (int k = 0; k < es->n_fields && L->n_end < 32; k++) {
        if (!strcmp(es->fields[k].name, "status")) continue; /* the view's own status column */
        L->end_field[L->n_end++] = k;
        layout_add(L, field_col(&es->fields[k]), "end");
    }
    L->tail0 = L->ncol;
    for (int i = 0; i < R_NTAIL; i++)
        layout_add(L, tail_cols[i], "run");
    return 0;
}

static void layout_free(RunsLayout *L) {
    free(L->cols);
    free(L->names);
}

typedef struct {
    Table *t;
    uint8_t *row;
    const RunsLayout *L;
    const View *v;
    int bad;
} AxisCtx;

static int put_axis(void *ctx, const char *label, size_t llen, const char *val, size_t vlen) {
    AxisCtx *a = ctx;
    if (!label) {
        a->bad |= set_vstr(a->t, a->row, R_VARIANT, val, vlen);
        return 0;
    }
    for (int i = 0; i < a->v->n_axes; i++)
        if (strlen(a->v->axes[i]) == llen && !memcmp(a->v->axes[i], label, llen))
            a->bad |= set_vstr(a->t, a->row, a->L->axis0 + i, val, vlen);
    return 0;
}

static int put_knobs(Table *t, uint8_t *row, int c0, const RunConfig *cfg) {
    for (int k = 0; k < knob_count; k++) {
        const Knob *kn = &knob_table[k];
        const char *f = (const char *)cfg + kn->offset;
        int c = c0 + k, iv;
        long lv;
        double dv;
        switch (kn->type) {
        case KNOB_INT:
        case KNOB_BOOL:
            memcpy(&iv, f, sizeof iv);
            if (kn->type == KNOB_INT)
                set_i32(t, row, c, iv);
            else
                set_bool(t, row, c, iv);
            break;
        case KNOB_LONG:
            memcpy(&lv, f, sizeof lv);
            set_i64(t, row, c, lv);
            break;
        case KNOB_DOUBLE:
            memcpy(&dv, f, sizeof dv);
            set_f64(t, row, c, dv);
            break;
        case KNOB_ENUM:
            memcpy(&iv, f, sizeof iv);
            set_str(t, row, c, iv >= 0 && iv < kn->n_choices ? kn->choices[iv] : "?", 64);
            break;
        case KNOB_STRING:
            if (set_vstr(t, row, c, f, strlen(f)) != 0) return -1;
            break;
        }
    }
    return 0;
}

/* The plan's part of a row: identity, variant, group, overrides, axes, knobs. Sets
 * message when the config cannot be read back. */
static int put_plan(View *v, const RunsLayout *L, Table *t, uint8_t *row, uint32_t i,
                    const JournalPlan *plan, RunConfig *cfg, char *message, size_t mn) {
    char cerr[ABL_ERR_MAX], group[17] = "";
    if (journal_plan_config(plan, cfg, cerr) != 0) {
        v->st.skipped++;
        snprintf(message, mn, "config: %.240s", cerr);
    } else {
        run_id_format(run_id_hash(cfg, NULL), group);
    }
    set_i32(t, row, R_INDEX, (int32_t)i);
    set_str(t, row, R_ID, plan->id, 17);
    set_u64(t, row, R_SEED, plan->seed);
    set_str(t, row, R_GROUP, group, 17);
    AxisCtx a = {t, row, L, v, 0};
    a.bad |= set_vstr(t, row, R_NAME, plan->name, strlen(plan->name));
    a.bad |= set_vstr(t, row, R_VARIANT, "", 0);
    a.bad |= set_vstr(t, row, R_OVERRIDES, plan->overrides ? plan->overrides : "",
                      plan->overrides ? plan->overrides_len : 0);
    for (int k = 0; k < v->n_axes; k++)
        a.bad |= set_vstr(t, row, L->axis0 + k, "", 0);
    parse_name(plan->name, put_axis, &a);
    return a.bad || put_knobs(t, row, L->knob0, cfg) != 0 ? -1 : 0;
}

/* The results part of a row: status, the start and end events' fields, where it ran. */
static int put_results(View *v, const RunsLayout *L, Table *t, uint8_t *row, RunState *rs,
                       JournalEnd *end, const char *message) {
    JournalReader *r = run_reader(v, rs);
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
    int st = run_status(rs, end);
    if (st == ST_DONE) v->st.runs_done++;
    v->st.runs++;
    set_str(t, row, R_STATUS, h5view_status_names[st], STATUS_LEN);
    if (!rs->has_start) event_fields_default(&rs->start, EV_START, 0);
    const EventSchema *ss = &event_schema[EV_START], *es = &event_schema[EV_END];
    int bad = 0;
    for (int k = 0; k < L->n_start; k++)
        bad |= put_field(t, row, L->start0 + k, &L->cols[L->start0 + k], &rs->start,
                         &ss->fields[L->start_field[k]]);
    for (int k = 0; k < L->n_end; k++)
        bad |= put_field(t, row, L->end0 + k, &L->cols[L->end0 + k], &end->end,
                         &es->fields[L->end_field[k]]);
    set_i32(t, row, L->tail0 + R_RANK, rank);
    bad |= set_vstr(t, row, L->tail0 + R_HOST, host, strlen(host));
    set_i32(t, row, L->tail0 + R_ATTEMPTS, (int32_t)rs->attempts);
    set_i64(t, row, L->tail0 + R_RESUMED, rs->resumed_from_step);
    set_i64(t, row, L->tail0 + R_CKPT, rs->ckpt_step);
    return bad ? -1 : 0;
}

static int runs_axes_attr(const View *v, const RunsLayout *L, hid_t dset) {
    Buf b = {0};
    for (int a = 0; a < v->n_axes; a++) {
        buf_adds(&b, L->cols[L->axis0 + a].name);
        buf_addc(&b, '\n');
    }
    int rc = b.oom ? -1 : attr_str(dset, "axes", b.p ? b.p : "");
    buf_free(&b);
    return rc;
}

int h5v_write_runs(View *v, hid_t file, char *err) {
    RunsLayout L;
    RunConfig *cfg = malloc(sizeof *cfg);
    JournalEnd *end = malloc(sizeof *end);
    JournalPlan *plan = malloc(sizeof *plan);
    Table runs;
    table_init(&runs);
    int rc = -1;
    if (runs_layout(v, &L) != 0 || !cfg || !end || !plan) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        goto done;
    }
    if (table_create(&runs, file, "runs", L.cols, L.ncol, 1,
                     "One row per planned run, in plan order (row i = plan index i = the run "
                     "column of the metric tables): identity, grid axes (attribute axes), "
                     "config knobs named by the knob, the start and end events' fields. "
                     "Unknown numbers are NaN (floats) or -1 (integers).",
                     err) != 0 ||
        runs_axes_attr(v, &L, runs.dset) != 0)
        goto done;
    for (uint32_t i = 0; i < v->nruns; i++) {
        RunState *rs = &v->runs[i];
        if (!rs->planned) continue;
        JournalRecord rec;
        JournalReader *r = run_reader(v, rs);
        if (journal_reader_read_at(r, rs->plan_off, &rec) != 0 ||
            journal_decode_plan(&rec, plan) != 0) {
            snprintf(err, ABL_ERR_MAX, "run %u: cannot re-read its plan: %s", i,
                     journal_reader_error(r));
            goto done;
        }
        uint8_t *row = table_row(&runs, err);
        if (!row) goto done;
        char message[256] = "";
        if (put_plan(v, &L, &runs, row, i, plan, cfg, message, sizeof message) != 0 ||
            put_results(v, &L, &runs, row, rs, end, message) != 0) {
            snprintf(err, ABL_ERR_MAX, "out of memory");
            goto done;
        }
    }
    rc = 0;
done:;
    char e2[ABL_ERR_MAX];
    if (table_close(&runs, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    layout_free(&L);
    free(cfg);
    free(end);
    free(plan);
    return rc;
}

/* ---------------- root attributes, /spec, /vocab, /data_files ---------------- */

static const char *const known_attrs[] = {
    "ablate_version",   "git_rev",   "compiler",  "c_flags",    "mpi_version",  "hdf5_version",
    "openblas_version", "blas_core", "hostnames", "start_time", "command_line", "sets",
    "id_scheme"};

/* Header keys that are datasets or computed attributes, not copied as attributes. */
static int not_an_attr(const char *k) {
    static const char *const skip[] = {"spec",          "spec_expanded",
                                       "vocab",         "vocab_hex",
                                       "data_files",    "ranks",
                                       "end_time",      "status",
                                       "sessions",      "ablate_schema_version",
                                       "view_built_by", ""};
    for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
        if (!strcmp(k, skip[i])) return 1;
    for (size_t i = 0; i < sizeof known_attrs / sizeof *known_attrs; i++)
        if (!strcmp(k, known_attrs[i])) return 1;
    return 0;
}

/* /data_files from the header's "sha256<TAB>bytes<TAB>path" lines. */
static int write_data_files(hid_t file, const char *text, char *err) {
    static const Col cols[] = {
        {"path", C_VSTR, 0, NULL, "data.path as the spec resolved it"},
        {"bytes", C_I64, 0, "bytes", "file size (-1 if unreadable)"},
        {"sha256", C_STR, 65, NULL,
         "SHA-256 of the file, hex ('unreadable' if it could not be read)"},
    };
    Table t;
    table_init(&t);
    int rc = table_create(&t, file, "data_files", cols, 3, 1,
                          "The data files of the sweep (one row per distinct data.path), as "
                          "hashed when the (latest) session started.",
                          err);
    for (const char *p = text; rc == 0 && p && *p;) {
        const char *nl = strchr(p, '\n'), *end = nl ? nl : p + strlen(p);
        const char *t1 = memchr(p, '\t', (size_t)(end - p));
        const char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(end - t1 - 1)) : NULL;
        if (t2) {
            uint8_t *row = table_row(&t, err);
            char hex[65];
            snprintf(hex, sizeof hex, "%.*s", (int)(t1 - p), p);
            if (!row)
                rc = -1;
            else {
                set_str(&t, row, 2, hex, 65);
                set_i64(&t, row, 1, strtoll(t1 + 1, NULL, 10));
                if (set_vstr(&t, row, 0, t2 + 1, (size_t)(end - t2 - 1)) != 0) rc = -1;
            }
        }
        p = nl ? nl + 1 : NULL;
    }
    char e2[ABL_ERR_MAX];
    if (table_close(&t, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    return rc;
}

int h5v_write_root(View *v, hid_t file, char *err) {
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
    if (sweep_complete(v) && v->joined) {
        status = "complete";
        for (uint32_t i = 0; i < v->nruns; i++)
            if (v->runs[i].planned && v->runs[i].end_status == RUN_FAILED)
                status = "complete_with_failures";
    } else if (sweep_complete(v)) {
        const char *s = kv_get(&v->end, "status");
        status = s && s[0] ? s : "complete";
    }
    /* a joined sweep (join.h): how many processes' journals this view merges */
    if (v->joined && attr_i32(file, "joined_processes", v->nrd) != 0) goto fail;
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
    /* Any other header keys (slurm_*, ...), as string attributes (first appearance order). */
    for (int i = 0; i < v->header.n; i++)
        if (!not_an_attr(v->header.v[i].key) &&
            attr_str(file, v->header.v[i].key, v->header.v[i].val) != 0)
            goto fail;
    if (write_string_dataset(file, "spec", kv_get(&v->header, "spec"),
                             "The sweep spec (YAML) as given.") != 0)
        goto fail;
    const char *x = kv_get(&v->header, "spec_expanded");
    if (x && write_string_dataset(file, "spec_expanded", x,
                                  "The sweep spec with ${VAR} references resolved, as the "
                                  "(latest) session read it.") != 0)
        goto fail;
    /* vocab_hex since 0.2 (a raw "vocab" value lost everything after a NUL byte) */
    Kv *hex = kv_find(&v->header, "vocab_hex", 9), *vocab = kv_find(&v->header, "vocab", 5);
    uint8_t bytes[256];
    size_t nb = 0;
    if (hex) {
        for (size_t i = 0; i + 1 < hex->vlen && nb < sizeof bytes; i += 2) {
            unsigned x;
            if (sscanf(hex->val + i, "%2x", &x) == 1) bytes[nb++] = (uint8_t)x;
        }
    } else if (vocab) {
        nb = vocab->vlen < sizeof bytes ? vocab->vlen : sizeof bytes;
        memcpy(bytes, vocab->val, nb);
    }
    if ((hex || vocab) && write_u8_dataset(file, "vocab", bytes, nb,
                                           "The char tokenizer's vocabulary: token i is the byte "
                                           "vocab[i] (a multi-byte UTF-8 character spans several "
                                           "tokens).") != 0)
        goto fail;
    const char *df = kv_get(&v->header, "data_files");
    if (df && write_data_files(file, df, err) != 0) return -1;
    return 0;
fail:
    h5err(err, "cannot write the root attributes");
    return -1;
}

/* ---------------- /weights (save_weights) ---------------- */

/* /weights/<id>: one dataset per parameter tensor, shaped as in the tensor table, for every
 * finished run whose weights file (OUT.h5.d/weights/<id>.f32) exists. One run in memory at
 * a time. */
static int write_weights(View *v, const char *dir, hid_t file, char *err) {
    hid_t group = -1;
    float *buf = NULL;
    int rc = 0;
    for (uint32_t i = 0; i < v->nruns && rc == 0; i++) {
        RunState *rs = &v->runs[i];
        JournalRecord rec;
        JournalPlan plan;
        if (!rs->planned || !rs->has_end ||
            journal_reader_read_at(run_reader(v, rs), rs->plan_off, &rec) != 0 ||
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
    return h5view_build_upto(journal_path, out_path, UINT64_MAX, stats, err);
}

int h5view_build_upto(const char *journal_path, const char *out_path, uint64_t limit,
                      H5ViewStats *stats, char err[ABL_ERR_MAX]) {
    char dir[ABL_PATH_MAX];
    fs_dir_of(journal_path, dir, sizeof dir);
    const char *one[1] = {journal_path};
    return h5view_build_many(one, 1, 0, limit, dir, out_path, stats, err);
}

void h5v_view_free(View *v) {
    for (uint32_t i = 0; i < v->nruns; i++)
        free(v->runs[i].ev);
    free(v->runs);
    v->runs = NULL;
    v->nruns = v->cap = 0;
    kv_free(&v->header);
    kv_free(&v->end);
    for (int a = 0; a < v->n_axes; a++)
        free(v->axes[a]);
    v->n_axes = 0;
}

/* Pass 1 of journal k into its own run table, then merged into the view's. */
static int pass1_journal(View *v, int k, uint64_t limit, const char *path, char *err) {
    RunState *runs = v->runs;
    uint32_t nruns = v->nruns, cap = v->cap;
    KvList scratch = {0};
    v->runs = NULL, v->nruns = 0, v->cap = 0;
    v->session = v->sweep_end_session = 0;
    v->header_into = k == 0 ? &v->header : &scratch;
    uint64_t bytes = v->st.journal_bytes, torn = v->st.torn_bytes;
    v->st.journal_bytes = v->st.torn_bytes = 0;
    char lerr[ABL_ERR_MAX];
    int lock = journal_lock_existing(path, lerr);
    v->writer_gone = lock >= 0;
    if (lock >= 0) close(lock);
    v->any_writer |= !v->writer_gone;
    int rc = h5v_pass1(v, v->rd[k], limit, err);
    v->st.journal_bytes += bytes;
    v->st.torn_bytes += torn;
    h5v_mark_stale(v);
    RunState *cand = v->runs;
    uint32_t ncand = v->nruns;
    uint32_t sess = v->session, end_sess = v->sweep_end_session;
    v->runs = runs, v->nruns = nruns, v->cap = cap;
    if (rc == 0 && merge_runs(v, cand, ncand, (uint16_t)k) != 0) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        rc = -1;
    }
    if (rc != 0) /* merge_runs freed what it took */
        for (uint32_t i = 0; i < ncand; i++)
            if (i >= v->nruns || v->runs[i].ev != cand[i].ev) free(cand[i].ev);
    free(cand);
    kv_free(&scratch);
    if (k == 0) v->session = sess, v->sweep_end_session = end_sess; /* the file's sessions */
    return rc;
}

int h5view_build_many(const char *const *journals, int n, int limited, uint64_t limit,
                      const char *data_dir, const char *out_path, H5ViewStats *stats,
                      char err[ABL_ERR_MAX]) {
    double t0 = clock_seconds();
    View v;
    memset(&v, 0, sizeof v);
    char tmp[ABL_PATH_MAX + 32];
    /* per process: `ablate view` may rebuild while the sweep does */
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out_path, (long)getpid()) >= (int)sizeof tmp - 4) {
        snprintf(err, ABL_ERR_MAX, "%s: path too long", out_path);
        return -1;
    }
    if (n < 1 || n > 65535) {
        snprintf(err, ABL_ERR_MAX, "%s: %d journals", out_path, n);
        return -1;
    }
    v.joined = n > 1;
    if (!(v.rd = calloc((size_t)n, sizeof *v.rd))) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        return -1;
    }
    v.nrd = n;

    H5E_auto2_t old_func;
    void *old_data;
    H5Eget_auto2(H5E_DEFAULT, &old_func, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);

    int rc = -1;
    hid_t file = -1;
    for (int k = 0; k < n; k++)
        if (!(v.rd[k] = journal_reader_open(journals[k], err)) ||
            pass1_journal(&v, k, k == limited ? limit : UINT64_MAX, journals[k], err) != 0)
            goto done;
    v.writer_gone = !v.any_writer;

    file = h5_create_file(tmp);
    if (file < 0) {
        h5err(err, "cannot create %s", tmp);
        goto done;
    }
    if (h5v_write_root(&v, file, err) != 0) goto done;
    if (pass2(&v, file, err) != 0) goto done;
    if (h5v_write_runs(&v, file, err) != 0) goto done;
    if (write_weights(&v, data_dir, file, err) != 0) goto done;
    rc = 0;
done:
    rc = h5_finish_file(file, tmp, out_path, rc == 0, err);
    H5Eclear2(H5E_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, old_func, old_data);
    for (int k = 0; k < n; k++)
        if (v.rd[k]) journal_reader_close(v.rd[k]);
    free(v.rd);
    h5v_view_free(&v);
    v.st.seconds = clock_seconds() - t0;
    if (stats) *stats = v.st;
    return rc;
}

int h5view_build(const char *journal_path, const char *out_path, char err[ABL_ERR_MAX]) {
    return h5view_build_stats(journal_path, out_path, NULL, err);
}

/* ---------------- the docs' schema tables ---------------- */

static const char *col_type_name(const Col *c, char *buf, size_t n) {
    switch (c->type) {
    case C_I32:
        return "int32";
    case C_I64:
        return "int64";
    case C_U64:
        return "uint64";
    case C_F64:
        return "float64";
    case C_BOOL:
        return "bool";
    case C_STR:
        snprintf(buf, n, "S%zu", c->len);
        return buf;
    case C_VSTR:
        return "str (UTF-8)";
    }
    return "?";
}

static void md_rows(Buf *b, const Col *cols, int n) {
    char t[32];
    for (int i = 0; i < n; i++)
        buf_printf(b, "| `%s` | %s | %s | %s |\n", cols[i].name,
                   col_type_name(&cols[i], t, sizeof t), cols[i].units ? cols[i].units : "",
                   cols[i].doc ? cols[i].doc : "");
}

void h5view_schema_markdown(Buf *b) {
    static const char head[] = "| column | type | units | meaning |\n|---|---|---|---|\n";
    for (int i = 0; i < N_METRICS; i++) {
        Metric m = metric_defs[i];
        metric_columns(&m);
        buf_printf(b, "#### `/%s`\n%s\n\n%s", m.name, m.desc, head);
        md_rows(b, m.cols, m.ncol);
        if (m.heads >= 0) {
            buf_printf(b, "\n#### `/%s`\n%s\n\n%s", m.child, m.child_desc, head);
            md_rows(b, m.ccols, m.nccol);
        }
        buf_addc(b, '\n');
    }
    View v;
    memset(&v, 0, sizeof v);
    RunsLayout L;
    if (runs_layout(&v, &L) != 0) return;
    buf_printf(b,
               "#### `/runs`\nFixed columns, then one str column per grid axis (listed in the "
               "attribute `axes`), then one column per knob (below), then:\n\n%s",
               head);
    md_rows(b, L.cols, R_NFIXED);
    md_rows(b, L.cols + L.start0, L.ncol - L.start0);
    buf_printf(b, "\nKnob columns (named by the knob; `units.<knob>` attributes):\n\n%s", head);
    md_rows(b, L.cols + L.knob0, L.start0 - L.knob0);
    layout_free(&L);
}
