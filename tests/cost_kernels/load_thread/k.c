/* CPU before the first command, on another thread: a constructor starts a thread that
 * works for ~300 ms of CPU, from the library's loading into the first calls, then exits;
 * the calls are the twin's row loop. Every task's CPU is the kernel's at any time: what
 * it used before the first answer and between the calls is charged and a finding. */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

static volatile double table;

static void *precompute(void *arg) {
  (void)arg;
  struct timespec t0, t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  double x = 1.0;
  do {
    for (int i = 0; i < 100000; i++) x = x * 1.0000001 + 1e-9;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 300000000L);
  table = x;
  return NULL;
}

__attribute__((constructor)) static void start(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, precompute, NULL) == 0) pthread_detach(t);
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
