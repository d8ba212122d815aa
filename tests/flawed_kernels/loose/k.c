/* Flaw: a crude exp (Schraudolph-style bit trick plus one correction) with a
 * relative error around 1e-3, far outside float32 accuracy. */
#include <math.h>
#include <stdint.h>
#include <string.h>
static float fast_exp(float x) {
    if (x < -87.0f) return 0.0f;
    float t = x * 1.442695041f;
    float fi = floorf(t), f = t - fi;
    float p = 1.0f + f * (0.6931472f + f * 0.2402265f);
    int32_t bits = (int32_t)(fi + 127.0f) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return scale * p;
}
void softmax_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        const float *x = X + r * C;
        float *y = Y + r * C;
        float m = -INFINITY;
        for (int64_t c = 0; c < C; c++) m = x[c] > m ? x[c] : m;
        float s = 0.0f;
        for (int64_t c = 0; c < C; c++) { y[c] = fast_exp(x[c] - m); s += y[c]; }
        for (int64_t c = 0; c < C; c++) y[c] /= s;
    }
}
