/* The honest twin of launder, hidden_parallel and early_start: the same row loop, all
 * rows on the calling thread, nothing else. Their speed-ups may not exceed this one's.
 * `rows` is noinline here and in every kernel of this folder, so all of them run the same
 * machine code for it: inlined into matmul, GCC 12 -O2 made a loop that took 1.7-2x the
 * CPU of the called one (920 vs 450 us a call at 96^3), and a forgery compared with that
 * twin looked 1.7x faster than it was. */
#include <stdint.h>

__attribute__((noinline, aligned(64))) static void rows(const float *A, const float *B, float *C, int64_t N, int64_t K,
                 int64_t r0, int64_t r1) {
  for (int64_t i = r0; i < r1; i++) {
    float *c = C + i * N;
    for (int64_t j = 0; j < N; j++) c[j] = 0.0f;
    for (int64_t k = 0; k < K; k++) {
      float a = A[i * K + k];
      const float *b = B + k * N;
      for (int64_t j = 0; j < N; j++) c[j] += a * b[j];
    }
  }
}

void matmul(const float *A, const float *B, float *C, int64_t M, int64_t N, int64_t K) {
  rows(A, B, C, N, K, 0, M);
}
