/* The sweep view (h5view.h): pass 1 indexes the journal(s) per run, pass 2 streams each
 * run's events into the metric tables, then /runs (h5view_runs.c), the root attributes and
 * /weights. Tables are written with the generic writer of h5table.h; the metric tables'
 * columns come from the event field tables (src/worker/event_schema.h). The live view
 * (h5view_live.c) uses the same passes through h5view_internal.h. Layout:
 * docs/hdf5-schema.md. */
#include "h5view.h"

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/gpt.h"
#include "util/clock.h"
#include "worker/event_schema.h"
#include "worker/knobs.h"
#include "event_codec.h"
#include "util/fsutil.h"
#include "util/grow.h"
#include "h5table.h"
#include "h5view_internal.h"
#include "data_guard.h"
#include "h5user.h"
#include "journal.h"
#include "worker/weights_file.h"
#include "orchestrator/plan/run_id.h"

#ifndef ABLATE_VERSION
#define ABLATE_VERSION "unknown"
#endif

const char *const h5view_status_names[7] = {"pending",  "running", "interrupted", "done",
                                            "diverged", "failed",  "not_needed"};

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

/* A SWEEP_END that says complete: the planned runs then, for the ledger (looked_at_runs). */
static void note_complete(View *v) {
    const char *s = kv_get(&v->end, "status");
    int n = v->n_complete_at;
    if ((s && strncmp(s, "complete", 8)) || v->joined || n >= 16) return;
    if (n && v->complete_at[n - 1] == v->n_planned) return;
    v->complete_at[v->n_complete_at++] = v->n_planned;
}

static int kv_set(KvList *l, const char *key, size_t klen, const char *val, size_t vlen,
                  int keep_first) {
    Kv *kv = kv_find(l, key, klen);
    if (kv && keep_first) return 0;
    if (!kv) {
        if (GROW(l->v, l->cap, (size_t)l->n + 1) != 0) return -1;
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
int h5v_parse_name(const char *name, NameFn fn, void *ctx) {
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
    return h5v_parse_name(name, add_axis, v);
}

static RunState *run_get(View *v, uint32_t index) {
    if (index >= MAX_RUN_INDEX) return NULL;
    size_t old = v->cap;
    if (GROW(v->runs, v->cap, (size_t)index + 1) != 0) return NULL;
    memset(v->runs + old, 0, (v->cap - old) * sizeof *v->runs);
    if (index >= v->nruns) v->nruns = index + 1;
    return &v->runs[index];
}

static int push_ev(RunState *rs, uint64_t off) {
    if (GROW(rs->ev, rs->cap_ev, (size_t)rs->n_ev + 1) != 0) return -1;
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

/* A DATA record: kept when it is the first of its source (path, tokenizer, val_fraction):
 * runs trained on anything else (a change accepted later) get groups of their own. */
static int data_first(View *v, const JournalRecord *rec) {
    DataIdentity id;
    if (data_guard_decode(rec, &id) != 0) return 0;
    for (int i = 0; i < v->n_data; i++)
        if (data_source_same(&v->data[i], &id)) return 0;
    if (GROW(v->data, v->cap_data, (size_t)v->n_data + 1) != 0) return -1;
    v->data[v->n_data++] = id;
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
        if (rec.gap_before &&
            h5v_damage_gap(v, r, rec.offset - rec.gap_before, rec.gap_before) != 0)
            goto oom;
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
        case JREC_DATA:
            if (data_first(v, &rec) != 0) goto oom;
            break;
        case JREC_HEADER:
            v->session++;
            if (read_kv(v, &rec, v->header_into, 1) != 0) goto oom;
            break;
        case JREC_SWEEP_END:
            v->sweep_end_session = v->session ? v->session : 1;
            if (v->session == 0) v->session = 1;
            if (read_kv(v, &rec, &v->end, 0) != 0) goto oom;
            note_complete(v);
            break;
        case JREC_PLAN: {
            JournalPlan p;
            if (journal_decode_plan(&rec, &p) != 0) {
                v->st.skipped++;
                break;
            }
            v->n_planned += !rs->planned;
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
        case JREC_REPLICATE:
        case JREC_DECISION:
            if (h5v_replicate_record(v, r, &rec) != 0) goto oom;
            break;
        case JREC_CALIBRATION:
            if (h5v_calibration_record(v, &rec) != 0) goto oom;
            break;
        case JREC_TUNE:
            if (h5v_tune_record(v, &rec) != 0) goto oom;
            break;
        case JREC_DAMAGE:
            if (h5v_damage_handled(v, &rec) != 0) goto oom;
            break;
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
/* The sessions that ended complete with fewer planned runs than the sweep has now: each a
 * design a report may have been read at before the sweep was continued. As the attribute
 * looked_at_runs ("4,6"), or nothing when there is none (docs/hdf5-schema.md). */
static int write_looked_at(const View *v, hid_t file) {
    char list[16 * 12] = "";
    for (int i = 0; i < v->n_complete_at; i++)
        if (v->complete_at[i] < v->n_planned)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%u", list[0] ? "," : "",
                     v->complete_at[i]);
    return list[0] ? h5_attr_str(file, "looked_at_runs", list) : 0;
}

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

/* How far a journal got with a run: ended (not interrupted, not failed) > running > failed
 * > interrupted > planned; among interrupted attempts, the one with more history. A failed
 * run is trained again by a process that joins later (joined.c), so its retry, running or
 * ended, shows over the failure, as a --resume's later attempt does in one journal. */
static int run_score(const RunState *rs) {
    if (!rs->planned) return -1;
    if (rs->has_end && rs->end_status != RUN_INTERRUPTED && rs->end_status != RUN_FAILED) return 4;
    if ((rs->begun || rs->n_ev) && !rs->has_end && !rs->stale) return 3;
    if (rs->has_end && rs->end_status == RUN_FAILED) return 2;
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
        cand[i].ev = NULL; /* moved or freed: the caller frees what is left */
        old->attempts = attempts;
    }
    return 0;
}

JournalReader *h5v_run_reader(const View *v, const RunState *rs) {
    return v->rd[rs->src];
}

int h5v_run_status(const RunState *rs, const JournalEnd *end) {
    if (rs->has_end) {
        switch (end->end.status) {
        case RUN_DONE:
            return ST_DONE;
        case RUN_DIVERGED:
            return ST_DIVERGED;
        case RUN_FAILED:
            return ST_FAILED;
        case RUN_NOT_NEEDED:
            return ST_NOT_NEEDED;
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

const char *h5v_table_name(int t) {
    const Metric *m = &metric_defs[t / 2];
    return t % 2 ? m->child : m->name;
}

static const char *const run_doc = "plan index of the run (row of /runs)";

/* The HDF5 column of a field (an event field or a knob): numbers as themselves, enums as fixed
 * strings, text as variable-length UTF-8. */
H5Col h5v_field_col(const FieldDesc *f) {
    H5Col c = {f->name, H5C_F64, 0, f->units, f->desc};
    switch (f->type) {
    case FT_LONG:
        c.type = H5C_I64;
        break;
    case FT_INT:
        c.type = H5C_I32;
        break;
    case FT_BOOL:
        c.type = H5C_BOOL;
        break;
    case FT_ENUM:
        c.type = H5C_STR;
        c.len = 2;
        for (size_t i = 0; i < f->n; i++)
            if (strlen(f->names[i]) + 1 > c.len) c.len = strlen(f->names[i]) + 1;
        break;
    case FT_STR:
    case FT_TEXT:
        c.type = H5C_VSTR;
        break;
    case FT_DOUBLE:
    case FT_HEADS:
        break;
    }
    return c;
}

/* The count field of an FT_HEADS is its table's row count, not a column. */
static int is_heads_count(const EventSchema *s, int k) {
    return k + 1 < s->n_fields && s->fields[k + 1].type == FT_HEADS;
}

static void metric_columns(Metric *m) {
    const EventSchema *s = &event_schema[m->kind];
    m->cols[0] = (H5Col){"run", H5C_I32, 0, NULL, run_doc};
    m->field[0] = -1;
    m->ncol = 1;
    m->heads = -1;
    for (int k = 0; k < s->n_fields; k++) { /* fits: the static asserts of h5view_internal.h */
        const FieldDesc *f = &s->fields[k];
        if (f->type == FT_HEADS) {
            m->heads = k;
            continue;
        }
        if (is_heads_count(s, k)) continue;
        m->field[m->ncol] = k;
        m->cols[m->ncol++] = h5v_field_col(f);
    }
    if (m->heads < 0) return;
    /* child rows: run, the parent's integer keys (step, layer), head, the value */
    m->ccols[0] = m->cols[0];
    m->nccol = 1;
    m->nckeys = 0;
    for (int k = 0; k < m->heads && m->nckeys < 6; k++) {
        const FieldDesc *f = &s->fields[k];
        if ((f->type != FT_LONG && f->type != FT_INT) || is_heads_count(s, k)) continue;
        m->ckeys[m->nckeys++] = k;
        m->ccols[m->nccol++] = h5v_field_col(f);
    }
    m->ccols[m->nccol++] = (H5Col){"head", H5C_I32, 0, NULL, "attention head (0-based)"};
    m->ccols[m->nccol++] =
        (H5Col){m->child_value, H5C_F64, 0, s->fields[m->heads].units, s->fields[m->heads].desc};
}

int h5v_put_field(H5Table *t, uint8_t *row, int c, const H5Col *col, const void *body,
                  const FieldDesc *f) {
    switch (f->type) {
    case FT_LONG:
        h5t_set_i64(t, row, c, (int64_t)field_integer(body, f));
        return 0;
    case FT_INT:
        h5t_set_i32(t, row, c, (int32_t)field_integer(body, f));
        return 0;
    case FT_BOOL:
        h5t_set_bool(t, row, c, field_integer(body, f) != 0);
        return 0;
    case FT_ENUM:
        h5t_set_str(t, row, c, field_enum_name(body, f), col->len);
        return 0;
    case FT_STR:
    case FT_TEXT: {
        size_t n;
        const char *s = field_text(body, f, &n);
        return h5t_set_vstr(t, row, c, s, n);
    }
    case FT_DOUBLE:
        h5t_set_f64(t, row, c, field_number(body, f));
        return 0;
    case FT_HEADS: /* a table of its own (Metric.child) */
        return 0;
    }
    return 0;
}

static int metric_row(Metric *m, int32_t run, const Event *ev, char *err) {
    const EventSchema *s = &event_schema[m->kind];
    const void *body = event_cbody(ev);
    uint8_t *row = h5t_row(&m->t, err);
    if (!row) return -1;
    h5t_set_i32(&m->t, row, 0, run);
    for (int c = 1; c < m->ncol; c++)
        if (h5v_put_field(&m->t, row, c, &m->cols[c], body, &s->fields[m->field[c]]) != 0) goto oom;
    if (m->heads < 0) return 0;
    const FieldDesc *hf = &s->fields[m->heads];
    int n = (int)field_number(body, hf - 1);
    const double *v = (const double *)(const void *)((const char *)body + hf->offset);
    for (int h = 0; h < n && h < (int)hf->n; h++) {
        if (!(row = h5t_row(&m->c, err))) return -1;
        h5t_set_i32(&m->c, row, 0, run);
        for (int k = 0; k < m->nckeys; k++)
            h5v_put_field(&m->c, row, 1 + k, &m->ccols[1 + k], body, &s->fields[m->ckeys[k]]);
        h5t_set_i32(&m->c, row, 1 + m->nckeys, h);
        h5t_set_f64(&m->c, row, 2 + m->nckeys, v[h]);
    }
    return 0;
oom:
    snprintf(err, ABL_ERR_MAX, "out of memory");
    return -1;
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

/* What the view keeps of a run from its events; metric rows for the rest. */
static int view_event(View *v, Metric *ms, RunState *rs, int32_t run, Event *ev, char *err) {
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
    case EV_EVAL: /* 0.1.0 journals: the tokens of that step, from the config (read back
                   * only then: a config's parse was most of a live update's time per run) */
        if (ev->u.eval.tokens < 0 && rs->tokens_per_step == 0) {
            long t = plan_tokens_per_step(h5v_run_reader(v, rs), rs);
            rs->tokens_per_step = t > 0 ? t : -1;
        }
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
        h5t_init(&ms[i].t);
        h5t_init(&ms[i].c);
        metric_columns(&ms[i]);
    }
}

int h5v_metrics_create(Metric *ms, hid_t file, H5Table *schema, char *err) {
    h5v_metrics_layout(ms);
    for (int i = 0; i < N_METRICS; i++) {
        Metric *m = &ms[i];
        if (h5t_create(&m->t, file, m->name, m->cols, m->ncol, 1, m->desc, err) != 0 ||
            h5t_schema_add(schema, m->name, m->cols, m->ncol, err) != 0)
            return -1;
        if (m->heads >= 0 &&
            (h5t_create(&m->c, file, m->child, m->ccols, m->nccol, 1, m->child_desc, err) != 0 ||
             h5t_schema_add(schema, m->child, m->ccols, m->nccol, err) != 0))
            return -1;
    }
    return 0;
}

/* Streams the run's EVENTS records (last attempt) into the tables. */
int h5v_run_events(View *v, Metric *ms, uint32_t i, uint32_t from, Event *ev, char *err) {
    RunState *rs = &v->runs[i];
    JournalReader *r = h5v_run_reader(v, rs);
    rs->tokens_per_step = 0; /* not read yet (view_event) */
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
            if (view_event(v, ms, rs, (int32_t)i, ev, err) != 0) return -1;
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
    if (h5v_metrics_create(ms, file, v->schema, err) != 0) goto done;
    for (uint32_t i = 0; i < v->nruns; i++) {
        RunState *rs = &v->runs[i];
        if (!rs->planned) {
            v->st.skipped += rs->n_ev;
            continue;
        }
        long long before[N_TABLES];
        for (int t = 0; t < N_TABLES; t++)
            before[t] = h5t_rows(t % 2 ? &ms[t / 2].c : &ms[t / 2].t);
        if (h5v_run_events(v, ms, i, 0, ev, err) != 0) goto done;
        for (int t = 0; t < N_TABLES; t++)
            rs->rows[t] = h5t_rows(t % 2 ? &ms[t / 2].c : &ms[t / 2].t) - before[t];
        free(rs->ev);
        rs->ev = NULL;
    }
    rc = 0;
done:
    free(ev);
    long long *counts[] = {&v->st.steps, &v->st.evals, &v->st.acts, &v->st.samples};
    for (int i = 0; i < N_METRICS; i++) {
        *counts[i] = h5t_rows(&ms[i].t);
        if (ms[i].heads >= 0) v->st.attn = h5t_rows(&ms[i].c);
        char e2[ABL_ERR_MAX];
        if (h5t_close(&ms[i].t, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
        if (h5t_close(&ms[i].c, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    }
    return rc;
}

/* ---------------- root attributes, /spec, /vocab, /data_files ---------------- */

static const char *const known_attrs[] = {
    "ablate_version",   "git_rev",   "compiler",  "c_flags",    "mpi_version",  "hdf5_version",
    "openblas_version", "blas_core", "hostnames", "start_time", "command_line", "sets",
    "id_scheme"};

/* Header keys that are datasets or computed attributes, not copied as attributes. */
static int not_an_attr(const char *k) {
    static const char *const skip[] = {"spec",
                                       "spec_expanded",
                                       "base_config",
                                       "vocab",
                                       "vocab_hex",
                                       "data_files",
                                       "ranks",
                                       "end_time",
                                       "status",
                                       "sessions",
                                       "ablate_schema_version",
                                       "view_built_by",
                                       ""};
    for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
        if (!strcmp(k, skip[i])) return 1;
    for (size_t i = 0; i < sizeof known_attrs / sizeof *known_attrs; i++)
        if (!strcmp(k, known_attrs[i])) return 1;
    return 0;
}

/* /data_files from the header's "sha256<TAB>bytes<TAB>path" lines. */
static int write_data_files(View *v, hid_t file, const char *text, char *err) {
    static const H5Col cols[] = {
        {"path", H5C_VSTR, 0, NULL, "data.path as the spec resolved it"},
        {"bytes", H5C_I64, 0, "bytes", "file size (-1 if unreadable)"},
        {"sha256", H5C_STR, 65, NULL,
         "SHA-256 of the file, hex ('unreadable' if it could not be read)"},
    };
    H5Table t;
    h5t_init(&t);
    int rc = h5t_create(&t, file, "data_files", cols, 3, 1,
                        "The data files of the sweep (one row per distinct data.path), as "
                        "hashed when the (latest) session started.",
                        err);
    if (rc == 0) rc = h5t_schema_add(v->schema, "data_files", cols, 3, err);
    for (const char *p = text; rc == 0 && p && *p;) {
        const char *nl = strchr(p, '\n'), *end = nl ? nl : p + strlen(p);
        const char *t1 = memchr(p, '\t', (size_t)(end - p));
        const char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(end - t1 - 1)) : NULL;
        if (t2) {
            uint8_t *row = h5t_row(&t, err);
            char hex[65];
            snprintf(hex, sizeof hex, "%.*s", (int)(t1 - p), p);
            if (!row)
                rc = -1;
            else {
                h5t_set_str(&t, row, 2, hex, 65);
                h5t_set_i64(&t, row, 1, strtoll(t1 + 1, NULL, 10));
                if (h5t_set_vstr(&t, row, 0, t2 + 1, (size_t)(end - t2 - 1)) != 0) rc = -1;
            }
        }
        p = nl ? nl + 1 : NULL;
    }
    char e2[ABL_ERR_MAX];
    if (h5t_close(&t, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    return rc;
}

int h5v_write_root(View *v, hid_t file, char *err) {
    const int nknown = (int)(sizeof known_attrs / sizeof *known_attrs);
    if (h5_attr_i32(file, "ablate_schema_version", ABLATE_SCHEMA_VERSION) != 0) goto fail;
    for (int i = 0; i < nknown; i++)
        if (h5_attr_str(file, known_attrs[i], kv_get(&v->header, known_attrs[i])) != 0) goto fail;
    const char *ranks = kv_get(&v->header, "ranks");
    if (h5_attr_i32(file, "ranks", ranks ? atoi(ranks) : 0) != 0) goto fail;
    const char *end_time = sweep_complete(v) ? kv_get(&v->end, "end_time") : NULL;
    if (h5_attr_str(file, "end_time", end_time) != 0) goto fail;
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
    /* damage no --resume has handled: whatever the records said, the view may lack or
     * misstate runs (h5view_damage.c) */
    h5v_damage_settle(v);
    if (v->st.damaged_regions) status = "damaged";
    if (h5v_write_damage(v, file) != 0) goto fail;
    /* a joined sweep (join.h): how many processes' journals this view merges */
    if (v->joined && h5_attr_i32(file, "joined_processes", v->nrd) != 0) goto fail;
    if (h5_attr_str(file, "status", status) != 0) goto fail;
    if (h5_attr_i32(file, "sessions", (int)v->session) != 0) goto fail;
    if (write_looked_at(v, file) != 0) goto fail;
    if (h5_attr_str(file, "view_built_by", "ablate " ABLATE_VERSION) != 0) goto fail;
    /* how much of the journal this view shows: `ablate inspect` compares it with the
     * journal to say when the view is older */
    if (h5_attr_i64(file, "journal_bytes", (long long)v->st.journal_bytes) != 0) goto fail;
    /* Any other header keys (slurm_*, ...), as string attributes (first appearance order). */
    for (int i = 0; i < v->header.n; i++)
        if (!not_an_attr(v->header.v[i].key) &&
            h5_attr_str(file, v->header.v[i].key, v->header.v[i].val) != 0)
            goto fail;
    if (h5_write_string_dataset(file, "spec", kv_get(&v->header, "spec"),
                                "The sweep spec (YAML) as given.") != 0)
        goto fail;
    const char *x = kv_get(&v->header, "spec_expanded");
    if (x && h5_write_string_dataset(file, "spec_expanded", x,
                                     "The sweep spec with ${VAR} references resolved, as the "
                                     "(latest) session read it.") != 0)
        goto fail;
    const char *bc = kv_get(&v->header, "base_config");
    if (bc && h5_write_string_dataset(file, "base_config", bc,
                                      "The spec's base configuration as ablate resolved it "
                                      "(defaults, base.preset, base keys, --set): one JSON "
                                      "object {knob: value}, as the (latest) session read "
                                      "it.") != 0)
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
    if ((hex || vocab) &&
        h5_write_u8_dataset(file, "vocab", bytes, nb,
                            "The char tokenizer's vocabulary: token i is the byte "
                            "vocab[i] (a multi-byte UTF-8 character spans several "
                            "tokens).") != 0)
        goto fail;
    const char *df = kv_get(&v->header, "data_files");
    if (df && write_data_files(v, file, df, err) != 0) return -1;
    return 0;
fail:
    h5_err(err, "cannot write the root attributes");
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
            journal_reader_read_at(h5v_run_reader(v, rs), rs->plan_off, &rec) != 0 ||
            journal_decode_plan(&rec, &plan) != 0)
            continue;
        char path[ABL_PATH_MAX + 64];
        if (weights_file_path(dir, plan.id, path, sizeof path) != 0) continue;
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        WeightsHeader h;
        RunConfig cfg;
        char msg[ABL_ERR_MAX];
        TensorInfo t[T_COUNT];
        /* realloc, not GROW: one buffer sized to each run's weights exactly (a doubled
         * capacity could hold up to a model's size for nothing) */
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
            h5_err(err, "cannot create /weights");
            rc = -1;
            break;
        }
        hid_t g = H5Gcreate2(group, plan.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g < 0 || h5_attr_str(g, "name", plan.name) != 0 || h5_attr_i32(g, "run", (int)i) != 0) {
            h5_err(err, "cannot create /weights/%s", plan.id);
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
                h5_err(err, "cannot write /weights/%s/%s", plan.id, t[k].name);
                rc = -1;
            }
            if (ds >= 0) H5Dclose(ds);
            H5Sclose(space);
        }
        if (g >= 0) H5Gclose(g);
    }
    if (group >= 0) {
        if (rc == 0)
            rc = h5_attr_str(
                group, "description",
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
    h5v_runs_cache_free(v);
    h5v_damage_free(v);
    for (uint32_t i = 0; i < v->nruns; i++)
        free(v->runs[i].ev);
    free(v->runs);
    v->runs = NULL;
    v->nruns = v->cap = 0;
    free(v->data);
    v->data = NULL;
    v->n_data = 0;
    v->cap_data = 0;
    kv_free(&v->header);
    kv_free(&v->end);
    free(v->dec);
    v->dec = NULL;
    v->n_dec = 0;
    v->cap_dec = 0;
    v->rep_rd = NULL;
    free(v->cal);
    v->cal = NULL;
    v->n_cal = 0;
    v->cap_cal = 0;
    h5v_tune_free(v);
    for (int a = 0; a < v->n_axes; a++)
        free(v->axes[a]);
    v->n_axes = 0;
}

/* Pass 1 of journal k into its own run table, then merged into the view's. */
static int pass1_journal(View *v, int k, uint64_t limit, const char *path, char *err) {
    RunState *runs = v->runs;
    uint32_t nruns = v->nruns;
    size_t cap = v->cap;
    KvList scratch = {0};
    v->runs = NULL, v->nruns = 0, v->cap = 0;
    v->session = v->sweep_end_session = 0;
    v->header_into = k == 0 ? &v->header : &scratch;
    v->cur_journal = k;
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
    for (uint32_t i = 0; i < ncand; i++) /* what merge_runs did not reach */
        free(cand[i].ev);
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
    H5Table schema;
    h5t_init(&schema);
    for (int k = 0; k < n; k++)
        if (!(v.rd[k] = journal_reader_open(journals[k], err)) ||
            pass1_journal(&v, k, k == limited ? limit : UINT64_MAX, journals[k], err) != 0)
            goto done;
    v.writer_gone = !v.any_writer;

    file = h5_create_file(tmp);
    if (file < 0) {
        h5_err(err, "cannot create %s", tmp);
        goto done;
    }
    if (h5t_schema_create(&schema, file, err) != 0) goto done;
    v.schema = &schema;
    if (h5v_write_root(&v, file, err) != 0) goto done;
    if (pass2(&v, file, err) != 0) goto done;
    if (h5v_write_runs(&v, file, err) != 0) goto done;
    if (h5v_write_replicate(&v, file, err) != 0) goto done;
    if (h5v_write_calibration(&v, file, err) != 0) goto done;
    if (h5v_write_tuning(&v, file, err) != 0) goto done;
    if (write_weights(&v, data_dir, file, err) != 0) goto done;
    if (h5user_carry(out_path, file, err) != 0) goto done;
    rc = 0;
done:;
    char e2[ABL_ERR_MAX];
    if (h5t_close(&schema, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
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

void h5v_md_rows(Buf *b, const H5Col *cols, int n) {
    char t[32];
    for (int i = 0; i < n; i++)
        buf_printf(b, "| `%s` | %s | %s | %s |\n", cols[i].name,
                   h5t_col_type_name(&cols[i], t, sizeof t), cols[i].units ? cols[i].units : "",
                   cols[i].doc ? cols[i].doc : "");
}

void h5view_schema_markdown(Buf *b) {
    static const char head[] = "| column | type | units | meaning |\n|---|---|---|---|\n";
    for (int i = 0; i < N_METRICS; i++) {
        Metric m = metric_defs[i];
        metric_columns(&m);
        buf_printf(b, "#### `/%s`\n%s\n\n%s", m.name, m.desc, head);
        h5v_md_rows(b, m.cols, m.ncol);
        if (m.heads >= 0) {
            buf_printf(b, "\n#### `/%s`\n%s\n\n%s", m.child, m.child_desc, head);
            h5v_md_rows(b, m.ccols, m.nccol);
        }
        buf_addc(b, '\n');
    }
    h5v_runs_markdown(b, head);
    buf_addc(b, '\n');
    h5v_live_markdown(b, head);
    h5v_replicate_markdown(b, head);
    h5v_calibration_markdown(b, head);
    h5v_tuning_markdown(b, head);
    buf_printf(b,
               "\n#### `/schema`\nIn every view file: one row per column of every table the "
               "file holds (itself included), in the order the tables were written.\n\n%s",
               head);
    h5v_md_rows(b, schema_cols, schema_ncol);
}
