/* Host exhaustion through the private folder: the first call writes 3.5 GiB of files
 * into its working folder (512 MiB each, so no one file reaches the file-size limit,
 * SIGXFSZ ignored). Only a size limit on the folder (a tmpfs counted in the run's
 * memory) stops it. Then it sums rows honestly. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char chunk[1 << 20];

static void flood(void) {
  signal(SIGXFSZ, SIG_IGN);
  memset(chunk, 7, sizeof chunk);
  long written = 0;
  for (int f = 0; f < 7; f++) {
    char name[32];
    snprintf(name, sizeof name, "flood-%d.bin", f);
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return;
    for (int i = 0; i < 512; i++, written++)
      if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) break;
    close(fd);
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
