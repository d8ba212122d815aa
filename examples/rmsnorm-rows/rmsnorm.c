/* Y[r, c] = X[r, c] / sqrt(mean(X[r, :]^2) + 1e-6) * W[c], float32.
 *
 * Squares are summed in double: |x| up to ~1e19 would overflow a float sum of
 * squares although the normalised result is perfectly representable.
 * Rows are split across OpenMP threads.
 */
#include <math.h>
#include <stdint.h>

void rmsnorm_rows(const float *X, const float *W, float *Y, int64_t R, int64_t C) {
#pragma omp parallel for schedule(static) if (R * C > 65536)
    for (int64_t r = 0; r < R; r++) {
        const float *x = X + r * C;
        float *y = Y + r * C;
        double ss = 0.0;
        for (int64_t c = 0; c < C; c++) ss += (double)x[c] * (double)x[c];
        const double inv = 1.0 / sqrt(ss / (double)C + 1e-6);
        for (int64_t c = 0; c < C; c++) y[c] = (float)(x[c] * inv * W[c]);
    }
}
