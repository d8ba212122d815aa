/* Flaw: allocates (and touches) memory without bound on rows of length 7. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
void *volatile ktl_hoard = 0;
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    while (C == 7) {
        char *p = malloc(64 << 20);
        memset(p, 1, 64 << 20);
        *(void **)p = ktl_hoard;
        ktl_hoard = p;
    }
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        Y[r] = (float)s;
    }
}
