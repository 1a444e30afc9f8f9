/* Calibrated fixed time (train.calibrate, worker/calibrate.h): the budget arithmetic, the
 * CALIBRATION record's codec, the knob's validation, and a calibrated time budget training
 * exactly its steps like a step budget. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "orchestrator/record/journal_calibration.h"
#include "worker/calibrate.h"
#include "worker/knobs.h"
#include "worker/train.h"
#include "test_util.h"

TEST(summary) {
    double med, lo, hi;
    const double odd[] = {1300, 1152, 1499};
    calib_summary(odd, 3, &med, &lo, &hi);
    CHECK(med == 1300 && lo == 1152 && hi == 1499);
    const double even[] = {4, 1, 3, 2};
    calib_summary(even, 4, &med, &lo, &hi);
    CHECK(med == 2.5 && lo == 1 && hi == 4);
    CHECK(even[0] == 4 && even[1] == 1); /* not sorted in place */
    calib_summary(odd, 0, &med, &lo, &hi);
    CHECK(isnan(med) && isnan(lo) && isnan(hi));
}

TEST(budget_steps) {
    /* the study's case: 1,300 tokens/s x 300 s / (2 x 128) tokens a step = 1523.4 -> 1523 */
    CHECK_CMP(calib_budget_steps(1300, 300, 256), ==, 1523);
    CHECK_CMP(calib_budget_steps(1000, 1.0, 400), ==, 3); /* 2.5 rounds away from zero */
    CHECK_CMP(calib_budget_steps(1000, 1.0, 800), ==, 1); /* 1.25 */
    CHECK_CMP(calib_budget_steps(10, 1.0, 1000), ==, 1);  /* at least one step */
    CHECK_CMP(calib_budget_steps(0, 300, 256), ==, 0);    /* no throughput: no budget */
    CHECK_CMP(calib_budget_steps(NAN, 300, 256), ==, 0);
    CHECK_CMP(calib_budget_steps(1300, 300, 0), ==, 0);
    CHECK_CMP(calib_budget_steps(1e300, 1e300, 1), ==, 0); /* beyond any step count */
}

static void config(RunConfig *c, const char *data) {
    run_config_default(c);
    model_config_preset(&c->model, "micro");
    snprintf(c->data.path, sizeof c->data.path, "%s", data);
    c->train.batch_size = 4;
    c->sample.tokens = 0;
}

TEST(validate) {
    RunConfig c;
    char err[ABL_ERR_MAX];
    config(&c, "x.txt");
    CHECK(knob_find("train.calibrate") && knob_find("train.calibrate_steps"));
    CHECK(c.train.calibrate == 0 && c.train.calibrate_steps == 20); /* off by default */
    c.train.calibrate = 3; /* with the default step budget */
    CHECK(run_config_validate(&c, err) != 0 &&
          strstr(err, "train.calibrate 3 needs a time budget"));
    c.train.steps = 0;
    c.train.seconds = 2;
    CHECK_MSG(run_config_validate(&c, err) == 0, "%s", err);
    c.train.calibrate = -1;
    CHECK(run_config_validate(&c, err) != 0 && strstr(err, "train.calibrate must be >= 0"));
    c.train.calibrate = 2;
    c.train.calibrate_steps = 0;
    CHECK(run_config_validate(&c, err) != 0 && strstr(err, "train.calibrate_steps"));
    /* the budget: by time until the sweep has calibrated it, then its steps */
    c.train.calibrate_steps = 5;
    CHECK_CMP(run_config_total_steps(&c), ==, -1);
    c.train.calibrated_steps = 42;
    CHECK_CMP(run_config_total_steps(&c), ==, 42);
}

TEST(record) {
    char path[512], err[ABL_ERR_MAX];
    test_path(path, sizeof path, "calib.journal");
    unlink(path);
    Journal *j = journal_create(path, err);
    CHECK_MSG(j != NULL, "%s", err);
    if (!j) return;
    JournalCalibration c;
    memset(&c, 0, sizeof c);
    snprintf(c.group, sizeof c.group, "0123456789abcdef");
    snprintf(c.config, sizeof c.config, "post/model.n_head=4");
    c.trial = 2;
    c.warmup = CALIB_WARMUP_STEPS;
    c.t = (CalibTrial){.tokens_per_s = 1234.5, .seconds = 0.25, .load1 = NAN, .steps = 20};
    snprintf(c.t.host, sizeof c.t.host, "node7");
    snprintf(c.t.blas_core, sizeof c.t.blas_core, "SkylakeX");
    snprintf(c.t.utc, sizeof c.t.utc, "2026-12-02T05:00:00.000Z");
    CHECK_CMP(journal_append_calibration(j, &c), ==, 0);
    CHECK_CMP(journal_close(j), ==, 0);
    JournalReader *rd = journal_reader_open(path, err);
    CHECK_MSG(rd != NULL, "%s", err);
    if (!rd) return;
    JournalRecord rec;
    JournalCalibration b;
    CHECK(journal_reader_next(rd, &rec) == 1 && rec.type == JREC_CALIBRATION &&
          rec.run == JOURNAL_NO_RUN && !strcmp(journal_type_name(rec.type), "calibration"));
    CHECK_CMP(journal_decode_calibration(&rec, &b), ==, 0);
    CHECK(!strcmp(b.group, c.group) && !strcmp(b.config, c.config) && b.trial == 2 &&
          b.warmup == CALIB_WARMUP_STEPS && b.t.tokens_per_s == 1234.5 && b.t.seconds == 0.25 &&
          isnan(b.t.load1) && b.t.steps == 20 && !strcmp(b.t.host, "node7") &&
          !strcmp(b.t.blas_core, "SkylakeX") && !strcmp(b.t.utc, c.t.utc));
    /* a truncated payload is malformed, never an overread */
    for (uint32_t n = 0; n < rec.len; n++) {
        JournalRecord cut = rec;
        cut.len = n;
        CHECK_CMP(journal_decode_calibration(&cut, &b), ==, -1);
    }
    JournalRecord other = rec;
    other.type = JREC_DECISION;
    CHECK_CMP(journal_decode_calibration(&other, &b), ==, -1);
    journal_reader_close(rd);
}

/* A calibrated time budget trains exactly its steps, whatever the clock says; a trial times
 * the configured steps and reports its throughput. */
TEST(trains_calibrated_steps) {
    const char *dir, *corpus;
    if (test_tmpdir_corpus("test_calibrate", &dir, &corpus) != 0) {
        test_failures++;
        return;
    }
    RunConfig c;
    char err[ABL_ERR_MAX];
    config(&c, corpus);
    c.train.steps = 0;
    c.train.seconds = 1e-9; /* by the clock: one step */
    c.train.calibrate = 1;
    c.train.calibrate_steps = 4;
    c.train.eval_every = 0;
    c.train.eval_tokens = 256;
    Dataset d;
    CHECK_MSG(dataset_load(&d, &c.data, c.model.context, err) == 0, "%s", err);
    CalibTrial t;
    CHECK_MSG(calib_trial(&c, 1, &d, &t, err) == 0, "%s", err);
    CHECK(t.steps == 4 && t.seconds > 0 && t.tokens_per_s > 0 && t.host[0] && t.blas_core[0] &&
          t.utc[0]);
    CHECK_CMP(fabs(t.tokens_per_s * t.seconds - 4.0 * 4 * c.model.context), <, 1e-6);
    c.train.calibrated_steps = 7;
    Trainer tr;
    CHECK_MSG(trainer_init(&tr, &c, 1, &d, err) == 0, "%s", err);
    EndEvent end;
    CHECK_CMP(trainer_run(&tr, NULL, NULL, &end), ==, RUN_DONE);
    CHECK_MSG(end.steps == 7, "trained %ld steps", end.steps);
    trainer_free(&tr);
    dataset_free(&d);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_calibrate");
}
