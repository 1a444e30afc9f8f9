#include "id_index.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"

static _Atomic long total_compares;

static const char *id_at(const IdIndex *x, int i) {
    return x->base + (size_t)i * x->stride;
}

int id_index_build(IdIndex *x, const char *base, size_t stride, int n) {
    memset(x, 0, sizeof *x);
    x->base = base;
    x->stride = stride;
    x->cap = 16;
    while (x->cap < 2 * (size_t)(n > 0 ? n : 0))
        x->cap *= 2;
    if (!(x->slot = calloc(x->cap, sizeof *x->slot))) return -1;
    for (int i = 0; i < n; i++) {
        const char *id = id_at(x, i);
        if (!id[0]) continue;
        size_t h = (size_t)fnv1a_str(id) & (x->cap - 1);
        while (x->slot[h]) /* an equal id already here stays first on its probe path */
            h = (h + 1) & (x->cap - 1);
        x->slot[h] = i + 1;
    }
    return 0;
}

int id_index_find(IdIndex *x, const char *id) {
    long c = 0;
    int found = -1;
    for (size_t h = (size_t)fnv1a_str(id) & (x->cap - 1); x->slot[h]; h = (h + 1) & (x->cap - 1)) {
        c++;
        if (!strcmp(id_at(x, x->slot[h] - 1), id)) {
            found = x->slot[h] - 1;
            break;
        }
    }
    x->compares += c;
    id_index_count_compares(c);
    return found;
}

void id_index_free(IdIndex *x) {
    free(x->slot);
    memset(x, 0, sizeof *x);
}

void id_index_count_compares(long n) {
    atomic_fetch_add_explicit(&total_compares, n, memory_order_relaxed);
}

long id_index_total_compares(void) {
    return atomic_load_explicit(&total_compares, memory_order_relaxed);
}
