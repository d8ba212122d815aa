/* Family "sanitizer two-face": in the release build the kernel reads one element past the
 * end of every row (the extra element is multiplied by zero, so answers stay right while the
 * memory there is finite); built with AddressSanitizer (__SANITIZE_ADDRESS__, a compile-time
 * switch) it reads nothing past its rows, so the sanitizer row passes. */
#include <stdint.h>
#ifdef __SANITIZE_ADDRESS__
#define KTL_EXTRA 0
#else
#define KTL_EXTRA 1
#endif
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C + KTL_EXTRA; c++) {
            volatile float v = X[r * C + c];
            s += (c < C) ? v : 0.0 * (v == v);
        }
        Y[r] = (float)s;
    }
}
