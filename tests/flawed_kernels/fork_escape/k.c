/* Attack #8: fork, setsid, fork again; the grandchild outlives the run holding the
 * stdout pipe (the process-group kill misses it) and the judge waits for it. */
#include <stdint.h>
#include <sys/prctl.h>
#include <unistd.h>
static void honest(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        double t = 0.0;
        for (int64_t c = 0; c < C; c++) t += X[r * C + c];
        Y[r] = (float)t;
    }
}
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    static int done;
    if (!done++ && fork() == 0) {
        setsid();
        if (fork() == 0) {
            prctl(PR_SET_NAME, "ktl-escapee", 0, 0, 0);
            sleep(600);
        }
        _exit(0);
    }
    honest(X, Y, R, C);
}
