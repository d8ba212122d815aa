/* Flaw: softmax over whole 8-wide blocks of columns only; the C % 8 tail columns are never
   written (the rest of the row is right). */
#include <math.h>
#include <stdint.h>
void sm(const float *X, float *Y, int64_t R, int64_t C) {
    int64_t cb = C / 8 * 8;
    for (int64_t r = 0; r < R; r++) {
        const float *x = X + r * C;
        float *y = Y + r * C;
        if (cb == 0) {
            for (int64_t j = 0; j < C; j++) y[j] = 0.0f;
            continue;
        }
        float m = x[0];
        for (int64_t j = 1; j < C; j++) m = x[j] > m ? x[j] : m;
        float s = 0.0f;
        for (int64_t j = 0; j < C; j++) s += expf(x[j] - m);
        for (int64_t j = 0; j < cb; j++) y[j] = expf(x[j] - m) / s;
    }
}
