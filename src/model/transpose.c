#include "transpose.h"

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
