/* Small pieces the subcommands share. */
#ifndef ABLATE_CLI_UTIL_H
#define ABLATE_CLI_UTIL_H

#include <stdio.h>

/* The kinds of numeric option values. */
typedef enum {
    CLI_UINT,    /* decimal digits, 0 to 2^64-1 (out: unsigned long long) */
    CLI_SECONDS, /* a finite decimal number > 0 (out: double) */
    CLI_BYTES    /* a number > 0 with an optional K, M, G or T suffix (powers of 1024, an
                    optional "iB" or "B" after it) (out: double) */
} CliNumber;

/* The one parser of numeric command-line values: the whole text must be a number of that
 * kind. On error prints "ablate CMD: OPT expects ..., got 'TEXT'" on stderr and returns -1. */
int cli_number(const char *opt, const char *text, CliNumber kind, void *out);
/* At the end of a command that printed its result on stdout: flushes it and checks that
 * every write succeeded. 0, or -1 after "ablate CMD: cannot write the output: CAUSE" on
 * stderr (a full disk, /dev/full, a closed pipe with SIGPIPE ignored): the caller exits 1,
 * never 0 after output that was lost. */
int cli_output_ok(void);
/* The knob table with defaults and help, for --help. */
void cli_print_knobs(FILE *f);

#endif
