/* Round 3 leftover: A and B rounded to bfloat16 (8 significant bits) where K >= 4096, as
 * a kernel feeding bf16 tensor cores would; the sums stay float32. The norm-aware bound
 * alone let it pass at K = 4096 and 65536; tied to what float32 reaches, it fails. */
#include <stdint.h>
#include <string.h>

static float bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

void mm(const float *A, const float *B, float *C, int64_t M, int64_t N, int64_t K) {
    int narrow = K >= 4096;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float s = 0.0f;
            for (int64_t p = 0; p < K; p++) {
                float a = A[i * K + p], b = B[p * N + j];
                if (narrow) { a = bf16(a); b = bf16(b); }
                s += a * b;
            }
            C[i * N + j] = s;
        }
}
