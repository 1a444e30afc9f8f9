/* Are a live view's rows all there? A live OUT.h5 (h5view_live.c) maps its metric tables
 * onto segment files; where HDF5 cannot open one (gone, truncated, too many open files) it
 * returns the fill value (run = -1) without an error, and a segment replaced under the same
 * name gives another view's rows. This reader-side check compares what an open file's tables
 * give with what the view says they hold: rows of /runs whose index is not their position,
 * rows per run against /runs rows_<table>, rows with run = -1, and each segment's view_generation
 * and row counts (/view_blocks). The Python loader makes the same checks
 * (analysis/ablate_analysis/load.py). */
#ifndef ABLATE_ORCH_VIEW_CHECK_H
#define ABLATE_ORCH_VIEW_CHECK_H

#include <hdf5.h>
#include <stdio.h>

/* Checks /runs (a live view maps it onto segments too) and the metric tables of file (opened from
 * path; segment paths are relative to its directory). Writes one line per table with unavailable
 * rows to out, naming the table, the runs and why ("prefix/steps: 2750 of 6350 rows unavailable
 * (runs 0, 3): ..."). Returns the number of such tables (0: every row is there), or -1 if the file
 * could not be checked (a line says why). A full build (no `view` attribute) has no segments: 0. */
int view_check(hid_t file, const char *path, const char *prefix, FILE *out);

/* 1 when path is a full view of a complete joined sweep (status complete or
 * complete_with_failures) built over exactly `bytes` journal bytes of n journals: a build
 * from the same journals would write the same file. 0 otherwise (also when unreadable). */
int view_complete_over(const char *path, unsigned long long bytes, int n);

#endif
