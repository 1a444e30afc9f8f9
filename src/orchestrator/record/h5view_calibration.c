/* The view of calibrated fixed time (train.calibrate; worker/calibrate.h): /calibration
 * (every trial timed, journal order) and the calibrated budget of each run in /runs, both
 * from the journal's CALIBRATION records (journal_calibration.h). The budget is computed
 * here with the sweep's own arithmetic (calib_budget_steps over the median of the trials),
 * so the file shows the steps each run was given. Layout: docs/hdf5-schema.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5view_internal.h"
#include "orchestrator/plan/run_id.h"
#include "util/grow.h"

int h5v_calibration_record(View *v, const JournalRecord *rec) {
    if (GROW(v->cal, v->cap_cal, (size_t)v->n_cal + 1) != 0) return -1;
    JournalCalibration *c = &v->cal[v->n_cal];
    if (journal_decode_calibration(rec, c) != 0) {
        v->st.skipped++;
        return 0;
    }
    for (int i = 0; i < v->n_cal; i++) /* a trial counts once (the sweep times it once) */
        if (v->cal[i].trial == c->trial && !strcmp(v->cal[i].group, c->group)) return 0;
    v->n_cal++;
    return 0;
}

static const H5Col calib_cols[] = {
    {"configuration", H5C_VSTR, 0, NULL, "the configuration timed: its run names without /seedN"},
    {"group", H5C_STR, RUN_ID_CHARS, NULL, "its group (the group column of /runs)"},
    {"trial", H5C_I32, 0, NULL, "trial number, 1..train.calibrate"},
    {"tokens_per_s", H5C_F64, 0, "tokens/s",
     "training throughput of the trial's timed steps (optimizer steps only)"},
    {"seconds", H5C_F64, 0, "s", "training time of the timed steps"},
    {"steps", H5C_I32, 0, "steps", "timed steps (train.calibrate_steps)"},
    {"warmup", H5C_I32, 0, "steps", "untimed steps before them"},
    {"host", H5C_VSTR, 0, NULL, "host the trial ran on"},
    {"load1", H5C_F64, 0, "1",
     "1-minute load average of that host when the trial ended (/proc/loadavg; NaN unknown)"},
    {"blas_core", H5C_STR, 32, NULL, "OpenBLAS core type the trial used"},
    {"utc", H5C_STR, EV_UTC_MAX, "UTC", "when the trial ended (ISO 8601)"},
};
#define N_CALIB_COLS ((int)(sizeof calib_cols / sizeof *calib_cols))

const H5Col h5v_calib_run_cols[H5V_CALIB_RUN_COLS] = {
    {"calibrated_steps", H5C_I64, 0, "steps",
     "calibrated fixed time: the step budget the run was given, round(calib_tokens_per_s x "
     "train.seconds / tokens per step) (0: not calibrated, or its trials are not all in)"},
    {"calib_tokens_per_s", H5C_F64, 0, "tokens/s",
     "median throughput of its configuration's calibration trials (NaN: none)"},
    {"calib_tokens_per_s_min", H5C_F64, 0, "tokens/s", "the slowest of those trials"},
    {"calib_tokens_per_s_max", H5C_F64, 0, "tokens/s", "the fastest of those trials"},
    {"calib_trials", H5C_I32, 0, NULL, "trials of its configuration in /calibration"},
};

void h5v_calibration_put(const View *v, H5Table *t, uint8_t *row, int c0, const RunConfig *cfg) {
    long steps = 0;
    double med = NAN, lo = NAN, hi = NAN;
    int n = 0;
    if (cfg && cfg->train.seconds > 0 && cfg->train.calibrate > 0) {
        char group[RUN_ID_CHARS];
        run_id_format(run_id_hash(cfg, NULL), group);
        int k = cfg->train.calibrate;
        double *x = malloc(sizeof *x * (size_t)k);
        for (int i = 0; x && i < v->n_cal; i++)
            if (!strcmp(v->cal[i].group, group) && v->cal[i].trial <= k)
                x[n++] = v->cal[i].t.tokens_per_s;
        if (n > 0) calib_summary(x, n, &med, &lo, &hi);
        if (n == k)
            steps = calib_budget_steps(med, cfg->train.seconds,
                                       (long)cfg->train.batch_size * cfg->model.context);
        free(x);
    }
    h5t_set_i64(t, row, c0, steps);
    h5t_set_f64(t, row, c0 + 1, med);
    h5t_set_f64(t, row, c0 + 2, lo);
    h5t_set_f64(t, row, c0 + 3, hi);
    h5t_set_i32(t, row, c0 + 4, n);
}

int h5v_write_calibration(View *v, hid_t file, char *err) {
    if (!v->n_cal) return 0;
    H5Table c;
    h5t_init(&c);
    int rc = -1;
    if (h5t_create(&c, file, "calibration", calib_cols, N_CALIB_COLS, 1,
                   "Calibrated fixed time (train.calibrate): every timing trial of every "
                   "configuration, in the order timed; each run's budget is in /runs "
                   "(calibrated_steps and the calib_ columns).",
                   err) != 0 ||
        h5t_schema_add(v->schema, "calibration", calib_cols, N_CALIB_COLS, err) != 0)
        goto done;
    for (int i = 0; i < v->n_cal; i++) {
        const JournalCalibration *x = &v->cal[i];
        uint8_t *row = h5t_row(&c, err);
        if (!row) goto done;
        if (h5t_set_vstr(&c, row, 0, x->config, strlen(x->config)) != 0 ||
            h5t_set_vstr(&c, row, 7, x->t.host, strlen(x->t.host)) != 0) {
            snprintf(err, ABL_ERR_MAX, "out of memory");
            goto done;
        }
        h5t_set_str(&c, row, 1, x->group, RUN_ID_CHARS);
        h5t_set_i32(&c, row, 2, x->trial);
        h5t_set_f64(&c, row, 3, x->t.tokens_per_s);
        h5t_set_f64(&c, row, 4, x->t.seconds);
        h5t_set_i32(&c, row, 5, x->t.steps);
        h5t_set_i32(&c, row, 6, x->warmup);
        h5t_set_f64(&c, row, 8, x->t.load1);
        h5t_set_str(&c, row, 9, x->t.blas_core, 32);
        h5t_set_str(&c, row, 10, x->t.utc, EV_UTC_MAX);
    }
    rc = 0;
done:;
    char e2[ABL_ERR_MAX];
    if (h5t_close(&c, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    return rc;
}

void h5v_calibration_markdown(Buf *b, const char *head) {
    buf_printf(b,
               "\n#### `/calibration`\nOnly in a sweep with `train.calibrate` (docs/spec.md, "
               "\"Calibrated fixed time\"): one row per timing trial, in the order timed.\n\n%s",
               head);
    h5v_md_rows(b, calib_cols, N_CALIB_COLS);
}
