/* Keeps OUT.h5 current while a sweep runs, without stalling rank 0: views are built by a
 * background thread from the journal's flushed prefix (h5view_build_upto), so rank 0 goes
 * on receiving and journaling events while a build runs. Requests made during a build are
 * merged into one follow-up build of everything flushed by then.
 *
 * All HDF5 calls of the sweep happen on this thread (the library need not be built
 * thread-safe): rank 0 builds its views only through view_updater_request/_sync. */
#ifndef ABLATE_ORCH_VIEW_UPDATER_H
#define ABLATE_ORCH_VIEW_UPDATER_H

#include <stdint.h>

#include "h5view.h"

typedef struct ViewUpdater ViewUpdater;

/* Starts the thread; NULL with a message if it cannot. joined: the journal is one process's
 * of a joined sweep, and the view covers them all (join_build_view). */
ViewUpdater *view_updater_start(const char *journal_path, const char *out_path, int joined,
                                char err[ABL_ERR_MAX]);
/* What a request asks for: a live, incremental view (h5live_update), whose cost follows what
 * is new; a full build (a self-contained file: the first and the last view of a sweep); or
 * a joined process's last view, asked once its journal is closed: built only by the last
 * process of the sweep to end (join_build_view). */
enum { VIEW_LIVE = 0, VIEW_FULL = 1, VIEW_LAST = 2 };
/* Asks for a view of the journal's first `flushed` bytes (kind: VIEW_*); returns at once. */
void view_updater_request(ViewUpdater *u, uint64_t flushed, int kind);
/* Is a build running or waiting? */
int view_updater_busy(ViewUpdater *u);
/* Waits until every requested build is done. 0, or -1 with the last build's error (the
 * error is reported once). */
int view_updater_wait(ViewUpdater *u, char err[ABL_ERR_MAX]);
/* Seconds the last finished build took (0 before the first). */
double view_updater_last_seconds(ViewUpdater *u);
/* Waits for the builds, stops the thread and frees u (NULL is fine). */
void view_updater_stop(ViewUpdater *u);

#endif
