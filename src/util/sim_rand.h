/* Random numbers for simulations (the sequential rule's error-rate test and its bench):
 * xoshiro256** (Blackman & Vigna 2018) seeded by SplitMix64, with the draws the simulated
 * paired differences are made of. Deterministic for a seed; not for the model, whose
 * randomness is counter-based (model/rng.h) so that it does not depend on call order. */
#ifndef ABLATE_UTIL_SIM_RAND_H
#define ABLATE_UTIL_SIM_RAND_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
    int have; /* the polar method's second normal is kept for the next call */
    double spare;
} SimRand;

void sim_rand_seed(SimRand *g, uint64_t seed);
uint64_t sim_rand_u64(SimRand *g);
/* Uniform in (0, 1], 53 bits. */
double sim_rand_unif(SimRand *g);
/* Standard normal: Marsaglia's polar method, both values used. */
double sim_rand_normal(SimRand *g);
/* Gamma(a, 1) for a >= 1: Marsaglia & Tsang (2000). */
double sim_rand_gamma(SimRand *g, double a);

#endif
