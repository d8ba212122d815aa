/* Attack 4 of issue 10: 32-bit index arithmetic. Right at every shape a test can
 * allocate; once a flat index passes 2^31 it overflows (undefined behaviour: here
 * a negative offset, read far before the buffer). */
#include <stdint.h>
void mm(const float *A, const float *B, float *C, int64_t M, int64_t N, int64_t K) {
    int m = (int)M, n = (int)N, k = (int)K;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float s = 0.0f;
            for (int p = 0; p < k; p++) {
                volatile int a = i * k + p, b = p * n + j; /* as a 32-bit index is computed */
                s += A[a] * B[b];
            }
            C[i * n + j] = s;
        }
}
