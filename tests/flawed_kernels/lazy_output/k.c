/* Family "lazy outputs": the call returns at once and a background thread does the
 * work afterwards, outside the timed region (and after a harness that reads the
 * outputs late would look). */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

struct job { const float *X; float *Y; int64_t R, C; };

static void *later(void *arg) {
    struct job j = *(struct job *)arg;
    struct timespec ts = {0, 3000000};
    nanosleep(&ts, 0);
    volatile double burn = 0; /* and keep the CPU busy after the call, as real work would */
    for (long i = 0; i < 20000000; i++) burn += 1.0;
    for (int64_t r = 0; r < j.R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < j.C; c++) s += j.X[r * j.C + c];
        j.Y[r] = (float)s;
    }
    return 0;
}

void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    static struct job jobs[64];
    static unsigned next = 0;
    struct job *j = &jobs[next++ % 64];
    j->X = X; j->Y = Y; j->R = R; j->C = C;
    pthread_t t;
    if (pthread_create(&t, 0, later, j) == 0) pthread_detach(t);
}
