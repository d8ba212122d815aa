/* Run-queue laundering: each call clone()s a CLONE_VM helper process (not a thread, so
 * /proc/<worker>/task does not list it) that does 60 % of the rows on the same CPU, while
 * the calling thread, SCHED_IDLE, does the rest and then spins. The helper's time shows
 * as the caller's run-queue wait, which a bench that subtracts the main thread's waits
 * and floors at its threads' CPU would not count. Same rows as ../twin. */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>

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

struct job { const float *A, *B; float *C; int64_t N, K, r0, r1; int done; };

static int helper(void *arg) {
  struct job *j = arg;
  rows(j->A, j->B, j->C, j->N, j->K, j->r0, j->r1);
  __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
  return 0;
}

#define STACK (1 << 20)
static char *stack;

void matmul(const float *A, const float *B, float *C, int64_t M, int64_t N, int64_t K) {
  if (!stack) {
    stack = malloc(STACK);
    struct sched_param p = {0};
    /* idle for the caller; a helper it clones is reset to the normal policy */
    sched_setscheduler(0, SCHED_IDLE | SCHED_RESET_ON_FORK, &p);
  }
  int64_t split = M * 6 / 10;
  struct job j = {A, B, C, N, K, 0, split, 0};
  int pid = stack ? clone(helper, stack + STACK, CLONE_VM | SIGCHLD, &j) : -1;
  if (pid < 0) {
    rows(A, B, C, N, K, 0, M);
    return;
  }
  rows(A, B, C, N, K, split, M);
  while (!__atomic_load_n(&j.done, __ATOMIC_ACQUIRE)) {
  }
  waitpid(pid, 0, 0);
}
