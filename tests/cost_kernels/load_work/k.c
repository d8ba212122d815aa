/* CPU before the first command: a constructor that works for ~300 ms of CPU while the
 * library loads (a "precomputed table"), before the parent sends any command, then the
 * twin's row loop. That CPU is the kernel's: charged to its first timed batch and, past
 * a small share of its CPU inside the calls, a finding (cpu_outside_calls). */
#include <stdint.h>
#include <time.h>

static volatile double table;

__attribute__((constructor)) static void precompute(void) {
  struct timespec t0, t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
  double x = 1.0;
  do {
    for (int i = 0; i < 100000; i++) x = x * 1.0000001 + 1e-9;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 300000000L);
  table = x;
}

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
