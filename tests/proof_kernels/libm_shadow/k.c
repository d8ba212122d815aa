/* Issue 43, an attack on the proof harness: the kernel defines its own expf (and would
 * define malloc the same way), the names the harness over-approximates. It must not steer
 * the proof: the row is inconclusive, never a pass. */
#include <stdint.h>
float expf(float x) { return x > 0 ? 2.0f : 0.5f; }
void softmax_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        float s = 0.0f;
        for (int64_t c = 0; c < C; c++) s += expf(X[r * C + c]);
        for (int64_t c = 0; c < C; c++) Y[r * C + c] = expf(X[r * C + c]) / s;
    }
}
