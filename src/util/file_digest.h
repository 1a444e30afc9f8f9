/* The SHA-256 of a data file, computed over the bytes a reader actually parsed, and cached
 * on disk under the file's identity (device, inode, size, mtime, ctime): a multi-GB token
 * file is hashed once, and every later load (each resume, each of 1,000 array tasks on a
 * shared file system) only stats it. Any write to the file changes its mtime and ctime
 * (ctime cannot be set back by a user), a replacement changes its inode: either misses the
 * cache and the new bytes are hashed. A file that changes while it is being read is hashed
 * as read and not cached, and so is one changed in the last FILE_DIGEST_RACY_SECONDS (a
 * same-size rewrite within one tick of the file system's clock keeps mtime and ctime). */
#ifndef ABLATE_UTIL_FILE_DIGEST_H
#define ABLATE_UTIL_FILE_DIGEST_H

#include <stddef.h>

#include "model/config.h"

#define FILE_DIGEST_SUBDIR       "digests"
#define FILE_DIGEST_RACY_SECONDS 2

/* Reads path whole (file_read_all) and sets hex to the SHA-256 of the bytes read: from the
 * cache in cache_dir/digests/ when the file's identity did not change while it was read,
 * else hashed from the buffer (and cached). cache_dir NULL or "": always hashed, nothing
 * cached. *cached (may be NULL) says whether the cache answered. */
int file_read_digest(const char *what, const char *path, const char *cache_dir, unsigned char **out,
                     long *len, char hex[65], int *cached, char err[ABL_ERR_MAX]);

/* The check alone: the digest of path and its size, from the cache by one stat when the
 * file is known, else by hashing the file (and caching it). 0, or -1 with a message. */
int file_digest(const char *path, const char *cache_dir, char hex[65], long long *size, int *cached,
                char err[ABL_ERR_MAX]);

#endif
