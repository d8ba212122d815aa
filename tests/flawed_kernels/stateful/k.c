/* Flaw: caches the answer by input pointer, so a second call on the same buffers
 * with new contents returns the previous answer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
static const float *last_x = 0;
static int64_t last_r = -1, last_c = -1;
static float *cache = 0;
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    if (X == last_x && R == last_r && C == last_c && cache) {
        if (R) memcpy(Y, cache, (size_t)R * sizeof(float));
        return;
    }
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        Y[r] = (float)s;
    }
    free(cache);
    cache = malloc((size_t)R * sizeof(float) + 1);
    if (cache && R) memcpy(cache, Y, (size_t)R * sizeof(float));
    last_x = X; last_r = R; last_c = C;
}
