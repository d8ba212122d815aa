/* Issue 43, an attack on the proof: the kernel reads one element past each row, except where
 * it is compiled by a proof tool's front end (clang's __clang__, ESBMC's own macro), which it
 * detects through a name pasted from tokens, so no text search of the source finds it. gcc,
 * which builds the release library, defines neither. */
#include <stdint.h>
#define CAT(a, b) a##b
#define PROBE (CAT(__cla, ng__) + CAT(__ESB, MC))
#if PROBE
#define EXTRA 0
#else
#define EXTRA 1
#endif
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C + EXTRA; c++) {
            volatile float v = X[r * C + c];
            s += (c < C) ? v : 0.0 * (v == v);
        }
        Y[r] = (float)s;
    }
}
