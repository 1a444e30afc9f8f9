/* The journal record of a tune: sweep's choices (docs/spec.md, "tune"), framed like every
 * other record (journal.h), read by resume (a choice already journaled is not journaled
 * again) and by the view (/tuning). Payload (little-endian, "str" = u32 length + bytes):
 *   TUNE (type 13, run JOURNAL_NO_RUN, one per configuration once its value is chosen,
 *         synced before any of its comparison runs is handed out)
 *         u32 config (the configuration's index in plan order), str configuration (its run
 *         names without their last segment), u32 n_knobs, str knob x n_knobs,
 *         u32 n_rungs, f64 fraction x n_rungs (of the full budget, the last 1),
 *         u32 n_candidates, then per candidate: str value x n_knobs, u32 seeds (tuning
 *         seeds with a result), u32 rung (the last rung it reached), f64 metric (its mean
 *         validation loss over those seeds at that rung; +inf when a run diverged),
 *         then u32 chosen (a candidate index; 0xffffffff in a record deciding a rung before
 *         the last),
 *         then (absent in a record written before successive halving: it decided its one rung
 *         with every candidate at the full budget) u32 decided (the rung this record decides:
 *         n_rungs - 1 is the choice, a smaller one which candidates continue), and per
 *         candidate u32 m, f64 x m (its metric at rungs 0..m-1; NaN at a rung it did not
 *         reach).
 * Successive halving journals one record per rung of a configuration, each synced before
 * any promoted run continues; a candidate's rung is the last rung it trains to as far as
 * decided (a promoted one's is the next) and its metric is the one at the last rung it has
 * a result for.
 * The choice is a function of the tuning runs' journaled results alone, so every session
 * and every joined process that makes it makes the same one. */
#ifndef ABLATE_ORCH_JOURNAL_TUNE_H
#define ABLATE_ORCH_JOURNAL_TUNE_H

#include "journal.h"
#include "journal_calibration.h" /* JOURNAL_CONFIG_MAX */
#include "orchestrator/plan/spec_tune.h"

#define JOURNAL_TUNE_TEXT_MAX SPEC_TUNE_TEXT_MAX /* a knob name or a value */

typedef struct {
    int config;
    char name[JOURNAL_CONFIG_MAX];
    int n_knobs;
    char knob[SPEC_TUNE_MAX_KNOBS][JOURNAL_TUNE_TEXT_MAX];
    int n_rungs;
    double frac[SPEC_TUNE_MAX_RUNGS];
    int n_cand;
    char value[SPEC_TUNE_MAX_CANDIDATES][SPEC_TUNE_MAX_KNOBS][JOURNAL_TUNE_TEXT_MAX];
    int seeds[SPEC_TUNE_MAX_CANDIDATES];
    int rung[SPEC_TUNE_MAX_CANDIDATES];
    double metric[SPEC_TUNE_MAX_CANDIDATES];
    int chosen;  /* -1: a record deciding a rung before the last */
    int decided; /* the rung this record decides */
    double at[SPEC_TUNE_MAX_CANDIDATES][SPEC_TUNE_MAX_RUNGS]; /* metric per rung, NaN: none */
} JournalTune;

int journal_append_tune(Journal *j, const JournalTune *t);
/* 0, or -1 if malformed (or not a TUNE record). */
int journal_decode_tune(const JournalRecord *rec, JournalTune *t);
/* Do two records say the same (the configuration, its candidates, results and choice)? */
int journal_tune_same(const JournalTune *a, const JournalTune *b);

#endif
