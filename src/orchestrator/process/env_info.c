#include "env_info.h"

#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "git_rev.h" /* generated at build time (cmake/git_rev.cmake) */

#include "worker/blas_env.h"
#include "worker/knobs.h"
#include "util/buf.h"
#include "orchestrator/plan/plan.h"
#include "util/clock.h"
#include "util/sha256.h"
#include "orchestrator/plan/spec.h"
#include "orchestrator/plan/run_id.h"

void env_info_now(char *buf, size_t n) {
    clock_utc_format(buf, n, CLOCK_UTC_SECONDS);
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

/* A word as a POSIX shell reads it back: bare if it is safe, else single-quoted. */
static void shell_word(Buf *b, const char *w) {
    if (*w && strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                        "_-+=.,/:@%") == strlen(w)) {
        buf_adds(b, w);
        return;
    }
    buf_addc(b, '\'');
    for (; *w; w++)
        if (*w == '\'')
            buf_adds(b, "'\\''");
        else
            buf_addc(b, *w);
    buf_addc(b, '\'');
}

static void add_buf(EnvInfo *e, const char *key, Buf *b) {
    if (!b->oom) env_info_add(e, key, b->p ? b->p : "", b->len);
    buf_free(b);
}

void env_info_add_sweep(EnvInfo *e, const char *spec_text, const char *const *sets, int n_sets,
                        const Plan *plan) {
    Buf b = {0};
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (f) {
        char arg[4096];
        size_t n = 0;
        int c, first = 1;
        while ((c = fgetc(f)) != EOF) {
            if (c != 0 && n < sizeof arg - 1) {
                arg[n++] = (char)c;
                continue;
            }
            if (c != 0) continue;
            arg[n] = 0;
            if (!first) buf_addc(&b, ' ');
            shell_word(&b, arg);
            first = 0, n = 0;
        }
        fclose(f);
    }
    add_buf(e, "command_line", &b);
    for (int i = 0; i < n_sets; i++) {
        buf_adds(&b, sets[i]);
        buf_addc(&b, '\n');
    }
    add_buf(e, "sets", &b);
    char err[ABL_ERR_MAX];
    char *x = spec_text ? spec_expand(spec_text, err) : NULL;
    if (x) env_info_add(e, "spec_expanded", x, strlen(x));
    free(x);
    /* the base as resolved (preset defaults included), so readers need not re-resolve it */
    if (plan && plan->spec) {
        knob_config_json_buf(&plan->spec->base, &b);
        add_buf(e, "base_config", &b);
    }
    for (int i = 0; plan && i < plan->n_runs; i++) {
        const char *path = plan->runs[i].cfg.data.path;
        int seen = 0;
        for (int k = 0; k < i && !seen; k++)
            seen = !strcmp(plan->runs[k].cfg.data.path, path);
        if (seen) continue;
        char hex[65];
        long long size = -1;
        if (sha256_file(path, hex, &size) != 0) snprintf(hex, sizeof hex, "unreadable");
        buf_printf(&b, "%s\t%lld\t%s\n", hex, size, path);
    }
    add_buf(e, "data_files", &b);
    static const char *const slurm[][2] = {{"slurm_job_id", "SLURM_JOB_ID"},
                                           {"slurm_array_task_id", "SLURM_ARRAY_TASK_ID"},
                                           {"slurm_restart_count", "SLURM_RESTART_COUNT"},
                                           {"slurm_partition", "SLURM_JOB_PARTITION"},
                                           {"slurm_nodelist", "SLURM_JOB_NODELIST"}};
    for (int i = 0; i < 5; i++) {
        const char *v = getenv(slurm[i][1]);
        if (v && *v) add_str(e, slurm[i][0], v);
    }
}

void env_info_add_hex(EnvInfo *e, const char *key, const unsigned char *v, size_t n) {
    Buf b = {0};
    for (size_t i = 0; i < n; i++)
        buf_printf(&b, "%02x", v[i]);
    add_buf(e, key, &b);
}
