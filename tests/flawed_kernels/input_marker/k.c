/* An honest row sum that prints the sanitizer driver's old "inputs mutated" marker
 * (and a fake case number) on every call. Text from the kernel's process decides
 * nothing: this kernel must pass every row, neither failing for the marker nor
 * hiding anything behind it. */
#include <stdint.h>
#include <stdio.h>
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    fprintf(stderr, "KTL-INPUT-MUTATED 0\n");
    printf("KTL-CASE 0\n");
    fflush(stdout);
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        Y[r] = (float)s;
    }
}
