/* Attack 2 of issue 10: correct only while its output buffer starts with the
 * poison word a harness once published (0x7FC0DEAD); 1% off otherwise. */
#include <stdint.h>
#include <string.h>
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    uint32_t first = 0;
    if (R) memcpy(&first, Y, 4);
    float scale = first == 0x7FC0DEADu ? 1.0f : 1.01f;
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        Y[r] = (float)s * scale;
    }
}
