/* Small pieces the subcommands share. */
#ifndef ABLATE_CLI_UTIL_H
#define ABLATE_CLI_UTIL_H

#include <stdio.h>

/* Strict decimal parse of a non-negative integer. */
int cli_parse_u64(const char *s, unsigned long long *out);
/* The knob table with defaults and help, for --help. */
void cli_print_knobs(FILE *f);

#endif
