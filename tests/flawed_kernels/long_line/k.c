/* Attack #9: one 768 MiB line on stdout, to make the judge buffer it all. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
static void honest(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        double t = 0.0;
        for (int64_t c = 0; c < C; c++) t += X[r * C + c];
        Y[r] = (float)t;
    }
}
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    static char chunk[1 << 20];
    memset(chunk, 'A', sizeof chunk);
    for (int i = 0; i < 768; i++) fwrite(chunk, 1, sizeof chunk, stdout);
    fflush(stdout);
    honest(X, Y, R, C);
}
