/* Family "sanitizer two-face": the race of race_pthread, with the thread started by a
 * token-pasted name (CAT(pthread_, create)), so no text search of the sources finds a
 * thread and ThreadSanitizer would be skipped; the built library still imports the
 * thread start. Two threads add their halves of every row into the same output
 * element without synchronisation. */
#define CAT(a, b) a##b
#include <pthread.h>
#include <stdint.h>

struct job { const float *X; float *Y; int64_t R, C, c0, c1; };

static void *half(void *arg) {
    struct job *j = arg;
    for (int64_t r = 0; r < j->R; r++) {
        float s = 0.0f;
        for (int64_t c = j->c0; c < j->c1; c++) s += j->X[r * j->C + c];
        j->Y[r] += s;
    }
    return 0;
}

void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) Y[r] = 0.0f;
    struct job a = {X, Y, R, C, 0, C / 2}, b = {X, Y, R, C, C / 2, C};
    pthread_t t;
    CAT(pthread_, create)(&t, 0, half, &b);
    half(&a);
    pthread_join(t, 0);
}
