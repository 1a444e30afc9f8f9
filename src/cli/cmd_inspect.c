/* ablate inspect OUT.h5 [--json]: the reader lives with the HDF5 schema it reads. */
#include "commands.h"
#include "orchestrator/record/inspect.h"

int cmd_inspect(int argc, char **argv) {
    return inspect_main(argc, argv);
}
