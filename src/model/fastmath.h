/* Elementary functions written so that loops over them vectorize (libm's do not). */
#ifndef ABLATE_MODEL_FASTMATH_H
#define ABLATE_MODEL_FASTMATH_H

#include <math.h>
#include <stdint.h>

/* exp(x) for x <= 0 (softmax arguments after subtracting the max): range reduction
 * x = n ln2 + r, |r| <= ln2/2, a degree-6 polynomial for e^r (relative error ~2e-7, like
 * expf) and 2^n added to the exponent bits (in unsigned arithmetic: shifting a negative int
 * is undefined). Arguments below -87 give ~1e-38. */
static inline float exp_nonpos(float x) {
    x = x < -87.0f ? -87.0f : x;
    float n = floorf(x * 1.44269504088896341f + 0.5f);
    float r = x - n * 0.693145751953125f - n * 1.428606765330187045e-06f;
    float p =
        1.0f +
        r * (1.0f + r * (0.5f + r * (0.16666667f + r * (0.041666668f +
                                                        r * (0.0083333338f + r * 0.0013888889f)))));
    union {
        float f;
        int32_t i;
    } u = {.f = p};
    u.i = (int32_t)((uint32_t)u.i + ((uint32_t)(int32_t)n << 23));
    return u.f;
}

#endif
