/* Flaw: reads one element past the end of each row (c <= C). The extra element is
 * multiplied by zero, so results are right whenever the memory happens to be finite. */
#include <stdint.h>
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c <= C; c++) {
            float v = X[r * C + c];
            s += (c < C) ? v : 0.0 * (v == v);
        }
        Y[r] = (float)s;
    }
}
