/* The SHA-256 of a data file, computed over the bytes a reader actually parsed, and cached
 * on disk under the file's identity (device, inode, size, mtime, ctime): a multi-GB token
 * file is hashed once, and every later load (each resume, each of 1,000 array tasks on a
 * shared file system) only stats it. Any write to the file changes its mtime and ctime
 * (ctime cannot be set back by a user), a replacement changes its inode: either misses the
 * cache and the new bytes are hashed. A file that changes while it is being read is hashed
 * as read and not cached, and so is one changed in the last FILE_DIGEST_RACY_SECONDS (a
 * same-size rewrite within one tick of the file system's clock keeps mtime and ctime).
 *
 * The digest a run records is the cache's word for its bytes, so an entry is trusted only as
 * far as who could have written it (util/cache_dir.h): the cache directory and its digests/
 * subdirectory must belong to this user or root and not be group/other-writable (else the
 * cache is not used, one warning), and so must each entry (opened without following a
 * symlink). New entries are written whole (file_write_atomic_at) with CACHE_FILE_MODE, never
 * group/other-writable whatever the umask. An entry names, inside it, the identity of the file
 * it is for, and ends with a check line (the SHA-256 of the lines above): an entry copied or
 * renamed from another file's name, a damaged one, one in the old format (the bare digest) or
 * anything else is not used: one warning naming it (once per process), the file is hashed and
 * the entry replaced. A check line is no secret: whoever can write as you or root can still
 * forge a well-formed entry. The GPT-2 token cache therefore never takes the text's digest
 * from here on trust (it hashes the text it tokenizes, tokenizer/token_cache.h): such a forger
 * can change the recorded digest of char, byte and token-file data, never the tokens a run
 * trains on. */
#ifndef ABLATE_UTIL_FILE_DIGEST_H
#define ABLATE_UTIL_FILE_DIGEST_H

#include <stddef.h>

#include "util/sizes.h"

#define FILE_DIGEST_SUBDIR       "digests"
#define FILE_DIGEST_RACY_SECONDS 2
/* The first line of an entry: "file <identity>", "sha256 <hex>", "check <hex>" follow. */
#define FILE_DIGEST_TAG "ablate file digest 1\n"

/* Reads path whole (file_read_all) and sets hex to the SHA-256 of the bytes read: from the
 * cache in cache_dir/digests/ when the file's identity did not change while it was read and
 * its entry passes the checks above, else hashed from the buffer (and cached). cache_dir NULL
 * or "": always hashed, nothing cached. *cached (may be NULL) says whether the cache answered.
 * A cache that cannot be used is a warning on stderr (once per process), never an error. */
int file_read_digest(const char *what, const char *path, const char *cache_dir, unsigned char **out,
                     long *len, char hex[65], int *cached, char err[ABL_ERR_MAX]);

/* The check alone: the digest of path and its size, from the cache by one stat when the
 * file is known, else by hashing the file (and caching it). 0, or -1 with a message. */
int file_digest(const char *path, const char *cache_dir, char hex[65], long long *size, int *cached,
                char err[ABL_ERR_MAX]);

#endif
