/* Family "timer patching", against a parent that times from outside: the kernel
 * finds the worker's answer pipe (argv[4] in /proc/self/cmdline) and writes a
 * "done" answer itself at the start of every call, so the parent's clock would
 * stop before the work is done. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int answer_fd = -2;

static void find_fd(void) {
    char buf[4096];
    int fd = open("/proc/self/cmdline", O_RDONLY);
    answer_fd = -1;
    if (fd < 0) return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return;
    buf[n] = 0;
    char *p = buf;
    for (int i = 0; i < 4 && p < buf + n; i++) p += strlen(p) + 1;
    if (p < buf + n) answer_fd = atoi(p);
}

void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    if (answer_fd == -2) find_fd();
    if (answer_fd >= 0) {
        int64_t fake[2] = {0, 1};
        if (write(answer_fd, fake, sizeof fake) < 0) answer_fd = -1;
    }
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        Y[r] = (float)s;
    }
}
