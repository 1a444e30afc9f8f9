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
/* If OPENBLAS_CORETYPE is unset and OpenBLAS picked a weaker core than the CPU supports,
 * sets OPENBLAS_CORETYPE and re-executes the program (OpenBLAS reads it only when it is
 * loaded). Never overrides a value the user set. Call first thing in main(). */
void blas_ensure_best_core(char **argv);
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
