/* The view of a joined sweep (schedule/join.h for the processes' protocol), the record's
 * side: the journals it has, and its builds, one process at a time (join/view.lock). */
#ifndef ABLATE_ORCH_JOINED_VIEW_H
#define ABLATE_ORCH_JOINED_VIEW_H

#include <stdint.h>

#include "h5view.h"
#include "util/sizes.h"

/* Is out_path a joined sweep (OUT.h5.d/join exists)? */
int join_exists(const char *out_path);
/* The journals of a joined sweep, sorted by name (oldest first): malloc'd array of malloc'd
 * paths. 0 with *n >= 0, or -1 with a message. */
int join_list_journals(const char *out_path, char ***paths, int *n, char err[ABL_ERR_MAX]);
void join_free_list(char **paths, int n);
/* Builds OUT.h5 from every journal of the joined sweep (h5view_build_many), one process at a
 * time (join/view.lock). own: a journal still being appended, read up to limit (NULL: none);
 * a periodic view (own, not last) is not built while another process builds one.
 * last: own is closed (its process has ended the sweep); the view is then built only when no
 * other process is still running (the last to end builds it, once) and does not already
 * cover every journal byte. `ablate view` (own NULL) always builds. */
int join_build_view(const char *out_path, const char *own, uint64_t limit, int last,
                    H5ViewStats *st, char err[ABL_ERR_MAX]);
/* How long a build (other than a periodic one, which tries once and lets the holder's build
 * stand) waits for join/view.lock before it goes on without it: a process stopped or hung
 * while it builds holds the lock. Tests: join_set_view_lock_wait (<= 0 restores it). */
#define JOIN_VIEW_LOCK_WAIT 10.0
void join_set_view_lock_wait(double seconds);
/* join/view.lock, held (flock) until the returned descriptor is closed; -1 when it cannot be
 * opened. Waits at most `wait` seconds (0: one try; < 0: the wait above); *busy: another
 * process still held it (the descriptor is then returned unlocked). */
int join_view_lock(const char *out_path, double wait, int *busy);

#endif
