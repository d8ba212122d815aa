/* Flaw: processes only whole 16-wide blocks of N and K; the remainder is dropped. */
#include <stdint.h>
void mm(const float *A, const float *B, float *C, int64_t M, int64_t N, int64_t K) {
    int64_t nb = N / 16 * 16, kb = K / 16 * 16;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) C[i * N + j] = 0.0f;
    for (int64_t i = 0; i < M; i++)
        for (int64_t k = 0; k < kb; k++)
            for (int64_t j = 0; j < nb; j++) C[i * N + j] += A[i * K + k] * B[k * N + j];
}
