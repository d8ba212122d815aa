/* Flaw: dereferences a null pointer on single-column outputs (N == 1). */
#include <stdint.h>
void mm(const float *A, const float *B, float *C, int64_t M, int64_t N, int64_t K) {
    float *volatile out = (N == 1) ? (float *)0 : C;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0.0;
            for (int64_t k = 0; k < K; k++) s += (double)A[i * K + k] * B[k * N + j];
            out[i * N + j] = (float)s;
        }
}
