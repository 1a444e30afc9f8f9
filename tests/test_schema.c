/* The event schema (src/worker/events.h) and what is generated from it: the codec's size
 * bounds and version-1 compatibility (the journal of tests/fixtures/v1 decodes, its evals
 * reading time as unknown), the JSON writer's escaping (always valid UTF-8, lossless
 * through surrogateescape, full double precision), and UTF-8 repair. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/record/event_codec.h"
#include "orchestrator/record/journal.h"
#include "orchestrator/plan/run_id.h"
#include "test_util.h"
#include "worker/event_schema.h"
#include "util/json.h"
#include "worker/sinks.h"
#include "util/utf8.h"

#ifndef ABLATE_FIXTURES_DIR
#define ABLATE_FIXTURES_DIR "tests/fixtures"
#endif

TEST(bounds) {
    for (int k = 0; k < EV_KIND_COUNT; k++) {
        CHECK_MSG(event_packed_max((EventKind)k) <= EVENT_PACK_MAX, "%s packs to up to %zu bytes",
                  event_schema[k].name, event_packed_max((EventKind)k));
        CHECK_CMP(event_schema[k].v1_fields, <=, event_schema[k].n_fields);
        CHECK_EQ_STR(event_schema[k].name, event_kind_names[k]);
    }
}

/* Every event of the version-1 journal decodes; evals get tokens -1 and time NaN. */
TEST(v1_journal) {
    char err[ABL_ERR_MAX];
    JournalReader *r = journal_reader_open(ABLATE_FIXTURES_DIR "/v1/journal", err);
    CHECK_MSG(r != NULL, "%s", err);
    if (!r) return;
    JournalRecord rec;
    int counts[EV_KIND_COUNT] = {0}, bad = 0, ends = 0;
    while (journal_reader_next(r, &rec) == 1) {
        if (rec.type == JREC_RUN_END) {
            JournalEnd e;
            CHECK_CMP(journal_decode_end(&rec, &e), ==, 0);
            CHECK(e.end.status == RUN_DONE && e.end.steps == 6 && e.end.peak_rss == -1);
            ends++;
        }
        if (rec.type != JREC_EVENTS) continue;
        uint32_t attempt;
        const uint8_t *p;
        size_t n;
        CHECK_CMP(journal_decode_events(&rec, &attempt, &p, &n), ==, 0);
        while (n > 0) {
            Event ev;
            size_t used;
            if (event_unpack(p, n, &ev, &used) != 0) {
                bad++;
                break;
            }
            counts[ev.kind]++;
            if (ev.kind == EV_EVAL) CHECK(ev.u.eval.tokens == -1 && isnan(ev.u.eval.time));
            if (ev.kind == EV_START) CHECK_CMP(ev.u.start.start_utc[0], ==, 0);
            if (ev.kind == EV_SAMPLE)
                CHECK_CMP(ev.u.sample.text_len, ==, (int)strlen(ev.u.sample.text));
            p += used;
            n -= used;
        }
    }
    journal_reader_close(r);
    CHECK_CMP(bad, ==, 0);
    CHECK_CMP(ends, ==, 8);
    CHECK_MSG(counts[EV_START] == 8 && counts[EV_STEP] == 8 * 3 && counts[EV_EVAL] == 8 * 2 &&
                  counts[EV_SAMPLE] == 16,
              "start %d step %d eval %d sample %d", counts[EV_START], counts[EV_STEP],
              counts[EV_EVAL], counts[EV_SAMPLE]);
}

/* The journal of tests/fixtures/v2 (events tagged with the version-2 prefix, act rows before
 * pre_max, pre_min and split) decodes: its act rows read as split train with the
 * pre-activation range unknown; today's act rows carry their field count instead. */
TEST(v2_journal) {
    char err[ABL_ERR_MAX];
    JournalReader *r = journal_reader_open(ABLATE_FIXTURES_DIR "/v2/journal", err);
    CHECK_MSG(r != NULL, "%s", err);
    if (!r) return;
    JournalRecord rec;
    int counts[EV_KIND_COUNT] = {0}, bad = 0;
    while (journal_reader_next(r, &rec) == 1) {
        if (rec.type != JREC_EVENTS) continue;
        uint32_t attempt;
        const uint8_t *p;
        size_t n;
        CHECK_CMP(journal_decode_events(&rec, &attempt, &p, &n), ==, 0);
        while (n > 0) {
            Event ev;
            size_t used;
            memset(&ev, 0x5a, sizeof ev);
            if (event_unpack(p, n, &ev, &used) != 0) {
                bad++;
                break;
            }
            counts[ev.kind]++;
            if (ev.kind == EV_ACT) {
                const ActEvent *a = &ev.u.act;
                CHECK(a->split == ACT_SPLIT_TRAIN && isnan(a->pre_max) && isnan(a->pre_min));
                CHECK(a->n_head == 4 && a->moe_experts == 1 && a->max > 0 && a->zero_frac > 0);
            }
            p += used;
            n -= used;
        }
    }
    journal_reader_close(r);
    CHECK_CMP(bad, ==, 0);
    CHECK_MSG(counts[EV_START] == 1 && counts[EV_STEP] == 2 && counts[EV_EVAL] == 2 &&
                  counts[EV_ACT] == 2 * 2 && counts[EV_SAMPLE] == 2,
              "start %d step %d eval %d act %d sample %d", counts[EV_START], counts[EV_STEP],
              counts[EV_EVAL], counts[EV_ACT], counts[EV_SAMPLE]);
    /* today's act rows: the new fields round-trip; a count beyond the declared fields (a
     * newer ablate's) is refused, not misread */
    Event a = {.kind = EV_ACT}, back;
    a.u.act.pre_max = 12.5;
    a.u.act.pre_min = -3.25;
    a.u.act.split = ACT_SPLIT_VAL;
    uint8_t buf[EVENT_PACK_MAX];
    size_t len = event_pack(&a, buf, sizeof buf), used;
    CHECK(len > 2 && buf[0] == (0x40 | EV_ACT) && buf[1] == event_schema[EV_ACT].n_fields);
    CHECK(event_unpack(buf, len, &back, &used) == 0 && used == len);
    CHECK(back.u.act.pre_max == 12.5 && back.u.act.pre_min == -3.25 &&
          back.u.act.split == ACT_SPLIT_VAL);
    buf[1]++;
    CHECK_CMP(event_unpack(buf, len, &back, &used), !=, 0);
}

/* A v2 event round-trips every field, including text with NUL and invalid UTF-8. */
TEST(roundtrip) {
    Event ev, back;
    memset(&ev, 0, sizeof ev);
    ev.kind = EV_SAMPLE;
    memcpy(ev.u.sample.text, "a\0b\xff\xc3\xa9", 6);
    ev.u.sample.text_len = 6;
    ev.u.sample.kind = SAMPLE_TEMPERATURE;
    uint8_t buf[EVENT_PACK_MAX];
    size_t n = event_pack(&ev, buf, sizeof buf), used = 0;
    CHECK_CMP(n, ==, event_packed_size(&ev));
    CHECK(event_unpack(buf, n, &back, &used) == 0 && used == n);
    CHECK(back.u.sample.text_len == 6 && memcmp(back.u.sample.text, "a\0b\xff\xc3\xa9", 6) == 0);
    memset(&ev, 0, sizeof ev);
    ev.kind = EV_EVAL;
    ev.u.eval = (EvalEvent){10, 2.5, 0.25, 640, 1.25, 0.0};
    n = event_pack(&ev, buf, sizeof buf);
    CHECK_CMP(event_unpack(buf, n, &back, &used), ==, 0);
    CHECK(back.u.eval.tokens == 640 && back.u.eval.time == 1.25 && back.u.eval.val_acc == 0.25);
    /* the same event as ablate 0.1.0 packed it: tag without 0x80, the first three fields */
    uint8_t old[] = {EV_EVAL, 20, 0, 0, 0, 0, 0, 0, 4, 0x40, 0, 0, 0, 0, 0, 0, 0xd0, 0x3f};
    CHECK(event_unpack(old, sizeof old, &back, &used) == 0 && used == sizeof old);
    CHECK(back.u.eval.step == 10 && back.u.eval.val_loss == 2.5 && back.u.eval.val_acc == 0.25);
    CHECK(back.u.eval.tokens == -1 && isnan(back.u.eval.time));
}

TEST(json) {
    Buf b = {0};
    json_string(&b, "q\"\\\n\x01\0\xff\xc3\xa9\xe2\x82", 11);
    CHECK_MSG(!strcmp(b.p, "\"q\\\"\\\\\\n\\u0001\\u0000\\udcff\xc3\xa9\\udce2\\udc82\""), "%s",
              b.p);
    CHECK(utf8_is_clean(b.p, b.len));
    buf_clear(&b);
    json_number(&b, 0.1 + 0.2); /* %.9g would print 0.3 */
    CHECK_MSG(strtod(b.p, NULL) == 0.1 + 0.2, "%s", b.p);
    buf_clear(&b);
    json_number(&b, NAN);
    CHECK_EQ_STR(b.p, "null");
    buf_clear(&b);
    Event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = EV_SAMPLE;
    memcpy(ev.u.sample.text, "x\0y\x80", 4);
    ev.u.sample.text_len = 4;
    event_json(&b, &ev);
    CHECK_MSG(strstr(b.p, "\"text\":\"x\\u0000y\\udc80\"") != NULL, "%s", b.p);
    CHECK(utf8_is_clean(b.p, b.len));
    buf_free(&b);
}

TEST(utf8) {
    Buf b = {0};
    utf8_sanitize(&b, "ok\xc3\xa9\0\xff\xed\xa0\x80z", 10);
    CHECK_MSG(
        !strcmp(b.p, "ok\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz"),
        "%s", b.p);
    CHECK(utf8_is_clean(b.p, b.len));
    CHECK(!utf8_is_clean("\xc0\x80", 2)); /* overlong NUL */
    CHECK(!utf8_is_clean("\xf4\x90\x80\x80", 4));
    CHECK(utf8_is_clean("\xf0\x9f\x98\x80", 4));
    buf_free(&b);
}

/* A build that adds a knob (at its default) keeps every scheme-2 id; scheme 1 did not. */
TEST(stable_ids) {
    Knob *t = malloc(sizeof *t * (size_t)(knob_count + 1));
    memcpy(t, knob_table, sizeof *t * (size_t)knob_count);
    t[knob_count] = (Knob){.name = "train.new_knob",
                           .type = FT_DOUBLE,
                           .offset = offsetof(RunConfig, sample.temperature),
                           .units = "1",
                           .desc = "a knob a later release adds"};
    RunConfig c;
    run_config_default(&c);
    c.train.lr = 0.005;
    c.model.n_head = 2;
    uint64_t seed = 7, other = 8;
    CHECK_CMP(run_id_hash_table(knob_table, knob_count, &c, &seed), ==,
              run_id_hash_table(t, knob_count + 1, &c, &seed));
    CHECK_CMP(run_id_hash_v1_table(knob_table, knob_count, &c, seed), !=,
              run_id_hash_v1_table(t, knob_count + 1, &c, seed));
    CHECK_CMP(run_id_hash(&c, &seed), !=, run_id_hash(&c, &other));
    CHECK_CMP(run_id_hash(&c, NULL), ==, run_id_hash_table(t, knob_count + 1, &c, NULL));
    RunConfig d = c;
    d.model.n_head = 4;
    CHECK_CMP(run_id_hash(&c, NULL), !=, run_id_hash(&d, NULL));
    free(t);
}

/* Scheme-1 ids are a frozen function of 0.1.0's knobs: every run of the 0.1.0 journal gets
 * its journaled id back from its journaled config, whatever knobs were added since (the
 * scheme-1 hash over the whole knob table changed with every new knob, and --resume of a
 * 0.1.0 sweep then found none of its runs). */
TEST(v1_ids_frozen) {
    char err[ABL_ERR_MAX];
    JournalReader *r = journal_reader_open(ABLATE_FIXTURES_DIR "/v1/journal", err);
    CHECK_MSG(r != NULL, "%s", err);
    if (!r) return;
    JournalRecord rec;
    int plans = 0;
    while (journal_reader_next(r, &rec) == 1) {
        if (rec.type != JREC_PLAN) continue;
        JournalPlan jp;
        RunConfig c;
        CHECK_CMP(journal_decode_plan(&rec, &jp), ==, 0);
        CHECK_MSG(journal_plan_config(&jp, &c, err) == 0, "%s", err);
        c.model.vocab_size = 0; /* planned ids hash the config before the data sets it */
        char id[17];
        run_id_format(run_id_hash_v1(&c, jp.seed), id);
        CHECK_MSG(!strcmp(id, jp.id), "%s: scheme-1 id %s, journaled %s", jp.name, id, jp.id);
        plans++;
    }
    journal_reader_close(r);
    CHECK_CMP(plans, ==, 8);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_schema");
}
