/* Y[r] = sum of X[r, :] for each of R rows of length C, float32.
 *
 * Eight independent float accumulators let the compiler keep them in one vector
 * register without -ffast-math (the summation order is fixed by the code, so
 * results are deterministic); the lanes are combined in double at the end.
 */
#include <stdint.h>

void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        const float *x = X + r * C;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t c = 0;
        for (; c + 8 <= C; c += 8)
            for (int l = 0; l < 8; l++) acc[l] += x[c + l];
        double total = 0.0;
        for (int l = 0; l < 8; l++) total += acc[l];
        for (; c < C; c++) total += x[c]; /* the remainder */
        Y[r] = (float)total;
    }
}
