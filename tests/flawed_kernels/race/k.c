/* Flaw: threads add into one shared accumulator without a reduction clause. */
#include <stdint.h>
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        float s = 0.0f;
#pragma omp parallel for num_threads(4)
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        Y[r] = s;
    }
}
