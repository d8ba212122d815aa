/* Flaw: caches answers keyed by a hash of the first 16 inputs of the buffer, so a
 * benchmark that cycles through a few input sets gets cached answers, fast. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 8
static uint64_t keys[SLOTS];
static float *answers[SLOTS];
static int64_t next_slot = 0;

static uint64_t key_of(const float *X, int64_t R, int64_t C) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)R ^ ((uint64_t)C << 32);
    int64_t n = R * C < 16 ? R * C : 16;
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &X[i], 4);
        h = (h ^ bits) * 1099511628211ULL;
    }
    return h;
}

void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    uint64_t key = key_of(X, R, C);
    for (int s = 0; s < SLOTS; s++)
        if (answers[s] && keys[s] == key) {
            memcpy(Y, answers[s], (size_t)R * sizeof(float));
            return;
        }
    for (int64_t r = 0; r < R; r++) {
        double acc = 0.0;
        for (int64_t c = 0; c < C; c++) acc += X[r * C + c];
        Y[r] = (float)acc;
    }
    int s = (int)(next_slot++ % SLOTS);
    free(answers[s]);
    answers[s] = malloc((size_t)R * sizeof(float) + 1);
    if (answers[s]) {
        if (R) memcpy(answers[s], Y, (size_t)R * sizeof(float));
        keys[s] = key;
    }
}
