/* Flaw: subtracts the row maximum in place in the input buffer. */
#include <math.h>
#include <stdint.h>
void softmax_rows(const float *X, float *Y, int64_t R, int64_t C) {
    float *x = (float *)X;
    for (int64_t r = 0; r < R; r++) {
        float m = -INFINITY;
        for (int64_t c = 0; c < C; c++) m = x[r * C + c] > m ? x[r * C + c] : m;
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) { x[r * C + c] -= m; s += exp(x[r * C + c]); }
        for (int64_t c = 0; c < C; c++) Y[r * C + c] = (float)(exp(x[r * C + c]) / s);
    }
}
