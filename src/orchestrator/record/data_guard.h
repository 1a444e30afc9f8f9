/* A sweep never mixes data silently. The identity of every data source of the
 * plan (worker/data_identity.h: tokenizer, vocabulary digest, val_fraction, SHA-256 and size
 * of the bytes) is journaled in a DATA record when the sweep first sees it; a --resume whose
 * data differs from the journal's, and a --join process whose data differs from the one the
 * first joined process recorded in OUT.h5.d/join/data, is refused with one line naming both,
 * before it writes anything (exit 2). --accept-data-change accepts the change explicitly:
 * the new identity is journaled, unfinished runs on that source restart from step 0 (no run
 * trains partly on each), and the view puts runs trained on different data in different
 * groups. Each worker checks the data it loaded against the sweep's before it trains
 * (RunAssignment.data_sha256), so a copy that differs on another node, or a file
 * overwritten mid-session, fails that run instead of mixing it in.
 *
 * A source is (data.path as written, tokenizer, val_fraction, data.vocab_size). */
#ifndef ABLATE_ORCHESTRATOR_DATA_GUARD_H
#define ABLATE_ORCHESTRATOR_DATA_GUARD_H

#include "journal.h"
#include "worker/data_identity.h"

typedef struct {
    DataIdentity *now; /* the plan's sources, as loaded by this process */
    int n;
    uint8_t *journaled; /* now[i] is already the journal's identity for its source */
    uint8_t *changed;   /* now[i] differs from the journal's and the change was accepted */
    DataIdentity *was;  /* the journal's identity, where changed */
} DataGuard;

/* The check of a batch job (slurm/submit's --expect-data): each expected "SHA256=PATH" must be
 * the identity of the plan's source at PATH as this process loaded it, so the sweep trains
 * on exactly the bytes a check made before the job started saw (a file replaced between that
 * check and this read is caught here, and the workers check theirs against this). 0, or -1
 * with one line naming the file and both digests (nothing is written). */
int data_guard_expect(const DataIdentity *ids, int n, const char *const *expect, int n_expect,
                      char err[ABL_ERR_MAX]);
/* Takes (owns) the identities of the plan's sources as planning loaded them
 * (plan_cost_compute_ids). 0, or -1 when out of memory. */
int data_guard_begin(DataGuard *g, DataIdentity *ids, int n, char err[ABL_ERR_MAX]);
/* Compares with the identities a journal recorded (resume_read: ResumeState.data). A
 * difference is refused (-1, one line naming both) unless accept; accepted, it is reported
 * on stderr and noted for data_guard_record and data_guard_changed. */
int data_guard_compare(DataGuard *g, const DataIdentity *journaled, int n, int accept,
                       char err[ABL_ERR_MAX]);
/* A shared sweep (--join): compares with OUT.h5.d/join/data when another process wrote it
 * (-1 refused, as above). Call before joining, so a refused process leaves no file. */
int data_guard_shared_check(DataGuard *g, const char *out_path, int accept, char err[ABL_ERR_MAX]);
/* Journals a DATA record per source not yet journaled (or changed); with join_out, writes
 * OUT.h5.d/join/data if no process did (first writer wins, atomically). 0, or -1 when the
 * journal failed (journal_error) or the join file lost a race to different data (err). */
int data_guard_record(DataGuard *g, Journal *j, const char *join_out, int accept,
                      char err[ABL_ERR_MAX]);
/* The identity of a run's source (NULL if unknown), and whether it changed (accepted). */
const DataIdentity *data_guard_of(const DataGuard *g, const DataConfig *dc);
int data_guard_changed(const DataGuard *g, const DataConfig *dc);
void data_guard_free(DataGuard *g);

/* DATA record payload <-> identity (a key/value block like HEADER's). */
int data_guard_append(Journal *j, const DataIdentity *id);
int data_guard_decode(const JournalRecord *rec, DataIdentity *id);

#endif
