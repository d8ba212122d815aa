/* Family "harness crash": the kernel finds the worker's answer pipe (argv[4] in
 * /proc/self/cmdline) and writes an answer the worker never sends (a failure status)
 * on its first call, hoping the parent takes it for its own error and gives no report. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int done;

static int answer_fd(void) {
    char buf[4096];
    int fd = open("/proc/self/cmdline", O_RDONLY);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    char *p = buf;
    for (int i = 0; i < 4 && p < buf + n; i++) p += strlen(p) + 1;
    return p < buf + n ? atoi(p) : -1;
}

void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    if (!done) {
        done = 1;
        int fd = answer_fd();
        int64_t status[2] = {7, 0};
        if (fd >= 0 && write(fd, status, sizeof status) < 0) done = 2;
    }
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        Y[r] = (float)s;
    }
}
