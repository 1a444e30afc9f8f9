/* Run ids and configuration groups.
 *
 * Id scheme 2 (this release): FNV-1a 64 over "name=value\n" for every knob whose value
 * differs from its default (run_config_default), in knob_table order, values as
 * knob_format writes them, then "seed=N\n"; printed as 16 lowercase hex digits. So an id
 * depends only on what the run computes: adding a knob (at its default) changes no id.
 * The group of a run is the same hash without the seed line: the seeds of one
 * configuration share it.
 *
 * Id scheme 1 (ablate 0.1.0) hashed every knob, so each new knob changed every id. Journals
 * it wrote keep their ids: on --resume, run_id_adopt (record/resume.h) finds each journaled run
 * whose id no planned run has under scheme 2 and gives the planned run with that scheme-1 id the
 * old id. The journal HEADER records "id_scheme". */
#ifndef ABLATE_ORCHESTRATOR_RUN_ID_H
#define ABLATE_ORCHESTRATOR_RUN_ID_H

#include <stddef.h>
#include <stdint.h>

#include "util/hash.h"
#include "worker/knobs.h"
#include "plan.h"

#define RUN_ID_SCHEME 2

/* Scheme-2 hash over a knob table (knob_table in ablate; tests pass others). */
uint64_t run_id_hash_table(const Knob *table, int n, const RunConfig *c, const uint64_t *seed);
/* Scheme 2 with knob_table; seed NULL = the group hash. */
uint64_t run_id_hash(const RunConfig *c, const uint64_t *seed);
/* Scheme 2 for a comparison run of a tune: sweep: each knob of tuned (n_tuned of them)
 * hashes as "name=tuned\n" whatever its value, the others as run_id_hash does. */
uint64_t run_id_hash_tuned(const RunConfig *c, const Knob *const *tuned, int n_tuned,
                           const uint64_t *seed);
/* Scheme 1: every knob of the table. */
uint64_t run_id_hash_v1_table(const Knob *table, int n, const RunConfig *c, uint64_t seed);
uint64_t run_id_hash_v1(const RunConfig *c, uint64_t seed);
/* 16 hex digits + NUL. */
void run_id_format(uint64_t h, char out[RUN_ID_CHARS]);

#endif
