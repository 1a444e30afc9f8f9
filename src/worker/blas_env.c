#include "util/log.h"
#include "blas_env.h"
#include "model/par.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *openblas_get_corename(void);
char *openblas_get_config(void);
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);

int blas_threads(void) {
    return openblas_get_num_threads();
}

const char *blas_core(void) {
    return openblas_get_corename();
}
const char *blas_config(void) {
    return openblas_get_config();
}

/* Rank of a core name by the widest vector kernels it uses. */
static int core_rank(const char *name) {
    static const char *avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    static const char *avx2[] = {"Haswell", "Zen"};
    for (size_t i = 0; i < sizeof avx512 / sizeof *avx512; i++)
        if (strcasecmp(name, avx512[i]) == 0) return 2;
    for (size_t i = 0; i < sizeof avx2 / sizeof *avx2; i++)
        if (strcasecmp(name, avx2[i]) == 0) return 1;
    return 0;
}

const char *blas_best_core(void) {
    __builtin_cpu_init();
    const char *best = NULL;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        best = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        best = "Haswell";
    if (!best || core_rank(blas_core()) >= core_rank(best)) return NULL;
    return best;
}

int blas_argv_threads(char **argv) {
    for (int i = 1; argv[i]; i++)
        if (strcmp(argv[i], "--blas-threads") == 0 && argv[i + 1]) return atoi(argv[i + 1]);
    return 0;
}

void blas_ensure_env(char **argv, int threads) {
    if (getenv("ABLATE_BLAS_REEXEC")) return; /* never loop */
    const char *best = getenv("OPENBLAS_CORETYPE") ? NULL : blas_best_core();
    const char *var = blas_thread_env();
    int several = threads > 1 || (threads <= 0 && var && atoi(getenv(var)) > 1);
    int timeout = several && !getenv("OPENBLAS_THREAD_TIMEOUT");
    if (!best && !timeout) return;
    if (best) setenv("OPENBLAS_CORETYPE", best, 1);
    if (timeout) setenv("OPENBLAS_THREAD_TIMEOUT", BLAS_THREAD_TIMEOUT, 1);
    setenv("ABLATE_BLAS_REEXEC", "1", 1);
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with what OpenBLAS loaded, but say so once */
    log_warn("could not re-exec with OPENBLAS_CORETYPE=%s OPENBLAS_THREAD_TIMEOUT=%s; "
             "OpenBLAS uses its %s kernels",
             best ? best : "(as set)", timeout ? BLAS_THREAD_TIMEOUT : "(as set)", blas_core());
}

const char *blas_thread_env(void) {
    /* OpenBLAS's own order of precedence */
    static const char *const vars[] = {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                                       "OMP_NUM_THREADS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && v[0]) return vars[i];
    }
    return NULL;
}

static int requested_threads; /* --blas-threads; 0: the default rule */

void blas_request_threads(int k) {
    requested_threads = k > 0 ? k : 0;
}

void blas_set_threads(void) {
    if (requested_threads > 0)
        openblas_set_num_threads(requested_threads);
    else if (!blas_thread_env())
        openblas_set_num_threads(1);
    /* the model's loops outside the GEMMs run on as many (src/model/par.h) */
    par_set_threads(openblas_get_num_threads());
}

void blas_warn_threads(const char *who) {
    const char *var = blas_thread_env();
    if (!var || requested_threads > 0) return; /* an explicit --blas-threads needs no warning */
    log_line("%s: warning: %s=%s: OpenBLAS uses %d thread(s) per run instead of ablate's 1; "
             "results are then bit-identical only to runs with the same thread count (unset it "
             "to keep the default, or ask with --blas-threads)",
             who, var, getenv(var), openblas_get_num_threads());
}
