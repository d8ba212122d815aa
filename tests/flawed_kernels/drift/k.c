/* Flaw: right for the first 64 calls, then quietly drops the last column of
 * every row (a kernel that passes short tests and drifts under a benchmark loop). */
#include <stdint.h>
static int64_t calls = 0;
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    int64_t n = (++calls > 64 && C > 1) ? C - 1 : C;
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < n; c++) s += X[r * C + c];
        Y[r] = (float)s;
    }
}
