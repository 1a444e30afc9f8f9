/* The one non-cryptographic hash: FNV-1a, 64 bits. Run ids hash canonical config text with
 * it (their values are part of the journal's format: never change it), and the in-memory
 * indexes (run ids, knob names, the view's row cache) use it for their slots. */
#ifndef ABLATE_UTIL_HASH_H
#define ABLATE_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define FNV1A_BASIS 0xcbf29ce484222325ULL

/* FNV-1a of n bytes, continuing from h (start with FNV1A_BASIS). */
uint64_t fnv1a(uint64_t h, const char *s, size_t n);
/* FNV-1a of a C string, from FNV1A_BASIS. */
uint64_t fnv1a_str(const char *s);

#endif
