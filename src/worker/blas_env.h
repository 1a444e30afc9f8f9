/* OpenBLAS on the machine: which core its kernels target, and making sure that is the
 * best one the CPU supports (Debian's 0.3.21 does not know recent CPUs). */
#ifndef ABLATE_WORKER_BLAS_ENV_H
#define ABLATE_WORKER_BLAS_ENV_H

/* The kernel family OpenBLAS is using ("SkylakeX", "Haswell", ...). */
const char *blas_core(void);
const char *blas_config(void);
/* Threads OpenBLAS runs its kernels on. */
int blas_threads(void);
/* The best core the CPU supports by its feature flags, or NULL when OpenBLAS' own
 * detection is fine. */
const char *blas_best_core(void);
/* OpenBLAS reads its environment only when it is loaded, so this sets what it needs and
 * re-executes the program (once; never overriding a value the user set). Call first thing
 * in main().
 *  - OPENBLAS_CORETYPE, when OpenBLAS picked a weaker core than the CPU supports;
 *  - OPENBLAS_THREAD_TIMEOUT=BLAS_THREAD_TIMEOUT, when the process runs OpenBLAS on several
 *    threads: `threads` > 1 (the caller's K), or, with threads <= 0 (not asked), OpenBLAS's
 *    thread variables above 1. OpenBLAS's idle
 *    threads spin on sched_yield for 2^28 cycles (~0.1 s) after every product before they
 *    sleep; between products the model's own loops run on the same cores (model/par.h), and
 *    the spinning took 15% of a 2-thread book step's CPU time. 2^16 cycles (~25 us) still
 *    hands consecutive products over without a wake-up (bench/engine_limit.sh). */
#define BLAS_THREAD_TIMEOUT "16"
void blas_ensure_env(char **argv, int threads);
/* K of a --blas-threads K in argv (0 when absent or malformed: the command checks it). */
int blas_argv_threads(char **argv);
/* One BLAS thread per process: sweeps get their parallelism from MPI ranks, and results
 * stay bit-identical whatever the machine's core count. OPENBLAS_NUM_THREADS,
 * GOTO_NUM_THREADS or OMP_NUM_THREADS in the environment override it (OpenBLAS reads them
 * when it loads); blas_warn_threads says so. */
void blas_set_threads(void);
/* --blas-threads K: K threads per run, over the environment and the default (call before
 * blas_set_threads). Runs are bit-identical only to runs with the same K. */
void blas_request_threads(int k);
/* The variable that sets OpenBLAS's thread count (NULL: ablate's one thread holds). */
const char *blas_thread_env(void);
/* Prints one warning when the environment changes the thread count: results are then
 * identical only between runs with that same count (docs/architecture.md, Determinism). */
void blas_warn_threads(const char *who);

#endif
