/* The journal records of a replicate: sweep (docs/spec.md, "replicate"), framed like every other
 * record (journal.h) and read by resume (the decisions already made) and by the view (/contrasts,
 * /decisions and the rule's root attributes). Payloads (little-endian, "str" = u32 length +
 * bytes):
 *   REPLICATE  (type 10, run JOURNAL_NO_RUN, one per session, written before any run
 *              starts) f64 alpha, f64 delta, f64 core_hours (0: no budget), u32 min,
 *              u32 max, u32 n_looks, u32 looks[n_looks], u32 n_contrasts, then per
 *              contrast: str configuration, str baseline, str pairing ("seed"); then
 *              u32 split (ContrastSplit: 0 validation, 1 test; absent in records written
 *              before it: validation); then, only for a factorial family (contrasts:
 *              main_effects or interactions), u32 version (1) and per contrast: u32 kind
 *              (ContrastKind: 0 vs_base, 1 main, 2 interaction), str factor, str level,
 *              str base_level, str factor2, str level2, str base_level2 ("" where none).
 *              A record without that part has every contrast vs_base. Last, u32
 *              rule_version (SEQ_RULE_VERSION of the rule the sweep's looks use; absent
 *              in records written before it: 1).
 *   DECISION   (type 11, run JOURNAL_NO_RUN) one look of one contrast, or its end: u32
 *              contrast, i32 look (index into looks; -1: ended before its first look),
 *              u32 n (pairs used), f64 diff, f64 sd, f64 lo, f64 hi, f64 level (the
 *              two-sided level of the interval), u32 verdict (SeqVerdict), str note (the
 *              pairs the look skipped, "dropped: RUN why; ...", or why a contrast ended
 *              without the rule: "budget", "unstable: K of MAX seeds dropped, ...", or "")
 * A contrast's decisions come in look order; its last one is its verdict. */
#ifndef ABLATE_ORCH_JOURNAL_REPLICATE_H
#define ABLATE_ORCH_JOURNAL_REPLICATE_H

#include "journal.h"
#include "orchestrator/plan/spec.h"

#define JOURNAL_NOTE_MAX 128

typedef struct {
    double alpha, delta, core_hours;
    int min, max, n_looks;
    int looks[SPEC_MAX_LOOKS];
    int n_contrasts;
    int split;        /* ContrastSplit: the loss the verdicts compare */
    int rule_version; /* the sequential rule's version (sequential.h; 1 in records without;
                         written: 0 means SEQ_RULE_VERSION) */
} JournalReplicate;

typedef struct {
    int contrast, look, n;
    double diff, sd, lo, hi, level;
    int verdict; /* SeqVerdict */
    char note[JOURNAL_NOTE_MAX];
} JournalDecision;

/* What a factorial contrast compares: its kind, and per factor (0, and 1 for an
 * interaction) the factor's name, the level and the base level ("" / NULL where none). */
typedef struct {
    int kind; /* ContrastKind (plan/contrast.h); 0 vs_base */
    const char *factor[2], *level[2], *base_level[2];
    size_t factor_len[2], level_len[2], base_level_len[2];
} JournalContrastFactors;

/* names[j] / baselines[j]: contrast j's configuration (or factor level) and what it is
 * compared against. factors: NULL for vs_base (the record's first form), else one per
 * contrast (the factorial part). */
int journal_append_replicate(Journal *j, const JournalReplicate *r, const char *const *names,
                             const char *const *baselines, const JournalContrastFactors *factors);
int journal_append_decision(Journal *j, const JournalDecision *d);

/* 0, or -1 if malformed. The contrast strings of a REPLICATE record are read with
 * journal_replicate_contrast (each NULL-free, not NUL-terminated). */
int journal_decode_replicate(const JournalRecord *rec, JournalReplicate *r);
/* Contrast k's configuration, baseline and pairing strings; 0 or -1. */
int journal_replicate_contrast(const JournalRecord *rec, int k, const char **config,
                               size_t *config_len, const char **baseline, size_t *baseline_len,
                               const char **pairing, size_t *pairing_len);
/* Contrast k's kind and factor levels (every string NUL-free, not NUL-terminated; length 0
 * where none): kind 0 and empty strings in a record without the factorial part. 0 or -1. */
int journal_replicate_factors(const JournalRecord *rec, int k, JournalContrastFactors *f);
int journal_decode_decision(const JournalRecord *rec, JournalDecision *d);

/* The alpha ledger of a sweep file: what the rule has spent over the looks it took, from its
 * decisions (each once). A look is a decision with an interval (look >= 0, finite level and
 * bounds) other than the budget's end, which restates the last look: it spent d->level for
 * its contrast, so the family has spent the sum over every contrast's looks (at most
 * replicate.alpha under one rule). *looks: how many. */
double journal_alpha_spent(const JournalDecision *d, int n, int *looks);

#endif
