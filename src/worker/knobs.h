/* The table of user-visible knobs: dotted name -> field of RunConfig, with type, allowed
 * values, units and help: FieldDesc rows (field.h). Spec parsing, --set, JSON/HDF5 output of
 * resolved configs, the run id hash and the runs table all walk this one table, so a new knob is
 * one line here. */
#ifndef ABLATE_WORKER_KNOBS_H
#define ABLATE_WORKER_KNOBS_H

#include <stddef.h>

#include "util/buf.h"
#include "field.h"
#include "run_config.h"

/* A knob is a field of RunConfig (offset into it): FT_INT, FT_LONG, FT_DOUBLE, FT_BOOL,
 * FT_ENUM (names, n of them) or FT_STR (a buffer of n bytes); desc is its help text. */
typedef FieldDesc Knob;

extern const Knob knob_table[];
extern const int knob_count;

const Knob *knob_find(const char *name);
/* Levenshtein distance (99 for words over 63 characters), for "did you mean" messages. */
int knob_edit_distance(const char *a, const char *b);
/* The closest known name (edit distance), for "did you mean" messages; NULL if none close. */
const char *knob_suggest(const char *name);
/* Parses text as the knob's type and stores it; -1 with a message (not naming a file). */
int knob_set(RunConfig *c, const Knob *k, const char *text, char err[ABL_ERR_MAX]);
/* Applies "key=value"; the key may be given with or without a leading "base.". */
int knob_assign(RunConfig *c, const char *assignment, char err[ABL_ERR_MAX]);
/* Canonical text of a knob's value (shortest round-trip for doubles); returns length. */
int knob_format(const RunConfig *c, const Knob *k, char *buf, size_t n);
/* A knob's default as `ablate train --help` and docs/spec.md show it (one formatter for
 * both): knob_format of run_config_default's value, an empty text as "" and a newline as
 * "\n". Returns the length. */
int knob_default_text(const Knob *k, char *buf, size_t n);
/* What a knob takes, as --help and docs/spec.md name it: an enum's choices joined by sep
 * ("relu|gelu|..."), else "integer", "number", "true/false" or "text". Returns the length. */
int knob_kind_text(const Knob *k, const char *sep, char *buf, size_t n);
/* Does a knob hold the same value in two configs? */
int knob_equal(const RunConfig *a, const RunConfig *b, const Knob *k);
/* Writes the whole resolved config as one JSON object {"model.context":16,...}. */
void knob_config_json_buf(const RunConfig *c, Buf *b);
/* The same into buf[0..n) (cut short if it does not fit); returns the length. */
int knob_config_json(const RunConfig *c, char *buf, size_t n);

#endif
