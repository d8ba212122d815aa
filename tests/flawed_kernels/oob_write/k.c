/* Flaw: writes a scratch value one element past the end of the output. */
#include <math.h>
#include <stdint.h>
void softmax_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        const float *x = X + r * C;
        float *y = Y + r * C;
        float m = -INFINITY;
        for (int64_t c = 0; c < C; c++) m = x[c] > m ? x[c] : m;
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) { y[c] = expf(x[c] - m); s += y[c]; }
        for (int64_t c = 0; c < C; c++) y[c] = (float)(y[c] / s);
    }
    Y[R * C] = 0.0f;
}
