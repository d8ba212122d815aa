/* Issue 43: reads one element past the input at a single shape (R=6, C=5) only, and
 * multiplies it by zero, so every answer is right whenever that memory holds a finite value:
 * every dynamic row passes. Only a proof over every shape up to the bounds finds it. */
#include <stdint.h>
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        Y[r] = (float)s;
    }
    if (R == 6 && C == 5) {
        volatile float past = X[R * C];
        Y[0] += 0.0f * (past == past);
    }
}
