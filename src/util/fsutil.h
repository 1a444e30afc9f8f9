/* Durability helpers shared by the journal, checkpoints, weights and the HDF5 view: fsync
 * a file or directory, and the directory that holds a path (whose entry a rename changed). */
#ifndef ABLATE_ORCHESTRATOR_FSUTIL_H
#define ABLATE_ORCHESTRATOR_FSUTIL_H

#include <stddef.h>

/* The directory part of path ("." without a slash, "/" for a root entry). */
void fs_dir_of(const char *path, char *dir, size_t n);
/* fsync(2) of a file or (is_dir) a directory by path; 0 or -1 with errno. */
int fs_fsync(const char *path, int is_dir);
/* fsync of the directory holding path: makes a create or rename there durable. */
int fs_fsync_dir_of(const char *path);

/* Removes a file or a directory tree (rm -rf, symlinks not followed); 0, or -1 with errno
 * set by the first entry that could not be removed (what could be is gone). */
int fs_remove_tree(const char *path);

#endif
