/* Where and how an attempt of a run ran, for the end event: UTC start and end, the peak
 * resident memory of the attempt, and the SLURM job it ran in (from the environment
 * SLURM gives every task), and the BLAS core and thread count the attempt used. */
#ifndef ABLATE_WORKER_PROVENANCE_H
#define ABLATE_WORKER_PROVENANCE_H

#include <stddef.h>

#include "events.h"

/* Records the start time (UTC) into utc and resets the process's peak-RSS counter, so the
 * peak read at the end is this attempt's (Linux /proc/self/clear_refs; elsewhere the
 * process's lifetime peak is reported). */
void provenance_attempt_begin(char *utc, size_t n);
/* Fills end_utc, attempt_start_utc (from start_utc), peak_rss, the slurm_* fields and
 * attempt_blas_core/threads. */
void provenance_fill_end(EndEvent *e, const char *start_utc);
/* Peak resident set size of the process in bytes since the last reset; -1 if unknown. */
long provenance_peak_rss(void);

#endif
