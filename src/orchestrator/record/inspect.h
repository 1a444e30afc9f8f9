/* `ablate inspect OUT.h5 [--json]`: what a sweep's file holds, readable while the sweep
 * runs (the file is replaced by rename, never rewritten in place; no file locks taken).
 *
 * Default: an aligned table of the runs (index, name, id, seed, status, steps, final
 * validation loss, params, tokens/s) and a summary line. --json: one JSON object per run
 * per line with every column of /runs (NaN -> null; booleans true/false).
 * A live view's rows that cannot be read (view_check.h) are named in warnings on stderr.
 * Exit status: 0 ok, 1 missing/unreadable/not an ablate file, 2 usage error. */
#ifndef ABLATE_ORCH_INSPECT_H
#define ABLATE_ORCH_INSPECT_H

/* argv[0] is the subcommand name ("inspect"); arguments follow. */
int inspect_main(int argc, char **argv);

#endif
