/* OpenBLAS's own functions, which ablate calls (src/worker/blas_env.c: threads, core and
 * configuration for the results file; src/model/gemm.c: the core), for a build against
 * another BLAS (CMake's BLA_VENDOR, e.g. FlexiBLAS): the results file's openblas_version
 * and blas_core then name the vendor (and FlexiBLAS's current backend), and the thread
 * count goes to FlexiBLAS, or is 1 for a BLAS that has no such call. Compiled only when
 * BLA_VENDOR is not OpenBLAS (CMakeLists.txt). */
#include <stddef.h>
#include <stdio.h>

#ifndef ABLATE_BLAS_VENDOR_NAME
#define ABLATE_BLAS_VENDOR_NAME "unknown BLAS"
#endif

char *openblas_get_corename(void);
char *openblas_get_config(void);
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);

#ifdef ABLATE_BLAS_FLEXIBLAS
/* flexiblas_api.h */
int flexiblas_current_backend(char *name, size_t len);
void flexiblas_set_num_threads(int n);
int flexiblas_get_num_threads(void);

char *openblas_get_corename(void) {
    static char name[128];
    char backend[96] = "";
    flexiblas_current_backend(backend, sizeof backend);
    snprintf(name, sizeof name, "FlexiBLAS:%s", backend[0] ? backend : "?");
    return name;
}
void openblas_set_num_threads(int n) {
    flexiblas_set_num_threads(n);
}
int openblas_get_num_threads(void) {
    return flexiblas_get_num_threads();
}
#else
char *openblas_get_corename(void) {
    return (char *)ABLATE_BLAS_VENDOR_NAME;
}
void openblas_set_num_threads(int n) {
    (void)n;
}
int openblas_get_num_threads(void) {
    return 1;
}
#endif

char *openblas_get_config(void) {
    return (char *)ABLATE_BLAS_VENDOR_NAME " (BLA_VENDOR)";
}
