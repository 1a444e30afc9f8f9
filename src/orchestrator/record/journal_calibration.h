/* The journal record of calibrated fixed time (train.calibrate; worker/calibrate.h), framed
 * like every other record (journal.h), read by resume (trials already timed are never
 * timed again) and by the view (/calibration, the calibrated columns of /runs). Payload
 * (little-endian, "str" = u32 length + bytes):
 *   CALIBRATION (type 12, run JOURNAL_NO_RUN, one per trial, synced when written)
 *              str group (16 hex digits: the configuration's hash without the seed,
 *              run_id.h, as /runs' group), str configuration (the run name without its
 *              seed segment), u32 trial (1-based), u32 steps (timed), u32 warmup,
 *              f64 tokens_per_s, f64 seconds, f64 load1, str host, str blas_core, str utc
 * A group's trials are its records with distinct trial numbers (the first of each). */
#ifndef ABLATE_ORCH_JOURNAL_CALIBRATION_H
#define ABLATE_ORCH_JOURNAL_CALIBRATION_H

#include "journal.h"
#include "worker/calibrate.h"

#define JOURNAL_CONFIG_MAX 256

typedef struct {
    char group[RUN_ID_CHARS];
    char config[JOURNAL_CONFIG_MAX];
    int trial, warmup;
    CalibTrial t;
} JournalCalibration;

int journal_append_calibration(Journal *j, const JournalCalibration *c);
/* 0, or -1 if malformed (or not a CALIBRATION record). */
int journal_decode_calibration(const JournalRecord *rec, JournalCalibration *c);

#endif
