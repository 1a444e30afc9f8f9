#include "env_info.h"

#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "git_rev.h" /* generated at build time (cmake/git_rev.cmake) */

#include "../worker/blas_env.h"
#include "run_id.h"

void env_info_now(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void env_info_add(EnvInfo *e, const char *key, const char *value, size_t len) {
    if (e->n >= ENV_INFO_MAX) return;
    char *v = malloc(len + 1);
    if (!v) return;
    memcpy(v, value, len);
    v[len] = '\0';
    e->key[e->n] = key;
    e->value[e->n++] = v;
}

static void add_str(EnvInfo *e, const char *key, const char *value) {
    env_info_add(e, key, value, strlen(value));
}

void env_info_collect(EnvInfo *e, int ranks, const char *hostnames) {
    memset(e, 0, sizeof *e);
    char buf[MPI_MAX_LIBRARY_VERSION_STRING + 64];
    add_str(e, "ablate_version", ABLATE_VERSION);
    add_str(e, "git_rev", ABLATE_GIT_REV);
    add_str(e, "compiler", ABLATE_COMPILER);
    add_str(e, "c_flags", ABLATE_C_FLAGS);
    int len = 0;
    MPI_Get_library_version(buf, &len);
    char *nl = strchr(buf, '\n');
    if (nl) *nl = '\0';
    add_str(e, "mpi_version", buf);
    unsigned maj, min, rel;
    H5get_libversion(&maj, &min, &rel);
    snprintf(buf, sizeof buf, "%u.%u.%u", maj, min, rel);
    add_str(e, "hdf5_version", buf);
    add_str(e, "openblas_version", blas_config());
    add_str(e, "blas_core", blas_core());
    snprintf(buf, sizeof buf, "%d", ranks);
    add_str(e, "ranks", buf);
    add_str(e, "hostnames", hostnames);
    env_info_now(buf, sizeof buf);
    add_str(e, "start_time", buf);
    snprintf(buf, sizeof buf, "%d", RUN_ID_SCHEME);
    add_str(e, "id_scheme", buf);
}

int env_info_pairs(const EnvInfo *e, const char **kv) {
    for (int i = 0; i < e->n; i++) {
        kv[2 * i] = e->key[i];
        kv[2 * i + 1] = e->value[i];
    }
    return e->n;
}

void env_info_free(EnvInfo *e) {
    for (int i = 0; i < e->n; i++)
        free(e->value[i]);
    memset(e, 0, sizeof *e);
}
