/* C[M,N] = A[M,K] @ B[K,N], float32, row-major.
 *
 * Cache blocking: the K and N loops are tiled so that a panel of B stays in L1/L2
 * while a block of rows of A streams through; the innermost loop runs over
 * contiguous columns of B and C (i-k-j order), which gcc vectorizes.
 * Rows of C are split across OpenMP threads (each thread owns whole rows, so no
 * two threads ever write the same element).
 */
#include <stdint.h>

#define BLOCK_K 128
#define BLOCK_N 256

void matmul_blocked(const float *A, const float *B, float *C, int64_t M, int64_t N, int64_t K) {
#pragma omp parallel for schedule(static) if (M * N * K > 32768)
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * N;
        for (int64_t j = 0; j < N; j++) c[j] = 0.0f;
        for (int64_t k0 = 0; k0 < K; k0 += BLOCK_K) {
            int64_t k1 = k0 + BLOCK_K < K ? k0 + BLOCK_K : K;
            for (int64_t j0 = 0; j0 < N; j0 += BLOCK_N) {
                int64_t j1 = j0 + BLOCK_N < N ? j0 + BLOCK_N : N;
                for (int64_t k = k0; k < k1; k++) {
                    const float a = A[i * K + k];
                    const float *b = B + k * N;
                    for (int64_t j = j0; j < j1; j++) c[j] += a * b[j];
                }
            }
        }
    }
}
