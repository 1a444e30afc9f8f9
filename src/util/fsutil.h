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
/* The absolute, symlink-free form of path, which need not exist: its longest existing
 * prefix is resolved (realpath) and the rest appended as written. 0, or -1 if too long. */
int fs_resolve(const char *path, char *out, size_t n);
/* 1 when input is the file target names, or lies inside the directory target names: the
 * same device and inode where both exist, else the same resolved path or a resolved path
 * under it. Guards the inputs of a command against its outputs (removal, overwrite). */
int fs_within(const char *input, const char *target);

#endif
