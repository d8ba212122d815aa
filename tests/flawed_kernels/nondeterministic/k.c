/* Flaw: every other call rounds its sums one ULP up (as a kernel whose reduction
 * order depends on thread timing would): within tolerance, but not reproducible. */
#include <math.h>
#include <stdint.h>
static int64_t calls = 0;
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    int odd = (int)(calls++ & 1);
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        float f = (float)s;
        Y[r] = odd && isfinite(f) ? nextafterf(f, INFINITY) : f;
    }
}
