/* The one JSON writer of ablate (events, configs, plans, inspect). Strings are escaped so
 * the output is always valid UTF-8 whatever the bytes: valid UTF-8 passes through, control
 * characters and NUL become \u00XX, and each byte that is not part of valid UTF-8 becomes
 * \udcXX (XX = the byte), Python's "surrogateescape" convention: a reader recovers the
 * exact bytes with s.encode("utf-8", "surrogateescape"). Numbers are printed with the
 * fewest digits that read back to the same double (so nothing is lost), non-finite as null. */
#ifndef ABLATE_WORKER_JSON_H
#define ABLATE_WORKER_JSON_H

#include <stddef.h>
#include <stdio.h>

#include "buf.h"

/* Appends s[0..n) as a quoted JSON string. */
void json_string(Buf *b, const char *s, size_t n);
/* Appends a number (integers below 1e15 without exponent), or null. */
void json_number(Buf *b, double v);
/* The shortest "%.*g" text of v that strtod reads back as v; returns its length. */
int json_format_double(char *buf, size_t n, double v);

/* s for a terminal or a text table: the escapes of json_string (control characters as
 * \u00XX, \n \t \r, bytes outside UTF-8 as \udcXX) and C1 controls (U+0080 to U+009F) as
 * \u00XX too, unquoted and with " and \ as they are, so a value (a grid value, a run name,
 * a sample) cannot move the cursor or retitle the terminal. Written to out (cut to n - 1 bytes);
 * returns out. Every command that prints a user's string or a run's text to a terminal uses this
 * (plan, inspect, run's progress, train's output). */
const char *text_escape(const char *s, char *out, size_t n);
/* The same for s[0..n) (NUL bytes shown as \u0000), appended to b; keep_lines leaves \n
 * and \t as they are, for text printed as lines (a sample). */
void text_escape_buf(Buf *b, const char *s, size_t n, int keep_lines);

/* The same, written to a FILE. */
void json_print_string(FILE *f, const char *s);
void json_print_number(FILE *f, double v);

#endif
