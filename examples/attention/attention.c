/* O = softmax(Q K^T / sqrt(D)) V over every key, for Q, K, V, O of shape
 * [B, H, S, D], float32, row-major.
 *
 * One query row at a time: scores into a small stack/heap buffer, the maximum
 * subtracted before expf, probabilities and the weighted sum of V rows
 * accumulated in double. Query rows of all heads are split across OpenMP threads.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

void attention(const float *Q, const float *K, const float *V, float *O,
        int64_t B, int64_t H, int64_t S, int64_t D) {
    const float scale = D > 0 ? 1.0f / sqrtf((float)D) : 1.0f;
    const int64_t rows = B * H * S;
#pragma omp parallel
    {
        float *p = malloc(sizeof(float) * (size_t)(S > 0 ? S : 1));
        double *acc = malloc(sizeof(double) * (size_t)(D > 0 ? D : 1));
#pragma omp for schedule(static)
        for (int64_t row = 0; row < rows; row++) {
            const int64_t bh = row / S, i = row % S;
            const float *q = Q + row * D;
            const float *k = K + bh * S * D;
            const float *v = V + bh * S * D;
            const int64_t n = S;
            float m = -INFINITY;
            int has_nan = 0;
            for (int64_t j = 0; j < n; j++) {
                float s = 0.0f;
                for (int64_t d = 0; d < D; d++) s += q[d] * k[j * D + d];
                p[j] = s * scale;
                if (isnan(p[j])) has_nan = 1;
                m = p[j] > m ? p[j] : m;
            }
            if (has_nan) m = NAN;
            double sum = 0.0;
            for (int64_t d = 0; d < D; d++) acc[d] = 0.0;
            for (int64_t j = 0; j < n; j++) {
                const double e = expf(p[j] - m);
                sum += e;
                for (int64_t d = 0; d < D; d++) acc[d] += e * v[j * D + d];
            }
            for (int64_t d = 0; d < D; d++) O[row * D + d] = (float)(acc[d] / sum);
        }
        free(p);
        free(acc);
    }
}
