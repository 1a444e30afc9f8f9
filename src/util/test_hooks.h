/* The test-only hooks, named in one place: each row below is an environment variable that
 * fault tests set so that they wait for the state they need (a run still in progress, a
 * view build still running, a group of RUN_ENDs written but not synced), never for a time.
 * Unset, they change nothing. They are read once, when the process starts (test_hooks_load,
 * before any thread), not at every training step; the docs' table (docs/architecture.md,
 * "Test hooks") is generated from the rows (test_hooks_markdown, checked by a test).
 *
 * X(field, variable, type, default, where, description): type S (a string, "" when unset)
 * or L (a long). */
#ifndef ABLATE_UTIL_TEST_HOOKS_H
#define ABLATE_UTIL_TEST_HOOKS_H

#include "buf.h"

/* clang-format off */
#define TEST_HOOKS(X) \
    X(hold_dir, "ABLATE_TEST_HOLD_DIR", S, "", "process/run_exec.c", \
      "`=DIR`: an attempt that has taken `ABLATE_TEST_HOLD_STEP` steps creates `DIR/<run id>.held` and waits before each further step, still in progress, until the sweep asks it to stop (a signal, rank 0's stop), or `DIR/<run id>.go` or `DIR/go` exists; a periodic checkpoint that falls due meanwhile is taken (and lets one step through)") \
    X(hold_step, "ABLATE_TEST_HOLD_STEP", L, 1, "process/run_exec.c", \
      "`=N`: steps of the attempt before the hold (default 1)") \
    X(hold_runs, "ABLATE_TEST_HOLD_RUNS", S, "", "process/run_exec.c", \
      "`=ID,ID`: hold only these runs (default: every run)") \
    X(hold_view, "ABLATE_TEST_HOLD_VIEW", S, "", "record/view_updater.c", \
      "`=DIR`: every view build first creates `DIR/view.held` and waits until `DIR/view.go` exists: the sweep goes on meanwhile (`e2e_live`'s `start_view_not_waited`: runs finish, fresh and resumed, while the first view is held; `e2e_join`'s `plan_once` orders two processes' final builds)") \
    X(hold_view_after, "ABLATE_TEST_HOLD_VIEW_AFTER", L, 0, "record/view_updater.c", \
      "`=K`: with `ABLATE_TEST_HOLD_VIEW`, the first K builds of the process are not held") \
    X(flag_unstable, "ABLATE_TEST_FLAG_UNSTABLE", S, "", "process/run_exec.c", \
      "`=ID,ID`: these runs, when they end done, end flagged by the instability rule (`above_uniform` at their last step, `unstable_loss` their final validation loss), as if the rule had fired: a replicate: sweep then drops their seed index (`e2e_adaptive_drop`)") \
    X(kill_before_sync, "ABLATE_TEST_KILL_BEFORE_SYNC", L, 0, "process/group_sync.c", \
      "`=K`: rank 0 kills itself (SIGKILL) just before its K-th group sync of the journal, once it has written another RUN_END after the group (or waits, or stops), saying `test hook: killed before syncing journal bytes A-B` on stderr: the RUN_END records between A and B are written, not synced, and none of their runs may have been reported done (`e2e_group_commit`)")
/* clang-format on */

#define TEST_HOOK_CTYPE_S                                    const char *
#define TEST_HOOK_CTYPE_L                                    long
#define TEST_HOOK_MEMBER(field, var, type, def, where, desc) TEST_HOOK_CTYPE_##type field;

typedef struct {
    TEST_HOOKS(TEST_HOOK_MEMBER)
} TestHooks;

/* Reads the variables (once: later calls do nothing). main calls it first thing; a library
 * user that does not gets them read on the first test_hooks(). */
void test_hooks_load(void);
/* The hooks as read at start-up. */
const TestHooks *test_hooks(void);
/* The docs' table of the hooks, one row each. */
void test_hooks_markdown(Buf *b);

#endif
