/* A hash index over run ids (16 hex digits + NUL) stored at a fixed stride in an array (the
 * plan's runs, a journal's runs, a table of scheme-1 ids): built once in O(n), then each
 * lookup costs O(1) expected. Resuming looks up every journaled run; a linear search each
 * made resuming 10^5 runs quadratic. */
#ifndef ABLATE_ORCHESTRATOR_ID_INDEX_H
#define ABLATE_ORCHESTRATOR_ID_INDEX_H

#include <stddef.h>

typedef struct {
    const char *base; /* the id of entry i is at base + i * stride */
    size_t stride;
    size_t cap;    /* slots, a power of two, at least twice the entries */
    int *slot;     /* entry + 1; 0 = empty */
    long compares; /* id comparisons made by lookups (tests check they grow linearly) */
} IdIndex;

/* Indexes n ids; entries with an empty id are left out; of equal ids, lookups find the
 * first. 0, or -1 when out of memory. */
int id_index_build(IdIndex *x, const char *base, size_t stride, int n);
/* The entry with this id, or -1. */
int id_index_find(IdIndex *x, const char *id);
void id_index_free(IdIndex *x);
/* Id comparisons made by every lookup of the process so far (these and plan_find_id's
 * linear searches): a test hook that counts them through code that keeps its index to
 * itself (run_id_adopt), so a lookup per run that scans shows as quadratic. */
long id_index_total_compares(void);
void id_index_count_compares(long n);

#endif
