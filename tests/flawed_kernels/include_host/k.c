/* Family "harness leak": the kernel's source includes host files, so the compiler's error
 * messages quote them (the host's MAC address, its name) into the build detail, which
 * `ktl reproduce --sign --submit` would log. The compiler may read only the kernel's
 * folder and the system headers, and diagnostics are reduced to file:line: kind. */
#include <stdint.h>
#include "/sys/class/net/eth0/address"
#include "/etc/hostname"
void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += X[r * C + c];
        Y[r] = (float)s;
    }
}
