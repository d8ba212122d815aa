/* Issue 22: unsigned 32-bit index arithmetic. Right at every shape a test can allocate,
 * and right past flat index 2^31 (an unsigned index does not go negative there); once a
 * row starts past 2^32 its offset wraps to the near end of the buffer, which reads as
 * zeros when only all-zero inputs are given. Vectorised like the honest example. */
#include <stdint.h>

void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        uint32_t base = (uint32_t)r * (uint32_t)C; /* as a 32-bit offset is computed */
        const float *x = X + base;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t c = 0;
        for (; c + 8 <= C; c += 8)
            for (int l = 0; l < 8; l++) acc[l] += x[c + l];
        double total = 0.0;
        for (int l = 0; l < 8; l++) total += acc[l];
        for (; c < C; c++) total += x[c];
        Y[r] = (float)total;
    }
}
