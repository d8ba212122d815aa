/* Issue 22: an out-of-bounds write only during timing. Right for the first 3000 calls
 * (more than a check makes); from then on each call also writes past the end of its
 * output, 300 floats on (past the 256 canary bytes), and writes back the value it found,
 * so no canary or neighbouring buffer changes: only a guard page in the bench sees it. */
#include <stdint.h>

static long calls;

void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        float s = 0.0f;
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        Y[r] = s;
    }
    if (++calls > 3000) {
        volatile float *past = Y + R + 300;
        float was = *past;
        *past = 1.0f;
        *past = was;
    }
}
