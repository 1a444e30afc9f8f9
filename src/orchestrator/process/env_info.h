/* The facts that make a results file self-describing: versions, build, BLAS core, ranks
 * and hosts, times. Collected once on rank 0 for the journal's HEADER record. */
#ifndef ABLATE_ORCHESTRATOR_ENV_INFO_H
#define ABLATE_ORCHESTRATOR_ENV_INFO_H

#include <stddef.h>

#include "orchestrator/plan/plan.h"

#define ENV_INFO_MAX 48

typedef struct {
    int n;
    const char *key[ENV_INFO_MAX];
    char *value[ENV_INFO_MAX];
} EnvInfo;

/* hostnames: comma-separated distinct hosts of the ranks. */
void env_info_collect(EnvInfo *e, int ranks, const char *hostnames);
/* The sweep's provenance: command_line (this process's exact arguments, shell-quoted),
 * sets (every --set, one per line), spec_expanded (the spec with ${VAR}s resolved),
 * data_files (one "sha256<TAB>bytes<TAB>path" line per distinct data.path of the plan) and,
 * under SLURM, slurm_job_id, slurm_array_task_id, slurm_restart_count, slurm_partition and
 * slurm_nodelist. */
void env_info_add_sweep(EnvInfo *e, const char *spec_text, const char *const *sets, int n_sets,
                        const Plan *plan);
/* Adds bytes as lowercase hex (header values are C strings: NUL bytes would cut them). */
void env_info_add_hex(EnvInfo *e, const char *key, const unsigned char *v, size_t n);
/* Adds (copies) one pair. */
void env_info_add(EnvInfo *e, const char *key, const char *value, size_t len);
/* The pairs as the flat key, value array journal_append_header takes. */
int env_info_pairs(const EnvInfo *e, const char **kv);
void env_info_free(EnvInfo *e);
/* Current UTC time as ISO 8601. */
void env_info_now(char *buf, size_t n);

#endif
