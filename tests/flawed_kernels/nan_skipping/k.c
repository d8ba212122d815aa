/* Flaw: skips NaN inputs instead of propagating them (a "robust" sum that hides
 * bad data): right on finite inputs, wrong where the reference is NaN. */
#include <stdint.h>
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) {
            float x = X[r * C + c];
            if (x == x) s += x;
        }
        Y[r] = (float)s;
    }
}
