/* User data in OUT.h5 across rebuilds. OUT.h5 is rebuilt from the journal (the live view,
 * `ablate view`, the end of a session, --resume), so anything else in it would be lost:
 * the group /user is the documented place for a user's own data (datasets, groups,
 * attributes, any depth) and is copied whole into every rebuild (H5Ocopy); any other
 * object or root attribute a user added is named in a one-line warning when a rebuild
 * drops it (docs/hdf5-schema.md, "Your own data"). */
#ifndef ABLATE_ORCHESTRATOR_H5USER_H
#define ABLATE_ORCHESTRATOR_H5USER_H

#include <hdf5.h>

#include "worker/run_config.h"

/* Called with the new file complete but not yet renamed over old_path. Copies old_path's
 * /user into new_file, and warns on stderr about what else of old_path the new file lacks.
 * 0 (also when old_path does not exist or is not HDF5), or -1 with err (the copy failed:
 * the rebuild must not replace the file, or /user would be lost). */
int h5user_carry(const char *old_path, hid_t new_file, char err[ABL_ERR_MAX]);

#endif
