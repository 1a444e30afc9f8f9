/* The checks shared by the caches whose entries decide what a run trains on or records: the
 * GPT-2 token cache (tokenizer/token_cache.h) and the data digest cache (util/file_digest.h),
 * both under one cache directory ($ABLATE_CACHE_DIR, ...).
 *
 * An entry is only as trustworthy as whoever could have written it, so, as ssh treats its key
 * files: a cache directory, and each file read from it, must belong to this user or to root and
 * have no group/other write bit (with a default ACL the group bits are the ACL's mask, so a
 * group entry with write shows too). Everything below the directory named by the user is
 * opened through the opened directory (openat) without following a symlink, and the checks are
 * made on what was opened (fstat), not on a name that could be swapped meanwhile. What the
 * caches create is CACHE_DIR_MODE / CACHE_FILE_MODE: never group/other-writable, whatever the
 * umask (a umask such as 077 narrows them further; it never widens them). */
#ifndef ABLATE_UTIL_CACHE_DIR_H
#define ABLATE_UTIL_CACHE_DIR_H

#include <stddef.h>

#define CACHE_DIR_ENV   "ABLATE_CACHE_DIR"
#define CACHE_FILE_MODE 0644
#define CACHE_DIR_MODE  0755
/* Room for a warning that names a directory (up to 2 KB) twice and a file in it. */
#define CACHE_WHY_MAX 6144

struct stat;

/* "ablate: warning: <message>" on stderr, each distinct message once per process: a sweep's
 * worker loads its data for every run, and what is refused once is refused each time. */
void cache_warn_once(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Why a file or directory with this stat is not trusted ("belongs to uid N, not to you (uid
 * M)", "is writable by group or others (mode 0775)"), or "" when it may be. */
void cache_untrusted(const struct stat *st, char *why, size_t cap);

/* Opens the cache directory dir, creating it and its missing parents (CACHE_DIR_MODE), and then
 * sub inside it (NULL: none), created if missing and opened without following a symlink. Both
 * must be trusted. Returns the open directory of the last (O_DIRECTORY, for the *at calls), or
 * -1 after one warning (once per process) naming the directory, what is wrong with it and what
 * to do: the caller then works without the cache. */
int cache_dir_open(const char *dir, const char *sub);

/* Opens the entry `name` of the open cache directory dfd for reading, without following a
 * symlink, and checks the file opened: a regular file, trusted. Returns the descriptor (its
 * fstat in *st, may be NULL), or -1 with errno ENOENT and why "" when there is no such entry,
 * else with what is wrong in why ("is a symbolic link", "is writable by group or others ..."),
 * for a message "<entry> <why>". */
int cache_entry_open(int dfd, const char *name, struct stat *st, char *why, size_t cap);

#endif
