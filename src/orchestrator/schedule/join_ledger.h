/* A replicate: sweep joined under another rule (schedule/join.h, adaptive.c): the refusal
 * names the key that differs, at its place in this process's spec, and what the sweep's rule
 * has spent so far (its alpha ledger: journal_alpha_spent over the decisions every joined
 * process journaled, each once). join.c's own comparison of join/replicate stays the guard;
 * this only says more, before it. */
#ifndef ABLATE_ORCH_JOIN_LEDGER_H
#define ABLATE_ORCH_JOIN_LEDGER_H

#include "orchestrator/plan/spec.h"

/* rule: this process's rule text (join/replicate's format, adaptive.c's rule_text), or NULL
 * for a sweep without a replicate: section. 0 when the sweep has no join/replicate yet or
 * the same one; -1 with a one-line "FILE:LINE:COL: KEY: cannot join ..." when it differs. */
int join_ledger_check(const char *out_path, const Spec *spec, const char *rule,
                      char err[ABL_ERR_MAX]);

#endif
