/* ktl's native worker: the only code of ours in the kernel's process.
 *
 * Built once per op signature by verifier.worker._native (which prepends the KTL_NB,
 * KTL_ND and KTL_PROTO/KTL_ARGS definitions). It dlopens the kernel library,
 * maps the arena memfd the parent shares with it, and answers commands read from
 * a pipe. It judges and times nothing: the parent fills the arenas, takes the
 * time on its own clock, snapshots the outputs and decides.
 *
 * argv: library entry cmd_fd ans_fd mem_fd mem_bytes
 * command: int64 words {op, count, slot[KTL_NB], dims[KTL_ND], lazy[KTL_NB], arena[count]}
 *   lazy[i] > 0: buffer i is a fresh private zero mapping of lazy[i] bytes (a multiple of
 *   the page size), read-only, whose first and last page are the arena's pages at byte
 *   slot[i] and slot[i] + page (mapped over it, read-only): huge inputs whose ends the
 *   parent wrote, without the memory.
 *   OP_PAIR: count = 2n + 1; arena[0..n) for the first thread, arena[n..2n) for the
 *   second, arena[2n] the byte offset of 4n int64 words where each call's start and end
 *   (CLOCK_MONOTONIC ns) are written: the first thread's at [2i, 2i+1], the second's at
 *   [2n + 2i, 2n + 2i + 1]. The parent reads them only to see whether calls overlapped.
 *   OP_PROTECT: count = 3k words (offset, length, protection) in arena[]: page ranges of
 *   the worker's own mapping of the arenas set PROT_NONE (0), PROT_READ (1) or read-write
 *   (3) -- guard pages and read-only inputs (verifier.worker._arena.Layout.protections).
 * answer:  int64 words {status, value}
 *
 * A SIGSEGV or SIGBUS prints "KTL-FAULT <signal> <offset into the arenas> <r|w|?>" on
 * stdout, then dies of the signal: the parent names the buffer from its layout (the line
 * is the kernel process's word, so it only labels a crash the parent saw anyway).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <time.h>
#include <unistd.h>

#define KTL_MAX_BATCH 65536
enum { OP_NOP = 0, OP_CALL = 1, OP_PAIR = 2, OP_PROTECT = 3, OP_QUIT = 9 };

typedef void (*ktl_fn)(KTL_PROTO);
static ktl_fn fn;
static unsigned char *mem;
static uint64_t mem_bytes;
static int cmd_fd, ans_fd, mem_fd;
static float *lazy_ptr[KTL_NB];
static size_t lazy_len[KTL_NB];

static int read_all(void *dst, size_t n) {
  unsigned char *p = dst;
  while (n) {
    ssize_t r = read(cmd_fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    p += r;
    n -= (size_t)r;
  }
  return 1;
}

static void answer(int64_t status, int64_t value) {
  int64_t a[2] = {status, value};
  const unsigned char *p = (const unsigned char *)a;
  size_t n = sizeof a;
  while (n) {
    ssize_t w = write(ans_fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) _exit(3);
    p += w;
    n -= (size_t)w;
  }
}

/* Async-signal-safe: the fault's signal, its offset from the arenas' start, read or write. */
static void on_fault(int sig, siginfo_t *si, void *context) {
  char line[96] = "KTL-FAULT ";
  size_t n = 10;
  int64_t at = (int64_t)((uintptr_t)si->si_addr - (uintptr_t)mem);
  char digits[24];
  int k = 0;
  line[n++] = (char)('0' + sig / 10);
  line[n++] = (char)('0' + sig % 10);
  line[n++] = ' ';
  uint64_t u = at < 0 ? (uint64_t)(-(at + 1)) + 1 : (uint64_t)at;
  if (at < 0) line[n++] = '-';
  do digits[k++] = (char)('0' + u % 10); while ((u /= 10) && k < 23);
  while (k) line[n++] = digits[--k];
  line[n++] = ' ';
  char how = '?';
#if defined(__x86_64__)
  ucontext_t *uc = context;
  how = (uc->uc_mcontext.gregs[REG_ERR] & 2) ? 'w' : 'r';
#else
  (void)context;
#endif
  line[n++] = how;
  line[n++] = '\n';
  ssize_t w = write(1, line, n);
  (void)w;
  /* SA_RESETHAND: returning re-runs the access, which now kills the process */
}

static void catch_faults(void) {
  static unsigned char alt[1 << 16];
  stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0};
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
}

/* Set page protections of our mapping of the arenas; 0 on success, else errno. */
static int protect(const int64_t *words, int64_t count) {
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), mapped = (mem_bytes + page - 1) / page * page;
  for (int64_t i = 0; i + 2 < count; i += 3) {
    int64_t off = words[i], len = words[i + 1], how = words[i + 2];
    int prot = how == 0 ? PROT_NONE : how == 1 ? PROT_READ : PROT_READ | PROT_WRITE;
    if (off < 0 || len <= 0 || (uint64_t)off % page || (uint64_t)off + (uint64_t)len > mapped ||
        (how != 0 && how != 1 && how != 3))
      return EINVAL;
    if (mprotect(mem + off, (size_t)len, prot)) return errno ? errno : EINVAL;
  }
  return 0;
}

static float *ptr(int64_t arena, const int64_t *slot, int i) {
  if (lazy_ptr[i]) return lazy_ptr[i];
  return (float *)(mem + arena + slot[i]);
}

static void call(int64_t arena, const int64_t *slot, const int64_t *d) { fn(KTL_ARGS); }

struct pair_job {
  const int64_t *arenas;
  int64_t rounds; /* calls of this thread */
  const int64_t *slot, *dims;
  int64_t *times;
  int *arrived;
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Both threads spin (yielding now and then, so a partner waiting for a CPU gets one)
 * until both have arrived, so their calls start together; each then calls the kernel on
 * each of its own arenas in turn and writes when each call started and ended. */
static void *pair_runner(void *arg) {
  struct pair_job *j = arg;
  __atomic_add_fetch(j->arrived, 1, __ATOMIC_SEQ_CST);
  for (unsigned spin = 1; __atomic_load_n(j->arrived, __ATOMIC_SEQ_CST) < 2; spin++)
    if (spin % 4096 == 0) sched_yield();
  for (int64_t i = 0; i < j->rounds; i++) {
    int64_t t0 = now_ns();
    call(j->arenas[i], j->slot, j->dims);
    int64_t t1 = now_ns();
    j->times[2 * i] = t0;
    j->times[2 * i + 1] = t1;
  }
  return NULL;
}

static int run_pair(const int64_t *arena, int64_t count, const int64_t *slot, const int64_t *dims) {
  int64_t n = (count - 1) / 2, at = arena[2 * n];
  int64_t *times = (int64_t *)(mem + at);
  int arrived = 0;
  struct pair_job a = {arena, n, slot, dims, times, &arrived};
  struct pair_job b = {arena + n, n, slot, dims, times + 2 * n, &arrived};
  pthread_t ta;
  if (pthread_create(&ta, NULL, pair_runner, &a)) return 0;
  pair_runner(&b);
  pthread_join(ta, NULL);
  return 1;
}

static int map_lazy(const int64_t *lazy, const int64_t *slot) {
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  for (int i = 0; i < KTL_NB; i++) {
    if (lazy_ptr[i]) munmap(lazy_ptr[i], lazy_len[i]);
    lazy_ptr[i] = NULL;
    lazy_len[i] = 0;
    if (lazy[i] <= 0) continue;
    uint64_t len = (uint64_t)lazy[i], at = (uint64_t)slot[i];
    if (len % page || len < 2 * page || at % page || at + 2 * page > mem_bytes) {
      errno = EINVAL;
      return 0;
    }
    /* untouched private anonymous pages read as zero and cost no memory */
    unsigned char *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                            -1, 0);
    if (p == MAP_FAILED) return 0;
    madvise(p, len, MADV_HUGEPAGE); /* reads map the huge zero page: fewer faults */
    lazy_ptr[i] = (float *)p;
    lazy_len[i] = len;
    if (mmap(p, page, PROT_READ, MAP_SHARED | MAP_FIXED, mem_fd, (off_t)at) == MAP_FAILED ||
        mmap(p + len - page, page, PROT_READ, MAP_SHARED | MAP_FIXED, mem_fd,
             (off_t)(at + page)) == MAP_FAILED)
      return 0;
  }
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 7) return 2;
  cmd_fd = atoi(argv[3]);
  ans_fd = atoi(argv[4]);
  mem_fd = atoi(argv[5]);
  mem_bytes = strtoull(argv[6], NULL, 10);
  mem = mmap(NULL, mem_bytes ? mem_bytes : 1, PROT_READ | PROT_WRITE, MAP_SHARED, mem_fd, 0);
  if (mem == MAP_FAILED) return 4;
  catch_faults();
  char netns[128] = "unknown";
  ssize_t len = readlink("/proc/self/ns/net", netns, sizeof netns - 1);
  if (len > 0) netns[len] = 0;
  printf("READY %s\n", netns);
  fflush(stdout);
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "cannot load the kernel library: %s\n", dlerror());
    return 5;
  }
  fn = (ktl_fn)dlsym(lib, argv[2]);
  if (!fn) {
    fprintf(stderr, "the library exports no symbol %s\n", argv[2]);
    return 6;
  }
  printf("LOADED\n");
  fflush(stdout);
  static int64_t words[2 + 2 * KTL_NB + KTL_ND + KTL_MAX_BATCH];
  for (int64_t seq = 0;; seq++) {
    if (!read_all(words, 2 * sizeof(int64_t))) return 0;
    int64_t op = words[0], count = words[1];
    if (op == OP_QUIT) _exit(0); /* no destructors of the kernel's library */
    if (count < 0 || count > KTL_MAX_BATCH) return 7;
    int64_t *slot = words + 2, *dims = slot + KTL_NB, *lazy = dims + KTL_ND, *arena = lazy + KTL_NB;
    if (!read_all(slot, (size_t)(2 * KTL_NB + KTL_ND + count) * sizeof(int64_t))) return 0;
    if (op == OP_PROTECT) {
      if (count % 3) return 9;
      printf("CMD %lld\n", (long long)seq);
      fflush(stdout);
      int err = protect(arena, count);
      answer(err ? 3 : 0, err ? err : count);
      continue;
    }
    int64_t calls = op == OP_PAIR ? count - 1 : count;
    if (op == OP_PAIR && (count < 3 || calls % 2 != 0)) return 9;
    for (int64_t i = 0; i < calls; i++)
      for (int b = 0; b < KTL_NB; b++)
        if (arena[i] < 0 || slot[b] < 0 || (uint64_t)(arena[i] + slot[b]) > mem_bytes) return 8;
    if (op == OP_PAIR && (arena[calls] < 0 || arena[calls] % 8 != 0 ||
                          (uint64_t)arena[calls] + (uint64_t)calls * 16 > mem_bytes))
      return 8;
    printf("CMD %lld\n", (long long)seq);
    fflush(stdout);
    if (!map_lazy(lazy, slot)) {
      answer(1, errno);
      continue;
    }
    if (op == OP_CALL) {
      for (int64_t i = 0; i < count; i++) call(arena[i], slot, dims);
    } else if (op == OP_PAIR) {
      if (!run_pair(arena, count, slot, dims)) {
        answer(2, errno);
        continue;
      }
    } else if (op != OP_NOP) {
      return 9;
    }
    answer(0, count);
  }
}
