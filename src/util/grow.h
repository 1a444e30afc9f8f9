/* The one way an array grows: capacity doubles (from 8), element counts and byte sizes are
 * checked for overflow, and on failure the array is left as it was, so a caller can report
 * and free it. Used as
 *     if (GROW(v->runs, v->cap, v->n + 1) != 0) return oom(...);
 *     v->runs[v->n++] = r;
 */
#ifndef ABLATE_UTIL_GROW_H
#define ABLATE_UTIL_GROW_H

#include <stddef.h>

/* Makes room for at least `need` elements of `elem` bytes in *p (capacity *cap elements).
 * 0, or -1 with *p and *cap unchanged. */
int grow_array(void **p, size_t *cap, size_t need, size_t elem);

#define GROW(ptr, cap, need) grow_array((void **)&(ptr), &(cap), (size_t)(need), sizeof *(ptr))

#endif
