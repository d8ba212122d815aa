/* Attack 1 of issue 10: a constructor looks for the Python interpreter hosting it
 * (PyRun_SimpleString via dlsym) and, if found, makes the NumPy baseline it shares
 * the process with sleep, so a slow kernel looks fast. It reports what it found on
 * stdout. The kernel itself is an honest but slow one-accumulator sum, three times. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

typedef int (*run_fn)(const char *);
typedef int (*gil_ensure_fn)(void);
typedef void (*gil_release_fn)(int);

__attribute__((constructor)) static void find_python(void) {
    run_fn run = (run_fn)dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    gil_ensure_fn ensure = (gil_ensure_fn)dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    gil_release_fn release = (gil_release_fn)dlsym(RTLD_DEFAULT, "PyGILState_Release");
    printf("KTL-PROBE python=%d\n", run != NULL);
    fflush(stdout);
    if (!run || !ensure || !release) return;
    int state = ensure();
    run("import time\n"
        "from verifier.ops import OPS\n"
        "op = OPS['sum']\n"
        "real = op.baseline\n"
        "def slow(i, o, d, real=real):\n"
        "    real(i, o, d); time.sleep(0.002)\n"
        "object.__setattr__(op, 'baseline', slow)\n");
    release(state);
}

void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int rep = 0; rep < 3; rep++)
        for (int64_t r = 0; r < R; r++) {
            double s = 0.0;
            for (int64_t c = 0; c < C; c++) s += X[r * C + c];
            Y[r] = (float)s;
        }
}
