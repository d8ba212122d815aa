/* Flaw: sums squares in float, which overflows for |x| > ~1e19 although the
 * normalised result is perfectly representable. */
#include <math.h>
#include <stdint.h>
void rmsnorm_rows(const float *X, const float *W, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        float ss = 0.0f;
        for (int64_t c = 0; c < C; c++) ss += X[r * C + c] * X[r * C + c];
        float inv = 1.0f / sqrtf(ss / (float)C + 1e-6f);
        for (int64_t c = 0; c < C; c++) Y[r * C + c] = X[r * C + c] * inv * W[c];
    }
}
