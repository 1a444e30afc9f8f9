/* The start-up check of the instruction sets a binary was built for (cmake ABLATE_ARCH).
 *
 * Linked into a program (ablate), isa_check.c runs before main, as a constructor: when the
 * CPU (or the operating system, for AVX and AVX-512 state) lacks an instruction set the
 * build may use, the program writes one line to stderr naming it and the build's level,
 * and exits 4 ("could not start", as the SLURM scripts say it), instead of dying with
 * SIGILL (status 132, a launcher's "signal 4") somewhere in a run. A level of "none" (no
 * -march) or a non-x86 machine checks nothing. */
#ifndef ABLATE_CLI_ISA_CHECK_H
#define ABLATE_CLI_ISA_CHECK_H

#define ISA_CHECK_EXIT 4

/* isa_needs.c, compiled with the build's flags: the -march value ("x86-64-v3", "native",
 * "none") and the instruction sets it enables, each name preceded by a space. */
extern const char ablate_isa_arch[];
extern const char ablate_isa_needs[];

/* The sets of `needs` (a list as above) this CPU lacks, written into `out` as "AVX512F,
 * AVX512BW"; returns how many. Compiled for the baseline: safe on any x86-64 CPU. */
int isa_missing(const char *needs, char *out, unsigned long out_size);

#endif
