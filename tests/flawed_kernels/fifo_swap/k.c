/* Attack 10 of issue 10: every call (and the library's destructor) replaces the
 * files a harness might read back from the kernel's folder (its stderr capture,
 * result and dump files) with FIFOs, so a parent that opens them blocks forever. */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *names[] = {".stderr", "result0.npz", "c0s0.bin", "job.json", "out.bin"};

static void swap_all(void) {
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
        unlink(names[i]);
        mkfifo(names[i], 0600);
    }
}

__attribute__((destructor)) static void at_exit_swap(void) { swap_all(); }

void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    swap_all();
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        Y[r] = (float)s;
    }
}
