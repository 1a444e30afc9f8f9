/* The little JSON writing ablate needs: escaped strings and finite-or-null numbers. */
#ifndef ABLATE_WORKER_JSON_H
#define ABLATE_WORKER_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Writes s as a JSON string body (no quotes) into out; returns length. */
size_t json_escape(const char *s, char *out, size_t n);
/* Prints "s" with quotes and escapes. */
void json_print_string(FILE *f, const char *s);
/* Prints a number with full precision, or null when it is not finite. */
void json_print_number(FILE *f, double v);

#endif
