/* Matrix transposes: whole matrices (the forward's transposed weight copies) and the 8x8
 * register blocks the attention's row <-> lane gathers are made of. */
#ifndef ABLATE_MODEL_TRANSPOSE_H
#define ABLATE_MODEL_TRANSPOSE_H

/* out (cols, rows) = in (rows, cols) transposed. */
void transpose(float *restrict out, const float *restrict in, int rows, int cols);

#if defined(__GNUC__) && !defined(__clang__)
#define FAST_TRANSPOSE 1 /* GCC's __builtin_shuffle; other compilers take scalar loops */
/* out[k][r] = in[r][k] for an 8x8 block (rows of 8 floats anywhere in memory): a transpose
 * in registers instead of 64 strided scalar moves. */
void transpose8(float *const out[8], const float *const in[8]);
#else
#define FAST_TRANSPOSE 0
#endif

#endif
