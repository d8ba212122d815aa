/* Family "sanitizer two-face", the other end: in the release build the kernel reads the
 * element before each row's start (multiplied by zero); built with AddressSanitizer it
 * does not, so the sanitizer row passes. */
#include <stdint.h>
#ifdef __SANITIZE_ADDRESS__
#define KTL_FIRST 0
#else
#define KTL_FIRST (-1)
#endif
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = KTL_FIRST; c < C; c++) {
            volatile float v = X[r * C + c];
            s += (c >= 0) ? v : 0.0 * (v == v);
        }
        Y[r] = (float)s;
    }
}
