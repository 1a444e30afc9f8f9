/* The test hooks (util/test_hooks.h) are read once, when the process starts: a training
 * step, a view build or a group sync reads the value the process started with (each read
 * the environment again, at every step). */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "util/test_hooks.h"

TEST(read_once) {
    setenv("ABLATE_TEST_HOLD_STEP", "7", 1);
    setenv("ABLATE_TEST_HOLD_DIR", "/nowhere/held", 1);
    unsetenv("ABLATE_TEST_HOLD_VIEW_AFTER");
    test_hooks_load();
    const TestHooks *h = test_hooks();
    CHECK(h->hold_step == 7 && strcmp(h->hold_dir, "/nowhere/held") == 0);
    CHECK(h->hold_view_after == 0 && h->hold_view[0] == '\0' && h->kill_before_sync == 0);
    setenv("ABLATE_TEST_HOLD_STEP", "9", 1); /* later changes are not seen */
    unsetenv("ABLATE_TEST_HOLD_DIR");
    test_hooks_load();
    CHECK(test_hooks()->hold_step == 7 && strcmp(test_hooks()->hold_dir, "/nowhere/held") == 0);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_hooks");
}
