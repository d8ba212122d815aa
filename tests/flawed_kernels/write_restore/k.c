/* Family "input mutation", hidden: the kernel uses its input as scratch (it scales the row
 * in place, sums it, then writes the original bits back), so the inputs compare equal
 * before and after every call; a caller reading the input from another thread meanwhile
 * sees garbage. */
#include <stdint.h>
#include <string.h>
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    volatile float *w = (volatile float *)X; /* volatile: the compiler keeps every store */
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) {
            float keep = w[r * C + c];
            w[r * C + c] = keep * 2.0f;
            s += 0.5 * w[r * C + c];
            w[r * C + c] = keep;
        }
        Y[r] = (float)s;
    }
}
