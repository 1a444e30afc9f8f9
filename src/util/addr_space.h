/* The address-space limit (RLIMIT_AS, `ulimit -v`) and what ablate needs of it.
 *
 * Under a small limit ablate used to hang or crash instead of saying so: OpenBLAS's
 * threads (started when the library loads, before main) spin at 100% CPU when their buffer
 * cannot be mapped and block exit, MPI_Init or HDF5 on the view thread fail deep inside.
 * So each command first compares the limit with what is mapped already (libraries,
 * OpenBLAS's threads and buffers: it grows with the core count) plus what the command adds
 * besides its runs (MPI, HDF5, the view thread, their malloc arenas); the planner then
 * counts what is left towards each run's memory (plan_cost.h). Measured on 2 cores:
 * 206 MB mapped at main, `ablate run` peaks at 624 MB in one process (MPI singleton),
 * `train` at 344 MB, `view` at 230 MB for a micro sweep. */
#ifndef ABLATE_UTIL_ADDR_SPACE_H
#define ABLATE_UTIL_ADDR_SPACE_H

#include <stddef.h>

/* What a command adds to the address space beyond what is mapped at main, its runs'
 * memory aside: MPI (singleton or launched), HDF5 and the view thread for `run`. */
#define ADDR_SPACE_RUN_EXTRA   (512.0 * 1024 * 1024)
#define ADDR_SPACE_OTHER_EXTRA (192.0 * 1024 * 1024)
/* Still to come once a command has started (the view thread, malloc arenas, HDF5): the
 * planner keeps this much of the limit away from the runs. */
#define ADDR_SPACE_LATER (256.0 * 1024 * 1024)

/* The soft RLIMIT_AS in bytes, 0 when unlimited. */
double addr_space_limit(void);
/* The bytes mapped now (VmSize), 0 if unknown. */
double addr_space_in_use(void);
/* Refuses a command whose address-space limit leaves less than `extra` beyond what is
 * mapped now: 0 fine, -1 after one line on stderr naming the limit and what needs it. */
int addr_space_check(double extra);

#endif
