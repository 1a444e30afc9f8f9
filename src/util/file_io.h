/* Whole-file reads and all-or-nothing writes, with errors that name the file and what it
 * is for ("data file", "vocabulary file", ...). */
#ifndef ABLATE_WORKER_FILE_IO_H
#define ABLATE_WORKER_FILE_IO_H

#include <stdio.h>

#include "util/sizes.h"

/* Reads a whole file (regular, pipe or special) into a malloc'd buffer. */
int file_read_all(const char *what, const char *path, unsigned char **out, long *len,
                  char err[ABL_ERR_MAX]);
/* The same, with the open file's fstat before the first read and after the last (either
 * may be NULL): a file replaced or rewritten while it was read shows in the difference. */
struct stat;
int file_read_all_stat(const char *what, const char *path, unsigned char **out, long *len,
                       struct stat *before, struct stat *after, char err[ABL_ERR_MAX]);

/* Writes path through write(f, ctx) into a uniquely named temporary file beside it (opened
 * for reading too), fsyncs it, renames it into place and fsyncs the directory: readers see
 * the old file or the whole new one, never a part, the result survives a crash, and several
 * processes writing the same path at once are safe (the last rename wins). -1 with a
 * message and errno set to the cause. */
int file_write_atomic(const char *what, const char *path, int (*write)(FILE *f, void *ctx),
                      void *ctx, char err[ABL_ERR_MAX]);
/* The same for the entry `name` of the directory open as dfd (all through dfd: the temporary
 * file is created new, O_EXCL, without following a symlink), created with the permission bits
 * mode (narrowed by the umask, as open(2) does; file_write_atomic gives 0666). shown names the
 * file in messages. For caches that must not be group/other-writable (util/cache_dir.h). */
int file_write_atomic_at(const char *what, int dfd, const char *name, const char *shown,
                         unsigned mode, int (*write)(FILE *f, void *ctx), void *ctx,
                         char err[ABL_ERR_MAX]);

/* Writes one record (a line) of a stream's output and flushes it: 0, or -1 with errno
 * (ENOSPC, EPIPE, ...). A record that could not be written whole is cut back off a regular
 * file, so the file ends at the last whole record; f must hold no unflushed output before. */
int file_write_record(FILE *f, const void *p, size_t n);

#endif
