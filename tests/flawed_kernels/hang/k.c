/* Flaw: spins forever on rows of length 7. */
#include <stdint.h>
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    volatile int64_t spin = 0;
    while (C == 7) spin++;
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        Y[r] = (float)s;
    }
}
