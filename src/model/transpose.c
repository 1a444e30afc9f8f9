#include "transpose.h"

#include <string.h>

#if FAST_TRANSPOSE
/* 8 floats; only ever a local (no ABI concerns) */
typedef float v8_t __attribute__((vector_size(8 * sizeof(float))));
typedef int v8i_t __attribute__((vector_size(8 * sizeof(int))));
#define SHUF(a, b, ...) __builtin_shuffle(a, b, (v8i_t){__VA_ARGS__})

void transpose8(float *const out[8], const float *const in[8]) {
    v8_t r[8], t[8], u[8];
    for (int k = 0; k < 8; k++)
        memcpy(&r[k], in[k], sizeof r[k]);
    for (int k = 0; k < 8; k += 2) {
        t[k] = SHUF(r[k], r[k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[k + 1] = SHUF(r[k], r[k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int k = 0; k < 8; k += 4) {
        u[k] = SHUF(t[k], t[k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[k + 1] = SHUF(t[k], t[k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[k + 2] = SHUF(t[k + 1], t[k + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[k + 3] = SHUF(t[k + 1], t[k + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int k = 0; k < 4; k++) {
        v8_t lo = SHUF(u[k], u[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        v8_t hi = SHUF(u[k], u[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
        memcpy(out[k], &lo, sizeof lo);
        memcpy(out[k + 4], &hi, sizeof hi);
    }
}
#endif

void transpose(float *restrict out, const float *restrict in, int rows, int cols) {
    int r = 0;
#if FAST_TRANSPOSE
    for (; r + 8 <= rows; r += 8) {
        const float *src[8];
        float *dst[8];
        int c = 0;
        for (; c + 8 <= cols; c += 8) {
            for (int k = 0; k < 8; k++) {
                src[k] = in + (size_t)(r + k) * cols + c;
                dst[k] = out + (size_t)(c + k) * rows + r;
            }
            transpose8(dst, src);
        }
        for (; c < cols; c++)
            for (int k = 0; k < 8; k++)
                out[(size_t)c * rows + r + k] = in[(size_t)(r + k) * cols + c];
    }
#endif
    for (; r < rows; r++)
        for (int c = 0; c < cols; c++)
            out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
}
