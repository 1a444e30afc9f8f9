/* Matrix transposes: whole matrices (the forward's transposed weight copies) and the 8x8
 * register blocks the attention's row <-> lane gathers are made of. */
#ifndef ABLATE_MODEL_TRANSPOSE_H
#define ABLATE_MODEL_TRANSPOSE_H

#include <string.h>

/* out (cols, rows) = in (rows, cols) transposed. */
void transpose(float *restrict out, const float *restrict in, int rows, int cols);

#if defined(__GNUC__) && !defined(__clang__)
#define FAST_TRANSPOSE 1 /* AVX intrinsics or GCC's __builtin_shuffle; else scalar loops */

/* out[k][r] = in[r][k] for an 8x8 block (rows of 8 floats anywhere in memory): a transpose
 * in registers instead of 64 strided scalar moves. Inline: the callers' row pointers stay in
 * registers (out of line, the pointer arrays went through memory on every block). */
#if defined(__AVX__)
#include <immintrin.h>
static inline void transpose8(float *const out[8], const float *const in[8]) {
    __m256 r[8], t[8], s[8];
    for (int k = 0; k < 8; k++)
        r[k] = _mm256_loadu_ps(in[k]);
    for (int k = 0; k < 8; k += 4) { /* rows k..k+3 interleaved by pairs, then by fours */
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
        t[k + 2] = _mm256_unpacklo_ps(r[k + 2], r[k + 3]);
        t[k + 3] = _mm256_unpackhi_ps(r[k + 2], r[k + 3]);
        s[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
        s[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
        s[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
        s[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int k = 0; k < 4; k++) { /* column k: the low halves; column k + 4: the high */
        _mm256_storeu_ps(out[k], _mm256_permute2f128_ps(s[k], s[k + 4], 0x20));
        _mm256_storeu_ps(out[k + 4], _mm256_permute2f128_ps(s[k], s[k + 4], 0x31));
    }
}
#else
typedef float transpose_v8_t __attribute__((vector_size(8 * sizeof(float))));
typedef int transpose_v8i_t __attribute__((vector_size(8 * sizeof(int))));
#define TRANSPOSE_SHUF(a, b, ...) __builtin_shuffle(a, b, (transpose_v8i_t){__VA_ARGS__})
static inline void transpose8(float *const out[8], const float *const in[8]) {
    transpose_v8_t r[8], t[8], u[8];
    for (int k = 0; k < 8; k++)
        memcpy(&r[k], in[k], sizeof r[k]);
    for (int k = 0; k < 8; k += 2) {
        t[k] = TRANSPOSE_SHUF(r[k], r[k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[k + 1] = TRANSPOSE_SHUF(r[k], r[k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int k = 0; k < 8; k += 4) {
        u[k] = TRANSPOSE_SHUF(t[k], t[k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[k + 1] = TRANSPOSE_SHUF(t[k], t[k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[k + 2] = TRANSPOSE_SHUF(t[k + 1], t[k + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[k + 3] = TRANSPOSE_SHUF(t[k + 1], t[k + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int k = 0; k < 4; k++) {
        transpose_v8_t lo = TRANSPOSE_SHUF(u[k], u[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        transpose_v8_t hi = TRANSPOSE_SHUF(u[k], u[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
        memcpy(out[k], &lo, sizeof lo);
        memcpy(out[k + 4], &hi, sizeof hi);
    }
}
#endif
#else
#define FAST_TRANSPOSE 0
#endif

#endif
