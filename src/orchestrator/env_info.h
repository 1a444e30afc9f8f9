/* The facts that make a results file self-describing: versions, build, BLAS core, ranks
 * and hosts, times. Collected once on rank 0 for the journal's HEADER record. */
#ifndef ABLATE_ORCHESTRATOR_ENV_INFO_H
#define ABLATE_ORCHESTRATOR_ENV_INFO_H

#include <stddef.h>

#define ENV_INFO_MAX 24

typedef struct {
    int n;
    const char *key[ENV_INFO_MAX];
    char *value[ENV_INFO_MAX];
} EnvInfo;

/* hostnames: comma-separated distinct hosts of the ranks. */
void env_info_collect(EnvInfo *e, int ranks, const char *hostnames);
/* Adds (copies) one pair. */
void env_info_add(EnvInfo *e, const char *key, const char *value, size_t len);
/* The pairs as the flat key, value array journal_append_header takes. */
int env_info_pairs(const EnvInfo *e, const char **kv);
void env_info_free(EnvInfo *e);
/* Current UTC time as ISO 8601. */
void env_info_now(char *buf, size_t n);

#endif
