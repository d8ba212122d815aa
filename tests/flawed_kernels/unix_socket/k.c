/* Attack #5: reach a daemon outside the sandbox through a pathname UNIX socket (which
 * Landlock up to ABI 7 does not mediate) and through an abstract one. */
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
static void honest(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        double t = 0.0;
        for (int64_t c = 0; c < C; c++) t += X[r * C + c];
        Y[r] = (float)t;
    }
}
static void knock(const char *path, int abstract) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    strncpy(sa.sun_path + abstract, path, sizeof sa.sun_path - 2);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) (void)!write(fd, "pwned\n", 6);
    close(fd);
}
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    knock("/tmp/ktl-attack-unix.sock", 0);
    knock("ktl-attack-abstract", 1);
    honest(X, Y, R, C);
}
