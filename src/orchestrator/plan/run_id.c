#include "run_id.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t fnv1a(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

#define FNV_BASIS 0xcbf29ce484222325ULL

static uint64_t hash_knob(uint64_t h, const Knob *k, const RunConfig *c) {
    char val[ABL_PATH_MAX + 64];
    h = fnv1a(h, k->name, strlen(k->name));
    h = fnv1a(h, "=", 1);
    int n = knob_format(c, k, val, sizeof val);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof val) n = (int)sizeof val - 1;
    h = fnv1a(h, val, (size_t)n);
    return fnv1a(h, "\n", 1);
}

static uint64_t hash_seed(uint64_t h, uint64_t seed) {
    char val[32];
    int n = snprintf(val, sizeof val, "seed=%llu\n", (unsigned long long)seed);
    return fnv1a(h, val, (size_t)n);
}

uint64_t run_id_hash_table(const Knob *table, int n, const RunConfig *c, const uint64_t *seed) {
    RunConfig def;
    run_config_default(&def);
    uint64_t h = FNV_BASIS;
    for (int i = 0; i < n; i++)
        if (!knob_equal(c, &def, &table[i])) h = hash_knob(h, &table[i], c);
    return seed ? hash_seed(h, *seed) : h;
}

uint64_t run_id_hash(const RunConfig *c, const uint64_t *seed) {
    return run_id_hash_table(knob_table, knob_count, c, seed);
}

uint64_t run_id_hash_v1_table(const Knob *table, int n, const RunConfig *c, uint64_t seed) {
    uint64_t h = FNV_BASIS;
    for (int i = 0; i < n; i++)
        h = hash_knob(h, &table[i], c);
    return hash_seed(h, seed);
}

uint64_t run_id_hash_v1(const RunConfig *c, uint64_t seed) {
    return run_id_hash_v1_table(knob_table, knob_count, c, seed);
}

void run_id_format(uint64_t h, char out[17]) {
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

int run_id_adopt(Plan *p, const ResumeState *rs) {
    char(*v1)[17] = NULL; /* the plan's scheme-1 ids, computed when first needed */
    int adopted = 0;
    for (int k = 0; k < rs->n_runs; k++) {
        const char *old = rs->runs[k].id;
        if (!old[0] || plan_find_id(p, old) >= 0) continue;
        if (!v1) {
            v1 = malloc(sizeof *v1 * (size_t)(p->n_runs + 1));
            if (!v1) return -1;
            for (int i = 0; i < p->n_runs; i++)
                run_id_format(run_id_hash_v1(&p->runs[i].cfg, p->runs[i].seed), v1[i]);
        }
        for (int i = 0; i < p->n_runs; i++)
            if (!strcmp(v1[i], old)) {
                memcpy(p->runs[i].id, old, 17);
                adopted++;
                break;
            }
    }
    free(v1);
    return adopted;
}
