/* Family "harness crash": over its calls the kernel makes 3,000 nested folders in its
 * private folder (150 more levels per call, keeping the deepest open), so a recursive
 * clean-up of that folder raises RecursionError after the checks ran, losing the report
 * and leaving the folder on the host. Its answers are right. */
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static int deepest = -2, levels;

void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    if (deepest == -2) deepest = open(".", O_RDONLY | O_DIRECTORY);
    for (int i = 0; i < 150 && deepest >= 0 && levels < 3000; i++, levels++) {
        if (mkdirat(deepest, "d", 0700) != 0) break;
        int next = openat(deepest, "d", O_RDONLY | O_DIRECTORY);
        close(deepest);
        deepest = next;
    }
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        Y[r] = (float)s;
    }
}
