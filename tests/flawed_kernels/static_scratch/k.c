/* Attack 3 of issue 10: one static scratch row shared by all calls. Correct alone;
 * two threads calling at once (two models served by one process) read each other's
 * rows. */
#include <stdint.h>
static volatile float row[1 << 16];
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        int64_t n = C < (1 << 16) ? C : (1 << 16);
        for (int64_t c = 0; c < n; c++) row[c] = X[r * C + c];
        double s = 0.0;
        for (int64_t c = 0; c < n; c++) s += row[c];
        for (int64_t c = n; c < C; c++) s += X[r * C + c];
        Y[r] = (float)s;
    }
}
