#include "addr_space.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

double addr_space_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
    return (double)rl.rlim_cur;
}

double addr_space_in_use(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmSize:", 7) == 0) {
            kb = strtod(line + 7, NULL);
            break;
        }
    fclose(f);
    return kb * 1024;
}

int addr_space_check(double extra) {
    double lim = addr_space_limit();
    if (lim <= 0) return 0;
    double used = addr_space_in_use(), need = used + extra;
    if (lim >= need) return 0;
    /* under mpirun/srun every rank refuses; one says why */
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!rank) rank = getenv("PMIX_RANK");
    if (!rank) rank = getenv("SLURM_PROCID");
    if (rank && strcmp(rank, "0") != 0) return -1;
    log_cmd("the address-space limit (ulimit -v) of %.0f MiB is too small: it "
            "needs at least %.0f MiB (%.0f MiB mapped at start: libraries, OpenBLAS's threads "
            "and buffers; about %.0f MiB for MPI, HDF5 and the view thread) plus each run's "
            "memory; raise `ulimit -v` (e.g. ulimit -v %.0f) or lift it",
            lim / 1048576, need / 1048576, used / 1048576, extra / 1048576,
            (need + 512.0 * 1048576) / 1024);
    return -1;
}
