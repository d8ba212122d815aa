/* Flaw: accumulates into C without clearing it first (relies on zeroed output memory). */
#include <stdint.h>
void mm(const float *A, const float *B, float *C, int64_t M, int64_t N, int64_t K) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < N; j++) C[i * N + j] += A[i * K + k] * B[k * N + j];
}
