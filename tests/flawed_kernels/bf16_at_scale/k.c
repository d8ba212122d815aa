/* Issue 22: reduced precision only where the speed is claimed. float32 accumulation
 * for K < 256 (every shape a check drew before: K up to ~160), and a "fast path" for
 * the bench shape and beyond that keeps its running sums in bfloat16 (8 significant
 * bits), as a kernel using bf16 hardware accumulation would. */
#include <stdint.h>
#include <string.h>

static float bf16(float x) { /* round to nearest even, to 8 significant bits */
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

void mm(const float *A, const float *B, float *C, int64_t M, int64_t N, int64_t K) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float s = 0.0f;
            for (int64_t p = 0; p < K; p++) {
                s += A[i * K + p] * B[p * N + j];
                if (K >= 256) s = bf16(s);
            }
            C[i * N + j] = s;
        }
}
