/* The event codec and the sweep journal: round trips of every event kind and record type,
 * torn tails cut at every byte of the last record, CRC corruption, locking. */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "orchestrator/record/event_codec.h"
#include "orchestrator/record/journal.h"
#include "orchestrator/record/journal_replicate.h"
#include "orchestrator/plan/sequential.h"
#include "test_util.h"
#include "worker/knobs.h"

/* The bytes of a file (test_read_file). */
static uint8_t *read_file(const char *p, long *n) {
    return (uint8_t *)test_read_file(p, n);
}

/* Writes n bytes (none for n <= 0); a failed write shows in the checks on what is read. */
static void write_file(const char *p, const void *b, long n) {
    (void)test_write_file(p, b, n > 0 ? (size_t)n : 0);
}

static int same_double(double a, double b) {
    return memcmp(&a, &b, sizeof a) == 0;
}

/* ---------------- codec ---------------- */

static void fill_events(Event *ev) {
    memset(ev, 0, 6 * sizeof *ev);
    ev[0].kind = EV_START;
    ev[0].u.start.params = 1234567;
    ev[0].u.start.flops_per_token = 7.5e6;
    ev[0].u.start.kv_bytes_per_token = 1024;
    snprintf(ev[0].u.start.blas_core, sizeof ev[0].u.start.blas_core, "Haswell");
    ev[1].kind = EV_STEP;
    ev[1].u.step = (StepEvent){123456, 9876543210L, 2.5, 3e-4, NAN, 12.75};
    ev[2].kind = EV_EVAL;
    ev[2].u.eval = (EvalEvent){-5, INFINITY, 0.125, 77, 1.5, 0.25};
    ev[3].kind = EV_ACT;
    ActEvent *a = &ev[3].u.act;
    a->step = 40;
    a->layer = 3;
    a->zero_frac = 0.5;
    a->max = 7;
    a->min = -7;
    a->mean = 0.01;
    a->rms = 1.5;
    a->resid_rms = 2.5;
    a->grad_norm = -0.0;
    a->n_head = ABL_MAX_HEADS;
    for (int h = 0; h < ABL_MAX_HEADS; h++)
        a->attn_entropy[h] = h / 3.0;
    ev[4].kind = EV_SAMPLE;
    SampleEvent *s = &ev[4].u.sample;
    s->kind = SAMPLE_TEMPERATURE;
    s->temperature = 0.8;
    s->n_tokens = 4095;
    memset(s->text, 'x', ABL_SAMPLE_MAX - 1);
    s->text[0] = '\n';
    s->text[ABL_SAMPLE_MAX - 1] = 0;
    s->tokens_per_s = 1e5;
    s->distinct_ratio = 0.25;
    s->longest_run = 17;
    s->top_token_frac = 0.75;
    s->degenerate = 1;
    ev[5].kind = EV_END;
    EndEvent *e = &ev[5].u.end;
    e->status = RUN_DIVERGED;
    e->steps = 77;
    e->tokens = -1;
    e->train_seconds = 1.25;
    e->tokens_per_s = 3e4;
    e->final_val_loss = NAN;
    e->final_val_acc = 0.5;
    snprintf(e->message, sizeof e->message, "loss is NaN at step 77 \"quoted\"");
}

static int events_equal(const Event *a, const Event *b) {
    if (a->kind != b->kind) return 0;
    switch (a->kind) {
    case EV_START:
        return a->u.start.params == b->u.start.params &&
               same_double(a->u.start.flops_per_token, b->u.start.flops_per_token) &&
               same_double(a->u.start.kv_bytes_per_token, b->u.start.kv_bytes_per_token) &&
               !strcmp(a->u.start.blas_core, b->u.start.blas_core) && b->u.start.config == NULL;
    case EV_STEP: {
        const StepEvent *x = &a->u.step, *y = &b->u.step;
        return x->step == y->step && x->tokens == y->tokens && same_double(x->loss, y->loss) &&
               same_double(x->lr, y->lr) && same_double(x->grad_norm, y->grad_norm) &&
               same_double(x->time, y->time);
    }
    case EV_EVAL:
        return a->u.eval.step == b->u.eval.step &&
               same_double(a->u.eval.val_loss, b->u.eval.val_loss) &&
               same_double(a->u.eval.val_acc, b->u.eval.val_acc);
    case EV_ACT: {
        const ActEvent *x = &a->u.act, *y = &b->u.act;
        if (x->step != y->step || x->layer != y->layer || x->n_head != y->n_head) return 0;
        if (!same_double(x->zero_frac, y->zero_frac) || !same_double(x->max, y->max) ||
            !same_double(x->min, y->min) || !same_double(x->mean, y->mean) ||
            !same_double(x->rms, y->rms) || !same_double(x->resid_rms, y->resid_rms) ||
            !same_double(x->grad_norm, y->grad_norm))
            return 0;
        for (int h = 0; h < x->n_head; h++)
            if (!same_double(x->attn_entropy[h], y->attn_entropy[h])) return 0;
        return 1;
    }
    case EV_SAMPLE: {
        const SampleEvent *x = &a->u.sample, *y = &b->u.sample;
        return x->kind == y->kind && same_double(x->temperature, y->temperature) &&
               x->n_tokens == y->n_tokens && !strcmp(x->text, y->text) &&
               same_double(x->tokens_per_s, y->tokens_per_s) &&
               same_double(x->distinct_ratio, y->distinct_ratio) &&
               x->longest_run == y->longest_run &&
               same_double(x->top_token_frac, y->top_token_frac) && x->degenerate == y->degenerate;
    }
    case EV_END: {
        const EndEvent *x = &a->u.end, *y = &b->u.end;
        return x->status == y->status && x->steps == y->steps && x->tokens == y->tokens &&
               same_double(x->train_seconds, y->train_seconds) &&
               same_double(x->tokens_per_s, y->tokens_per_s) &&
               same_double(x->final_val_loss, y->final_val_loss) &&
               same_double(x->final_val_acc, y->final_val_acc) && !strcmp(x->message, y->message);
    }
    default:
        return 0;
    }
}

TEST(codec) {
    static Event ev[6], back;
    fill_events(ev);
    static uint8_t buf[6 * EVENT_PACK_MAX];
    size_t off = 0;
    for (int i = 0; i < 6; i++) {
        size_t n = event_pack(&ev[i], buf + off, sizeof buf - off);
        CHECK_MSG(n > 0 && n <= EVENT_PACK_MAX, "kind %d packed to %zu", i, n);
        CHECK_MSG(n == event_packed_size(&ev[i]), "kind %d: size %zu vs %zu", i, n,
                  event_packed_size(&ev[i]));
        /* Exactly enough room works; one byte less fails. */
        uint8_t tight[EVENT_PACK_MAX];
        CHECK(event_pack(&ev[i], tight, n) == n && memcmp(tight, buf + off, n) == 0);
        CHECK_CMP(event_pack(&ev[i], tight, n - 1), ==, 0);
        /* Every truncation fails to unpack. */
        for (size_t cut = 0; cut < n; cut++) {
            size_t used;
            if (event_unpack(buf + off, cut, &back, &used) == 0) {
                CHECK_MSG(0, "kind %d unpacked from %zu of %zu bytes", i, cut, n);
                break;
            }
        }
        off += n;
    }
    fprintf(stderr, "packed sizes: step %zu eval %zu act(64 heads) %zu end %zu\n",
            event_packed_size(&ev[1]), event_packed_size(&ev[2]), event_packed_size(&ev[3]),
            event_packed_size(&ev[5]));
    /* A batch unpacks back to the same events. */
    size_t pos = 0;
    for (int i = 0; i < 6; i++) {
        size_t used = 0;
        memset(&back, 0x5a, sizeof back);
        CHECK_CMP(event_unpack(buf + pos, off - pos, &back, &used), ==, 0);
        CHECK_MSG(events_equal(&ev[i], &back), "event %d differs after a round trip", i);
        pos += used;
    }
    CHECK_CMP(pos, ==, off);
    /* A typical step event is small. */
    Event st = {.kind = EV_STEP};
    st.u.step = (StepEvent){500, 500 * 1024, 2.0, 1e-3, 0.5, 3.0};
    CHECK_CMP(event_packed_size(&st), <=, 40);
    /* Garbage kinds and oversize head counts are rejected. */
    uint8_t bad[2] = {EV_KIND_COUNT, 0};
    size_t used;
    CHECK_CMP(event_unpack(bad, 2, &back, &used), !=, 0);
    Event act = ev[3];
    act.u.act.n_head = 3;
    size_t n = event_pack(&act, buf, sizeof buf);
    CHECK_CMP(n, >, 0);
    CHECK(event_unpack(buf, n, &back, &used) == 0 && back.u.act.n_head == 3);
}

/* ---------------- journal ---------------- */

#define N_RECORDS 9

typedef struct {
    uint64_t offset;
    int type;
    uint32_t run;
} Expect;

/* Writes one record of every type (and a 3 MiB one) to path; fills expected records. */
static void write_sample_journal(const char *path, Expect *exp, RunConfig *cfg) {
    char err[ABL_ERR_MAX];
    Journal *j = journal_create(path, err);
    CHECK_MSG(j != NULL, "%s", err);
    if (!j) return;
    int k = 0;
    const char *kv[] = {
        "spec", "sweep:\n  name: x\n", "ablate_version", "0.1.0", "ranks", "3", "empty", ""};
    exp[k++] = (Expect){journal_size(j), JREC_HEADER, JOURNAL_NO_RUN};
    CHECK_CMP(journal_append_header(j, kv, 4), ==, 0);
    run_config_default(cfg);
    cfg->model.n_head = 2;
    cfg->train.lr = 0.1 + 0.2; /* not a short decimal */
    snprintf(cfg->sample.prompt, sizeof cfg->sample.prompt, "line one\nback\\slash=x");
    exp[k++] = (Expect){journal_size(j), JREC_PLAN, 7};
    CHECK_CMP(journal_append_plan(j, 7, "0123456789abcdef", "act=relu,seed=1", 42, cfg), ==, 0);
    exp[k++] = (Expect){journal_size(j), JREC_RUN_BEGIN, 7};
    CHECK_CMP(journal_append_begin(j, 7, 2, 3, "node-a", 100), ==, 0);
    static Event ev[6];
    fill_events(ev);
    static uint8_t packed[6 * EVENT_PACK_MAX];
    size_t n = 0;
    for (int i = 0; i < 6; i++)
        n += event_pack(&ev[i], packed + n, sizeof packed - n);
    exp[k++] = (Expect){journal_size(j), JREC_EVENTS, 7};
    CHECK_CMP(journal_append_events(j, 7, 2, packed, n), ==, 0);
    exp[k++] = (Expect){journal_size(j), JREC_CHECKPOINT, 7};
    CHECK_CMP(journal_append_checkpoint(j, 7, 2, 150, "ckpt/7-150.bin"), ==, 0);
    /* Bigger than the 1 MiB buffer: written directly. */
    size_t big_n = 3u << 20;
    uint8_t *big = malloc(big_n);
    for (size_t i = 0; i < big_n; i++)
        big[i] = (uint8_t)(i * 7 + 1);
    exp[k++] = (Expect){journal_size(j), 200, 9};
    CHECK_CMP(journal_append(j, 200, 9, big, big_n), ==, 0);
    free(big);
    exp[k++] = (Expect){journal_size(j), JREC_RUN_END, 7};
    CHECK_CMP(journal_append_end(j, 7, 2, 3, "node-a", &ev[5].u.end), ==, 0);
    CHECK_CMP(journal_sync(j), ==, 0);
    const char *endkv[] = {"end_time", "2024-01-02T03:04:05Z"};
    exp[k++] = (Expect){journal_size(j), JREC_SWEEP_END, JOURNAL_NO_RUN};
    CHECK_CMP(journal_append_sweep_end(j, endkv, 1), ==, 0);
    /* The last record: a moderate EVENTS batch (cut at every byte below). */
    n = 0;
    for (int i = 0; i < 12; i++) {
        Event s = {.kind = EV_STEP};
        s.u.step = (StepEvent){i + 1, (i + 1) * 64L, 3.0 - i / 8.0, 1e-3, 1.0, i * 0.5};
        n += event_pack(&s, packed + n, sizeof packed - n);
    }
    exp[k++] = (Expect){journal_size(j), JREC_EVENTS, 8};
    CHECK_CMP(journal_append_events(j, 8, 1, packed, n), ==, 0);
    CHECK_CMP(k, ==, N_RECORDS);
    uint64_t logical = journal_size(j);
    CHECK_CMP(journal_close(j), ==, 0);
    CHECK_CMP((long)logical, ==, test_file_size(path));
}

static int count_records(const char *path, uint64_t *valid_end, uint64_t *torn) {
    char err[ABL_ERR_MAX];
    JournalReader *r = journal_reader_open(path, err);
    if (!r) return -1;
    JournalRecord rec;
    int n = 0, rc;
    while ((rc = journal_reader_next(r, &rec)) == 1)
        n++;
    if (valid_end) *valid_end = journal_reader_valid_end(r);
    if (torn) *torn = journal_reader_torn_bytes(r);
    journal_reader_close(r);
    return rc < 0 ? -1 : n;
}

TEST(round_trip) {
    char path[512], err[ABL_ERR_MAX];
    test_path(path, sizeof path, "rt.journal");
    Expect exp[N_RECORDS];
    static RunConfig cfg, back;
    write_sample_journal(path, exp, &cfg);
    CHECK_CMP(journal_create(path, err), ==, NULL); /* exists */
    CHECK_CMP(strstr(err, "exists"), !=, NULL);

    JournalReader *r = journal_reader_open(path, err);
    CHECK_MSG(r != NULL, "%s", err);
    if (!r) return;
    JournalRecord rec;
    int k = 0;
    static Event ev[6];
    fill_events(ev);
    while (journal_reader_next(r, &rec) == 1) {
        CHECK_MSG(k < N_RECORDS && rec.offset == exp[k].offset && rec.type == exp[k].type &&
                      rec.run == exp[k].run,
                  "record %d: offset %llu type %d run %u", k, (unsigned long long)rec.offset,
                  rec.type, rec.run);
        if (k >= N_RECORDS) break;
        switch (rec.type) {
        case JREC_HEADER: {
            JournalKvIter it;
            journal_kv_begin(&it, rec.payload, rec.len);
            const char *key, *val;
            size_t kl, vl;
            int n = 0;
            while (journal_kv_next(&it, &key, &kl, &val, &vl) == 1) {
                if (n == 0) CHECK(kl == 4 && !memcmp(key, "spec", 4) && vl == 17);
                if (n == 2) CHECK(vl == 1 && val[0] == '3');
                if (n == 3) CHECK(kl == 5 && vl == 0);
                n++;
            }
            CHECK_CMP(n, ==, 4);
            break;
        }
        case JREC_PLAN: {
            JournalPlan p;
            CHECK_CMP(journal_decode_plan(&rec, &p), ==, 0);
            CHECK(p.index == 7 && !strcmp(p.id, "0123456789abcdef") && p.seed == 42 &&
                  !strcmp(p.name, "act=relu,seed=1"));
            CHECK(p.config_len > 0 && memchr(p.config_text, '\n', p.config_len) != NULL);
            CHECK_CMP(journal_plan_config(&p, &back, err), ==, 0);
            for (int i = 0; i < knob_count; i++)
                CHECK_MSG(knob_equal(&cfg, &back, &knob_table[i]), "knob %s differs",
                          knob_table[i].name);
            CHECK_EQ_STR(back.sample.prompt, "line one\nback\\slash=x");
            CHECK(same_double(back.train.lr, 0.1 + 0.2));
            /* The canonical text has one line per knob. */
            int lines = 0;
            for (size_t i = 0; i < p.config_len; i++)
                lines += p.config_text[i] == '\n';
            CHECK_CMP(lines, ==, knob_count);
            break;
        }
        case JREC_RUN_BEGIN: {
            JournalBegin b;
            CHECK_CMP(journal_decode_begin(&rec, &b), ==, 0);
            CHECK(b.attempt == 2 && b.rank == 3 && b.resumed_from_step == 100 &&
                  !strcmp(b.host, "node-a"));
            break;
        }
        case JREC_EVENTS: {
            uint32_t attempt;
            const uint8_t *p;
            size_t n;
            CHECK_CMP(journal_decode_events(&rec, &attempt, &p, &n), ==, 0);
            int count = 0;
            Event e;
            while (n > 0) {
                size_t used;
                if (event_unpack(p, n, &e, &used) != 0) {
                    CHECK(0);
                    break;
                }
                if (rec.run == 7) CHECK_MSG(events_equal(&ev[count], &e), "event %d", count);
                p += used;
                n -= used;
                count++;
            }
            CHECK_CMP(count, ==, (rec.run == 7 ? 6 : 12));
            CHECK_CMP(attempt, ==, (rec.run == 7 ? 2u : 1u));
            break;
        }
        case JREC_CHECKPOINT: {
            JournalCheckpoint c;
            CHECK_CMP(journal_decode_checkpoint(&rec, &c), ==, 0);
            CHECK(c.attempt == 2 && c.step == 150 && !strcmp(c.path, "ckpt/7-150.bin"));
            break;
        }
        case JREC_RUN_END: {
            JournalEnd e;
            CHECK_CMP(journal_decode_end(&rec, &e), ==, 0);
            Event x = {.kind = EV_END};
            x.u.end = e.end;
            CHECK(e.attempt == 2 && e.rank == 3 && !strcmp(e.host, "node-a"));
            CHECK(events_equal(&ev[5], &x));
            break;
        }
        case 200: {
            CHECK_CMP(rec.len, ==, (3u << 20));
            int ok = 1;
            for (size_t i = 0; i < rec.len; i++)
                ok &= rec.payload[i] == (uint8_t)(i * 7 + 1);
            CHECK(ok);
            break;
        }
        case JREC_SWEEP_END: {
            JournalKvIter it;
            journal_kv_begin(&it, rec.payload, rec.len);
            const char *key, *val;
            size_t kl, vl;
            CHECK(journal_kv_next(&it, &key, &kl, &val, &vl) == 1 && vl == 20);
            CHECK_CMP(journal_kv_next(&it, &key, &kl, &val, &vl), ==, 0);
            break;
        }
        }
        k++;
    }
    CHECK_CMP(k, ==, N_RECORDS);
    CHECK_CMP(journal_reader_torn_bytes(r), ==, 0);
    CHECK_CMP((long)journal_reader_valid_end(r), ==, test_file_size(path));
    /* Random access re-reads and re-validates. */
    CHECK(journal_reader_read_at(r, exp[2].offset, &rec) == 0 && rec.type == JREC_RUN_BEGIN);
    CHECK_CMP(journal_reader_read_at(r, exp[2].offset + 1, &rec), !=, 0);
    journal_reader_close(r);

    /* Reopen for append: nothing dropped, new records land after the old ones. */
    JournalScan scan;
    Journal *j = journal_open_append(path, &scan, err);
    CHECK_MSG(j != NULL, "%s", err);
    if (j) {
        CHECK(scan.dropped_bytes == 0 && scan.records == N_RECORDS);
        /* A second writer is refused while the first holds the journal. */
        Journal *j2 = journal_open_append(path, NULL, err);
        CHECK(j2 == NULL && strstr(err, "in use") != NULL);
        if (j2) journal_close(j2);
        CHECK_CMP(journal_append(j, JREC_CHECKPOINT, 1, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16), ==,
                  0);
        CHECK_CMP(journal_close(j), ==, 0);
    }
    CHECK_CMP(count_records(path, NULL, NULL), ==, N_RECORDS + 1);
}

/* Cuts the journal at every byte offset inside its last record: the reader stops cleanly
 * after the earlier records, and open_append truncates exactly the torn part. */
/* A replicate: sweep's rule and contrasts, and its decisions, round-trip. */
TEST(replicate_records) {
    char path[512], err[ABL_ERR_MAX];
    test_path(path, sizeof path, "rep.journal");
    unlink(path);
    Journal *j = journal_create(path, err);
    CHECK_MSG(j != NULL, "%s", err);
    if (!j) return;
    JournalReplicate r = {.alpha = 0.05,
                          .delta = 0.01,
                          .core_hours = 2.5,
                          .min = 3,
                          .max = 8,
                          .n_looks = 3,
                          .looks = {3, 5, 8},
                          .n_contrasts = 2,
                          .split = 1};
    const char *names[] = {"h2", "gelu/model.n_head=4"}, *bases[] = {"baseline", "baseline"};
    JournalDecision d = {.contrast = 1,
                         .look = 2,
                         .n = 8,
                         .diff = -0.125,
                         .sd = 0.5,
                         .lo = -0.25,
                         .hi = 1.0 / 3,
                         .level = 0.001,
                         .verdict = 4};
    snprintf(d.note, sizeof d.note, "budget");
    JournalDecision none = {.contrast = 0, .look = -1, .verdict = 5};
    CHECK_CMP(journal_append_replicate(j, &r, names, bases, NULL), ==, 0);
    CHECK_CMP(journal_append_decision(j, &d), ==, 0);
    CHECK_CMP(journal_append_decision(j, &none), ==, 0);
    CHECK_CMP(journal_close(j), ==, 0);
    JournalReader *rd = journal_reader_open(path, err);
    CHECK_MSG(rd != NULL, "%s", err);
    if (!rd) return;
    JournalRecord rec;
    CHECK(journal_reader_next(rd, &rec) == 1 && rec.type == JREC_REPLICATE &&
          rec.run == JOURNAL_NO_RUN && !strcmp(journal_type_name(rec.type), "replicate"));
    JournalReplicate back;
    CHECK_CMP(journal_decode_replicate(&rec, &back), ==, 0);
    CHECK(back.alpha == 0.05 && back.delta == 0.01 && back.core_hours == 2.5 && back.min == 3 &&
          back.max == 8 && back.n_looks == 3 && back.looks[1] == 5 && back.n_contrasts == 2);
    CHECK_CMP(back.split, ==, 1); /* the verdicts' split: test */
    const char *c, *b, *pr;
    size_t cl, bl, pl;
    CHECK_CMP(journal_replicate_contrast(&rec, 1, &c, &cl, &b, &bl, &pr, &pl), ==, 0);
    CHECK(cl == strlen(names[1]) && !memcmp(c, names[1], cl) && bl == 8 &&
          !memcmp(b, "baseline", 8) && pl == 4 && !memcmp(pr, "seed", 4));
    CHECK_CMP(journal_replicate_contrast(&rec, 2, &c, &cl, &b, &bl, &pr, &pl), ==, -1);
    JournalDecision e;
    CHECK(journal_reader_next(rd, &rec) == 1 && rec.type == JREC_DECISION);
    CHECK_CMP(journal_decode_decision(&rec, &e), ==, 0);
    CHECK(e.contrast == 1 && e.look == 2 && e.n == 8 && e.diff == -0.125 && e.sd == 0.5 &&
          e.lo == -0.25 && e.hi == 1.0 / 3 && e.level == 0.001 && e.verdict == 4 &&
          !strcmp(e.note, "budget"));
    CHECK(journal_reader_next(rd, &rec) == 1 && journal_decode_decision(&rec, &e) == 0);
    CHECK(e.look == -1 && e.verdict == 5 && e.note[0] == '\0');
    CHECK_CMP(journal_decode_replicate(&rec, &back), ==, -1); /* the wrong type */
    journal_reader_close(rd);
}

/* A factorial family's REPLICATE record carries each contrast's kind and factor levels (the
 * view's /contrasts); a record in the first form (vs_base) reads as kind vs_base with none. */
TEST(replicate_factors) {
    char path[512], err[ABL_ERR_MAX];
    test_path(path, sizeof path, "repf.journal");
    unlink(path);
    Journal *j = journal_create(path, err);
    CHECK_MSG(j != NULL, "%s", err);
    if (!j) return;
    JournalReplicate r = {.alpha = 0.05,
                          .delta = 0.01,
                          .min = 2,
                          .max = 4,
                          .n_looks = 2,
                          .looks = {2, 4},
                          .n_contrasts = 2};
    const char *names[] = {"model.norm=post", "model.norm=post x model.activation=gelu"};
    const char *bases[] = {"model.norm=pre", "model.norm=pre x model.activation=relu"};
    JournalContrastFactors f[2] = {
        {.kind = 1, .factor = {"model.norm"}, .level = {"post"}, .base_level = {"pre"}},
        {.kind = 2,
         .factor = {"model.norm", "model.activation"},
         .level = {"post", "gelu"},
         .base_level = {"pre", "relu"}}};
    const char *vnames[] = {"h2", "gelu"}, *vbases[] = {"baseline", "baseline"};
    CHECK_CMP(journal_append_replicate(j, &r, names, bases, f), ==, 0);
    CHECK_CMP(journal_append_replicate(j, &r, vnames, vbases, NULL), ==, 0);
    CHECK_CMP(journal_close(j), ==, 0);
    JournalReader *rd = journal_reader_open(path, err);
    CHECK_MSG(rd != NULL, "%s", err);
    if (!rd) return;
    JournalRecord rec;
    JournalReplicate back;
    JournalContrastFactors g;
    CHECK(journal_reader_next(rd, &rec) == 1 && journal_decode_replicate(&rec, &back) == 0 &&
          back.n_contrasts == 2);
    CHECK_CMP(journal_replicate_factors(&rec, 1, &g), ==, 0);
    CHECK(g.kind == 2 && g.factor_len[1] == 16 && !memcmp(g.factor[1], "model.activation", 16) &&
          g.level_len[1] == 4 && !memcmp(g.level[1], "gelu", 4) && g.base_level_len[0] == 3 &&
          !memcmp(g.base_level[0], "pre", 3));
    CHECK(journal_replicate_factors(&rec, 0, &g) == 0 && g.kind == 1 && g.factor_len[1] == 0);
    CHECK_CMP(journal_replicate_factors(&rec, 2, &g), ==, -1);
    const char *c, *b, *pr;
    size_t cl, bl, pl;
    CHECK(journal_replicate_contrast(&rec, 1, &c, &cl, &b, &bl, &pr, &pl) == 0 &&
          bl == strlen(bases[1]) && !memcmp(b, bases[1], bl));
    /* the first form: every contrast vs_base */
    CHECK(journal_reader_next(rd, &rec) == 1 && journal_decode_replicate(&rec, &back) == 0);
    CHECK(journal_replicate_factors(&rec, 1, &g) == 0 && g.kind == 0 && g.factor_len[0] == 0 &&
          g.level_len[0] == 0);
    journal_reader_close(rd);
}

/* The rule's version ends a REPLICATE record (written 0: this binary's); a record from
 * before it (the same bytes without its last 4) reads as version 1, its factorial part intact. */
TEST(replicate_rule_version) {
    char path[512], old_path[512], err[ABL_ERR_MAX];
    test_path(path, sizeof path, "repv.journal");
    test_path(old_path, sizeof old_path, "repv-old.journal");
    unlink(path);
    unlink(old_path);
    Journal *j = journal_create(path, err);
    CHECK_MSG(j != NULL, "%s", err);
    if (!j) return;
    JournalReplicate r = {.alpha = 0.05,
                          .min = 2,
                          .max = 4,
                          .n_looks = 2,
                          .looks = {2, 4},
                          .n_contrasts = 1,
                          .split = 1,
                          .rule_version = 2};
    const char *names[] = {"model.norm=post"}, *bases[] = {"model.norm=pre"};
    JournalContrastFactors f[1] = {
        {.kind = 1, .factor = {"model.norm"}, .level = {"post"}, .base_level = {"pre"}}};
    CHECK_CMP(journal_append_replicate(j, &r, names, bases, f), ==, 0);
    r.rule_version = 0;
    CHECK_CMP(journal_append_replicate(j, &r, names, bases, NULL), ==, 0);
    CHECK_CMP(journal_close(j), ==, 0);
    JournalReader *rd = journal_reader_open(path, err);
    Journal *old = journal_create(old_path, err);
    CHECK(rd != NULL && old != NULL);
    if (!rd || !old) return;
    JournalRecord rec;
    JournalReplicate back;
    JournalContrastFactors g;
    for (int i = 0; i < 2; i++) {
        CHECK(journal_reader_next(rd, &rec) == 1 && journal_decode_replicate(&rec, &back) == 0);
        CHECK_CMP(back.rule_version, ==, i == 0 ? 2 : SEQ_RULE_VERSION);
        CHECK(back.split == 1);
        CHECK_CMP(journal_append(old, JREC_REPLICATE, JOURNAL_NO_RUN, rec.payload, rec.len - 4), ==,
                  0);
    }
    journal_reader_close(rd);
    CHECK_CMP(journal_close(old), ==, 0);
    rd = journal_reader_open(old_path, err);
    CHECK(rd != NULL);
    if (!rd) return;
    for (int i = 0; i < 2; i++) {
        CHECK(journal_reader_next(rd, &rec) == 1 && journal_decode_replicate(&rec, &back) == 0);
        CHECK(back.rule_version == 1 && back.split == 1);
        CHECK(journal_replicate_factors(&rec, 0, &g) == 0 && g.kind == (i == 0 ? 1 : 0));
    }
    journal_reader_close(rd);
}

TEST(torn_tail) {
    char path[512], cut_path[512], err[ABL_ERR_MAX];
    test_path(path, sizeof path, "torn.journal");
    test_path(cut_path, sizeof cut_path, "cut.journal");
    Expect exp[N_RECORDS];
    static RunConfig cfg;
    write_sample_journal(path, exp, &cfg);
    long n;
    uint8_t *full = read_file(path, &n);
    CHECK(full && n > 0);
    if (!full || n <= 0) return;
    long last = (long)exp[N_RECORDS - 1].offset;
    int bad = 0;
    for (long cut = last; cut < n; cut++) {
        write_file(cut_path, full, cut);
        uint64_t valid_end = 0, torn = 0;
        int recs = count_records(cut_path, &valid_end, &torn);
        if (recs != N_RECORDS - 1 || (long)valid_end != last || (long)torn != cut - last) {
            if (bad++ < 5)
                CHECK_MSG(0, "cut at %ld: %d records, valid end %llu, torn %llu", cut, recs,
                          (unsigned long long)valid_end, (unsigned long long)torn);
            continue;
        }
        JournalScan scan;
        Journal *j = journal_open_append(cut_path, &scan, err);
        if (!j) {
            CHECK_MSG(0, "cut at %ld: %s", cut, err);
            continue;
        }
        int ok = scan.dropped_bytes == (uint64_t)(cut - last) && scan.records == N_RECORDS - 1 &&
                 scan.damaged_regions == 0 && test_file_size(cut_path) == last;
        ok &= journal_append(j, JREC_CHECKPOINT, 3, "abcdefghijklmnop", 16) == 0;
        ok &= journal_close(j) == 0;
        ok &= count_records(cut_path, &valid_end, &torn) == N_RECORDS && torn == 0;
        long m;
        uint8_t *after = read_file(cut_path, &m);
        ok &=
            after && m == last + JOURNAL_RECORD_OVERHEAD + 16 && !memcmp(after, full, (size_t)last);
        free(after);
        if (!ok && bad++ < 5) CHECK_MSG(0, "cut at %ld: truncation/append wrong", cut);
        unlink(cut_path);
    }
    fprintf(stderr, "torn tail: %ld cut points checked\n", n - last);
    /* A cut inside an earlier record (here the 3 MiB one) keeps everything before it. */
    for (int k = 1; k < N_RECORDS; k++) {
        long cut = (long)exp[k].offset + 5;
        write_file(cut_path, full, cut);
        CHECK_MSG(count_records(cut_path, NULL, NULL) == k, "cut inside record %d", k);
    }
    /* Zero-filled tail (what a crash can leave after an extending write). */
    uint8_t *padded = calloc(1, (size_t)n + 4096);
    memcpy(padded, full, (size_t)n);
    write_file(cut_path, padded, n + 4096);
    JournalScan scan;
    Journal *j = journal_open_append(cut_path, &scan, err);
    CHECK(j && scan.dropped_bytes == 4096 && scan.records == N_RECORDS);
    if (j) journal_close(j);
    free(padded);
    free(full);
}

TEST(corruption) {
    char path[512], cpath[512], err[ABL_ERR_MAX];
    test_path(path, sizeof path, "crc.journal");
    test_path(cpath, sizeof cpath, "crc2.journal");
    Expect exp[N_RECORDS];
    static RunConfig cfg;
    write_sample_journal(path, exp, &cfg);
    long n;
    uint8_t *full = read_file(path, &n);
    if (!full) return;
    /* Each byte of a middle record flipped in turn (magic, type, run, length, payload, CRC):
     * the reader skips exactly that record, resynchronises on the next one and reports the
     * gap; every later record is kept. */
    int k = 3;
    long beg = (long)exp[k].offset, end = (long)exp[k + 1].offset;
    int missed = 0, lost = 0;
    for (long b = beg; b < end; b += (b < beg + 20 || b > end - 6) ? 1 : 37) {
        full[b] ^= 0x10;
        write_file(cpath, full, n);
        full[b] ^= 0x10;
        char e2[ABL_ERR_MAX];
        JournalReader *r = journal_reader_open(cpath, e2);
        JournalRecord rec;
        int got = 0, seen_k = 0;
        uint64_t gap = 0;
        while (r && journal_reader_next(r, &rec) == 1) {
            got++;
            seen_k |= rec.offset == (uint64_t)beg;
            if (rec.offset == (uint64_t)end) gap = rec.gap_before;
        }
        if (seen_k) missed++;
        if (got != N_RECORDS - 1 || gap != (uint64_t)(end - beg) ||
            journal_reader_damaged_regions(r) != 1 || journal_reader_torn_bytes(r) != 0)
            lost++;
        journal_reader_close(r);
    }
    CHECK_MSG(missed == 0, "%d corruptions not detected", missed);
    CHECK_MSG(lost == 0, "%d corruptions lost later records or misreported the gap", lost);
    /* Corruption in the middle: open_append keeps every byte (readers step over the damage)
     * and reports it; appends go after the last record. */
    full[beg + 20] ^= 1;
    write_file(cpath, full, n);
    full[beg + 20] ^= 1;
    JournalScan scan;
    Journal *j = journal_open_append(cpath, &scan, err);
    CHECK_MSG(j != NULL, "%s", err);
    if (j) {
        CHECK(scan.records == (uint64_t)(N_RECORDS - 1) && scan.valid_bytes == (uint64_t)n);
        CHECK(scan.dropped_bytes == 0 && scan.damaged_regions == 1);
        CHECK_CMP(scan.damaged_bytes, ==, (uint64_t)(end - beg));
        CHECK_CMP(test_file_size(cpath), ==, n);
        CHECK_CMP(journal_append(j, JREC_CHECKPOINT, 3, "abcdefghijklmnop", 16), ==, 0);
        journal_close(j);
        CHECK_CMP(count_records(cpath, NULL, NULL), ==, N_RECORDS);
    }
    /* Damage spanning a record boundary (end of record k, start of k+1): both are lost,
     * the rest kept. */
    long mid = (long)exp[k + 1].offset;
    full[mid - 2] ^= 0x55;
    full[mid + 6] ^= 0x55;
    write_file(cpath, full, n);
    full[mid - 2] ^= 0x55;
    full[mid + 6] ^= 0x55;
    CHECK_CMP(count_records(cpath, NULL, NULL), ==, N_RECORDS - 2);
    /* Corruption of the last record's CRC: a plain torn tail. */
    full[n - 1] ^= 0xff;
    unlink(cpath);
    write_file(cpath, full, n);
    j = journal_open_append(cpath, &scan, err);
    CHECK(j && scan.records == N_RECORDS - 1 && scan.damaged_regions == 0);
    CHECK_CMP(scan.dropped_bytes, ==, (uint64_t)(n - (long)exp[N_RECORDS - 1].offset));
    if (j) journal_close(j);
    free(full);
    /* Not a journal at all. */
    write_file(cpath, (const uint8_t *)"hello world, this is not a journal", 34);
    CHECK_CMP(count_records(cpath, NULL, NULL), ==, 0);
}

TEST(crc) {
    CHECK_CMP(journal_crc32c(0, "123456789", 9), ==, 0xE3069283u);
    uint32_t c = journal_crc32c(0, "1234", 4);
    CHECK_CMP(journal_crc32c(c, "56789", 5), ==, 0xE3069283u);
    CHECK_CMP(journal_crc32c(0, "", 0), ==, 0);
}

/* Not a pass/fail check: the append rate of step events packed into worker-sized batches
 * (64 events per EVENTS record), without fdatasync and with one per 5000-step run. */
static void bench_append(int sync_per_run) {
    char path[512], err[ABL_ERR_MAX];
    test_path(path, sizeof path, "bench.journal");
    unlink(path);
    Journal *j = journal_create(path, err);
    if (!j) return;
    const long n_events = 2000000, batch = 64;
    static uint8_t buf[64 * 64];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n_events; i += batch) {
        size_t n = 0;
        for (long k = i; k < i + batch; k++) {
            Event e = {.kind = EV_STEP};
            e.u.step = (StepEvent){k % 5000 + 1, (k % 5000 + 1) * 1024, 3.0 / (1 + k),
                                   1e-3,         0.7 + k * 1e-7,        k * 0.01};
            n += event_pack(&e, buf + n, sizeof buf - n);
        }
        journal_append_events(j, (uint32_t)(i / 5000), 1, buf, n);
        if (sync_per_run && (i + batch) % 5000 < batch) journal_sync(j);
    }
    journal_close(j);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    fprintf(stderr,
            "append (%s): %ld step events in %.3f s: %.2f M events/s = %.1f M metric "
            "values/s, %.0f MB/s, %.1f bytes/event\n",
            sync_per_run ? "fdatasync per 5000-step run" : "no fdatasync", n_events, s,
            n_events / s / 1e6, 6 * n_events / s / 1e6, test_file_size(path) / s / 1e6,
            (double)test_file_size(path) / (double)n_events);
    unlink(path);
}

/* Not a pass/fail check either: the append rate with and without a sync per run. */
TEST(append_rate) {
    bench_append(0);
    bench_append(1);
}

int main(int argc, char **argv) {
    if (!test_tmpdir()) {
        fprintf(stderr, "cannot make a temporary directory\n");
        return 1;
    }
    return test_main(argc, argv, "test_journal");
}
