/* The messages between rank 0 and the workers (protocol.h). An assignment
 * larger than Open MPI's shared-memory eager limit waits for its worker to post the
 * receive; protocol.h asserts the size at compile time, this states it where CTest shows it
 * and checks that the files a worker names from the assignment are those rank 0 names. */
#include <string.h>

#include "orchestrator/process/protocol.h"
#include "orchestrator/process/run_exec.h"
#include "test_util.h"

TEST(assignment_fits_eager_limit) {
    CHECK_MSG(sizeof(RunAssignment) + PROTOCOL_HEADER_ROOM <= PROTOCOL_EAGER_LIMIT,
              "RunAssignment is %zu bytes", sizeof(RunAssignment));
}

/* The checkpoint and weights paths are derived from out_path and id on both sides; a
 * path that does not fit is an error, not a truncated name. */
TEST(derived_paths) {
    char a[ABL_PATH_MAX], b[ABL_PATH_MAX];
    CHECK(run_ckpt_path("/x/out.h5", "0123456789abcdef", 40, a, sizeof a) == 0);
    CHECK_MSG(strcmp(a, "/x/out.h5.d/ckpt/0123456789abcdef-40.ckpt") == 0, "%s", a);
    CHECK(run_weights_path("/x/out.h5", "0123456789abcdef", b, sizeof b) == 0);
    CHECK_MSG(strcmp(b, "/x/out.h5.d/weights/0123456789abcdef.f32") == 0, "%s", b);
    char longp[ABL_PATH_MAX];
    memset(longp, 'a', sizeof longp - 8);
    longp[sizeof longp - 8] = '\0';
    CHECK(run_ckpt_path(longp, "0123456789abcdef", 40, a, sizeof a) != 0);
    CHECK(run_weights_path(longp, "0123456789abcdef", b, sizeof b) != 0);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_protocol");
}
