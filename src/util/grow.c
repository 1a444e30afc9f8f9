#include "grow.h"

#include <stdint.h>
#include <stdlib.h>

int grow_array(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap < 8 ? 8 : *cap;
    while (c < need) {
        if (c > SIZE_MAX / 2) return -1;
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem) return -1;
    void *np = realloc(*p, c * elem);
    if (!np) return -1;
    *p = np;
    *cap = c;
    return 0;
}
