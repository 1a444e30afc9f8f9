#include "sim_rand.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void sim_rand_seed(SimRand *g, uint64_t seed) {
    for (int i = 0; i < 4; i++)
        g->s[i] = splitmix64(&seed);
    g->have = 0;
    g->spare = 0;
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

uint64_t sim_rand_u64(SimRand *g) {
    uint64_t *s = g->s, r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

double sim_rand_unif(SimRand *g) {
    return ((sim_rand_u64(g) >> 11) + 1) * 0x1.0p-53;
}

double sim_rand_normal(SimRand *g) {
    if (g->have) {
        g->have = 0;
        return g->spare;
    }
    double u, v, w;
    do {
        u = 2 * sim_rand_unif(g) - 1;
        v = 2 * sim_rand_unif(g) - 1;
        w = u * u + v * v;
    } while (w >= 1 || w == 0);
    double f = sqrt(-2 * log(w) / w);
    g->spare = v * f;
    g->have = 1;
    return u * f;
}

double sim_rand_gamma(SimRand *g, double a) {
    double d = a - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double x = sim_rand_normal(g), v = 1 + c * x;
        if (v <= 0) continue;
        v = v * v * v;
        if (log(sim_rand_unif(g)) < 0.5 * x * x + d - d * v + d * log(v)) return d * v;
    }
}
