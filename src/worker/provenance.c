#include "provenance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "util/clock.h"
#include "blas_env.h"

void provenance_attempt_begin(char *utc, size_t n) {
    clock_utc_now(utc, n);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f); /* 5: reset the peak RSS (VmHWM) to the current RSS */
        fclose(f);
    }
}

long provenance_peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        long kb = -1;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "VmHWM:", 6) == 0) {
                kb = strtol(line + 6, NULL, 10);
                break;
            }
        fclose(f);
        if (kb >= 0) return kb * 1024;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) return ru.ru_maxrss * 1024L; /* Linux: kB */
    return -1;
}

static void env_copy(char *dst, size_t n, const char *name) {
    const char *v = getenv(name);
    snprintf(dst, n, "%s", v ? v : "");
}

void provenance_fill_end(EndEvent *e, const char *start_utc) {
    snprintf(e->attempt_start_utc, sizeof e->attempt_start_utc, "%s", start_utc ? start_utc : "");
    clock_utc_now(e->end_utc, sizeof e->end_utc);
    e->peak_rss = provenance_peak_rss();
    env_copy(e->slurm_job_id, sizeof e->slurm_job_id, "SLURM_JOB_ID");
    env_copy(e->slurm_array_task_id, sizeof e->slurm_array_task_id, "SLURM_ARRAY_TASK_ID");
    env_copy(e->slurm_partition, sizeof e->slurm_partition, "SLURM_JOB_PARTITION");
    env_copy(e->slurm_nodelist, sizeof e->slurm_nodelist, "SLURM_JOB_NODELIST");
    const char *rc = getenv("SLURM_RESTART_COUNT");
    e->slurm_restart_count = rc && *rc ? atoi(rc) : -1;
    /* per attempt: a run resumed or taken over on another machine may use another core */
    snprintf(e->attempt_blas_core, sizeof e->attempt_blas_core, "%s", blas_core());
    e->attempt_blas_threads = blas_threads();
}
