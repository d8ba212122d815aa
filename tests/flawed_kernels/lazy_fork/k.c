/* Family "lazy outputs", by process: the call forks and returns at once; the child,
 * which shares the output memory, writes the answer a few milliseconds later. No
 * thread of the kernel's process outlives the call, so only the processes it leaves
 * alive at the answer give it away. */
#include <stdint.h>
#include <time.h>
#include <unistd.h>

static void work(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        Y[r] = (float)s;
    }
}

void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    pid_t kid = fork();
    if (kid == 0) {
        struct timespec ts = {0, 3000000};
        nanosleep(&ts, 0);
        volatile double burn = 0; /* and keep a CPU busy after the call, as real work would */
        for (long i = 0; i < 20000000; i++) burn += 1.0;
        work(X, Y, R, C);
        _exit(0);
    }
    if (kid < 0) work(X, Y, R, C);
}
