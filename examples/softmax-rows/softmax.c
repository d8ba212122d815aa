/* Y[r, :] = softmax(X[r, :]) for each of R rows of length C, float32.
 *
 * Numerically safe: the row maximum is subtracted before exponentiating, so large
 * inputs cannot overflow expf. The row sum is accumulated in double. Rows are
 * independent and split across OpenMP threads.
 */
#include <math.h>
#include <stdint.h>

void softmax_rows(const float *X, float *Y, int64_t R, int64_t C) {
#pragma omp parallel for schedule(static) if (R * C > 65536)
    for (int64_t r = 0; r < R; r++) {
        const float *x = X + r * C;
        float *y = Y + r * C;
        float m = -INFINITY;
        int has_nan = 0;
        for (int64_t c = 0; c < C; c++) {
            if (isnan(x[c])) has_nan = 1;
            m = x[c] > m ? x[c] : m;
        }
        if (has_nan) m = NAN; /* like the reference: NaN anywhere poisons the row */
        double sum = 0.0;
        for (int64_t c = 0; c < C; c++) {
            y[c] = expf(x[c] - m);
            sum += y[c];
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t c = 0; c < C; c++) y[c] *= inv;
    }
}
