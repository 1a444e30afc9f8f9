#include "rng.h"

#include <math.h>

/* splitmix64's finalizer: a bijective mixer with full avalanche. Chaining it over the three
 * words gives independent streams for (seed, stream) pairs at any counter. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t rng_u64(uint64_t seed, uint64_t stream, uint64_t counter) {
    uint64_t k = mix64(seed + 0x9e3779b97f4a7c15ULL);
    k = mix64(k ^ (stream * 0xd1b54a32d192ed03ULL));
    return mix64(k + counter * 0x9e3779b97f4a7c15ULL);
}

float rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
    return (float)(rng_u64(seed, stream, counter) >> 40) * (1.0f / 16777216.0f);
}

float rng_normal(uint64_t seed, uint64_t stream, uint64_t counter) {
    double u1 = ((double)(rng_u64(seed, stream, 2 * counter) >> 11) + 1.0) * 0x1.0p-53;
    double u2 = (double)(rng_u64(seed, stream, 2 * counter + 1) >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint64_t rng_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n) {
    return rng_u64(seed, stream, counter) % n;
}
