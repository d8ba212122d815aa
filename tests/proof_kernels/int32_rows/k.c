/* Issue 43: the honest row sum with its flat index computed in 32 bits. Right at every shape
 * a test can allocate; once r * C passes 2^31 the index overflows (undefined behaviour; in
 * practice a negative offset). proof.overflow must flag the product. */
#include <stdint.h>
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    int rows = (int)R, cols = (int)C;
    for (int r = 0; r < rows; r++) {
        float s = 0.0f;
        for (int c = 0; c < cols; c++) s += X[r * cols + c];
        Y[r] = s;
    }
}
