/* Counter-based random numbers: every draw is a pure function of (seed, stream, counter),
 * so a run's randomness does not depend on the process, rank or order of calls. */
#ifndef ABLATE_MODEL_RNG_H
#define ABLATE_MODEL_RNG_H

#include <stdint.h>

enum { RNG_STREAM_INIT = 1, RNG_STREAM_BATCH = 2, RNG_STREAM_SAMPLE = 3 };

uint64_t rng_u64(uint64_t seed, uint64_t stream, uint64_t counter);
/* Uniform in [0, 1) with 24 random bits. */
float rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter);
/* Standard normal (Box-Muller on two draws of the counter pair 2c, 2c+1). */
float rng_normal(uint64_t seed, uint64_t stream, uint64_t counter);
/* Uniform integer in [0, n), unbiased enough for n << 2^64. */
uint64_t rng_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n);

#endif
