/* ktl's sandbox launcher: the whole child set-up between fork and exec, in C.
 *
 * usage: ktl-launcher PLAN_FD COMMAND [ARG...]
 *
 * The parent (verifier/sandbox/_process.py) starts this program with subprocess and no
 * preexec_fn, so no Python runs in a forked copy of a threaded parent. PLAN_FD holds the
 * plan `verifier.sandbox._confine.encode_plan` wrote (a bounded binary record: limits,
 * Landlock rules, the seccomp programs `_seccomp` built, the control socket, cgroup
 * files to join). The launcher, like bubblewrap, then
 *
 *  1. joins the plan's cgroups, sets RLIMIT_CORE 0, enters new user, PID and network
 *     namespaces where the OS allows (the *keeper*), and forks the PID namespace's init;
 *  2. the init (the *reaper*) mounts a private /proc (and a tmpfs over the private folder
 *     when the plan has one), forks the *target* and reaps every
 *     process of the namespace until the target ends, then reports its wait status;
 *  3. the target confines its filesystem with Landlock, loads the seccomp filter, sets
 *     its resource limits, sends the parent the layers in force (and the filter's
 *     listener) over the control socket, and executes COMMAND.
 *
 * A set-up that fails writes "ktl sandbox: <why>" to stderr and exits SETUP_FAILED (97)
 * without running COMMAND. The keeper ends the way the target ended (same exit code or
 * signal), so the parent's wait4 sees the target's status and the tree's rusage. An exec
 * that fails is reported on the control socket ("KTLE" + errno), which is close-on-exec:
 * the parent reads end-of-file there once COMMAND runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define SETUP_FAILED 97
#define SANDBOX_UID 1000
#define MAX_PLAN (1 << 20)
#define MAX_PATH_BYTES 4096
#define MAX_PATHS 4096
#define MAX_PROGRAM (4096 * 8)
#define MAX_ATTR 64
#define MAX_FD 65536

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#define LANDLOCK_RULE_PATH_BENEATH 1
#define SECCOMP_SET_MODE_FILTER 1
#define SECCOMP_FILTER_FLAG_NEW_LISTENER (1UL << 3)

struct program { uint16_t len; const unsigned char *insns; };
struct sock_fprog_ { unsigned short len; const void *filter; };

struct plan {
    uint32_t flags;            /* bit 0: has an address-space limit; bit 1: deny_unaccountable */
    int32_t control_fd;
    int64_t cpu_s, address_space, file_size, open_files, processes;
    uint32_t landlock_abi;
    uint32_t attr_size;
    unsigned char attr[MAX_ATTR];
    uint64_t file_rights;
    uint32_t n_paths;
    uint64_t *rights;
    char **paths;
    uint32_t n_cgroups;
    char **cgroups;
    int64_t private_bytes;     /* > 0: a tmpfs of this size over private_dir */
    char *private_dir;
    struct program notify, kill, address;
};

struct layers {   /* the report: "KTLL", then these 12 bytes and three int32 */
    unsigned char user_ns, no_caps, pid_ns, net_ns, private_proc, dev_restricted, seccomp, cgroup,
        unaccountable_denied, pad[3];
    int32_t landlock_abi, process_limit, private_tmpfs_mib;
};

static void fail(const char *what, int err) {
    char buf[512];
    int n = err ? snprintf(buf, sizeof buf, "ktl sandbox: %s: %s\n", what, strerror(err))
                : snprintf(buf, sizeof buf, "ktl sandbox: %s\n", what);
    if (n > 0) {
        ssize_t w = write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
        (void)w;
    }
    _exit(SETUP_FAILED);
}

static void die_with_parent(void) {
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
}

/* -- the plan ------------------------------------------------------------------------ */

struct reader { const unsigned char *p, *end; };

static const unsigned char *take(struct reader *r, size_t n) {
    if ((size_t)(r->end - r->p) < n) fail("malformed plan: truncated", 0);
    const unsigned char *at = r->p;
    r->p += n;
    return at;
}
static uint32_t u32(struct reader *r) { uint32_t v; memcpy(&v, take(r, 4), 4); return v; }
static int64_t i64(struct reader *r) { int64_t v; memcpy(&v, take(r, 8), 8); return v; }

static char *string_of(struct reader *r, uint32_t n) {
    if (n == 0 || n > MAX_PATH_BYTES) fail("malformed plan: a path is empty or too long", 0);
    const unsigned char *at = take(r, n);
    if (memchr(at, 0, n)) fail("malformed plan: a path holds a NUL byte", 0);
    char *s = malloc(n + 1);
    if (!s) fail("out of memory", errno);
    memcpy(s, at, n);
    s[n] = 0;
    return s;
}

static char *string(struct reader *r) { return string_of(r, u32(r)); }

static struct program program(struct reader *r) {
    uint32_t n = u32(r);
    if (n > MAX_PROGRAM || n % 8) fail("malformed plan: a seccomp program's size", 0);
    struct program p = { (uint16_t)(n / 8), take(r, n) };
    return p;
}

static unsigned char *read_all(int fd, size_t *size) {
    unsigned char *buf = malloc(MAX_PLAN + 1);
    size_t got = 0;
    if (!buf) fail("out of memory", errno);
    for (;;) {
        ssize_t n = pread(fd, buf + got, MAX_PLAN + 1 - got, (off_t)got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("cannot read the plan", errno);
        if (n == 0) break;
        got += (size_t)n;
        if (got > MAX_PLAN) fail("malformed plan: larger than 1 MiB", 0);
    }
    *size = got;
    return buf;
}

static void parse(const unsigned char *buf, size_t size, struct plan *pl) {
    struct reader r = { buf, buf + size };
    if (memcmp(take(&r, 8), "KTLPLAN1", 8) != 0) fail("malformed plan: bad magic", 0);
    pl->flags = u32(&r);
    pl->control_fd = (int32_t)u32(&r);
    pl->cpu_s = i64(&r);
    pl->address_space = i64(&r);
    pl->file_size = i64(&r);
    pl->open_files = i64(&r);
    pl->processes = i64(&r);
    pl->landlock_abi = u32(&r);
    pl->attr_size = u32(&r);
    if (pl->attr_size > MAX_ATTR) fail("malformed plan: Landlock attribute size", 0);
    memcpy(pl->attr, take(&r, pl->attr_size), pl->attr_size);
    memcpy(&pl->file_rights, take(&r, 8), 8);
    pl->n_paths = u32(&r);
    if (pl->n_paths > MAX_PATHS) fail("malformed plan: too many paths", 0);
    pl->rights = calloc(pl->n_paths + 1, sizeof *pl->rights);
    pl->paths = calloc(pl->n_paths + 1, sizeof *pl->paths);
    if (!pl->rights || !pl->paths) fail("out of memory", errno);
    for (uint32_t i = 0; i < pl->n_paths; i++) {
        memcpy(&pl->rights[i], take(&r, 8), 8);
        pl->paths[i] = string(&r);
    }
    pl->n_cgroups = u32(&r);
    if (pl->n_cgroups > 16) fail("malformed plan: too many cgroup files", 0);
    pl->cgroups = calloc(pl->n_cgroups + 1, sizeof *pl->cgroups);
    if (!pl->cgroups) fail("out of memory", errno);
    for (uint32_t i = 0; i < pl->n_cgroups; i++) pl->cgroups[i] = string(&r);
    pl->private_bytes = i64(&r);
    uint32_t dir_len = u32(&r);
    pl->private_dir = dir_len ? string_of(&r, dir_len) : NULL;
    if (pl->private_bytes < 0 || (pl->private_bytes > 0) != (pl->private_dir != NULL))
        fail("malformed plan: the private folder's tmpfs", 0);
    pl->notify = program(&r);
    pl->kill = program(&r);
    pl->address = program(&r);
    if (pl->kill.len == 0) fail("malformed plan: no seccomp program", 0);
    if (r.p != r.end) fail("malformed plan: trailing bytes", 0);
    if (pl->control_fd < 3 || pl->cpu_s < 1 || pl->file_size < 0 || pl->open_files < 1
        || pl->processes < 1 || ((pl->flags & 1) && pl->address_space < 1))
        fail("malformed plan: a limit or descriptor is out of range", 0);
}

/* -- small helpers --------------------------------------------------------------------- */

static void close_all_but(int keep) {
    if (syscall(SYS_close_range, 0U, (unsigned)keep - 1U, 0U) != 0
        || syscall(SYS_close_range, (unsigned)keep + 1U, ~0U, 0U) != 0) {
        for (int fd = 0; fd < MAX_FD; fd++)
            if (fd != keep) close(fd);
    }
}

static int write_text(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int err = errno;
    close(fd);
    errno = err;
    return w == (ssize_t)n ? 0 : -1;
}

/* End this process the way `status` (a wait status) says: same exit code or signal. */
static void mirror(int status) {
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        sigset_t set;
        signal(sig, SIG_DFL);
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        kill(getpid(), sig);
        _exit(128 + sig);
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : SETUP_FAILED);
}

/* -- the keeper's set-up: cgroups, namespaces ------------------------------------------ */

/* Move this process into the run's cgroup ("0" is the writer itself) before anything
 * else, so all of the tree is accounted; fail the set-up rather than run unaccounted. */
static void join_cgroups(const struct plan *pl) {
    char what[MAX_PATH_BYTES + 64];
    for (uint32_t i = 0; i < pl->n_cgroups; i++) {
        int fd = open(pl->cgroups[i], O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        int ok = fd >= 0 && write(fd, "0", 1) == 1;
        int err = errno;
        if (fd >= 0) close(fd);
        if (!ok) {
            snprintf(what, sizeof what, "cannot join the run's cgroup (%s)", pl->cgroups[i]);
            fail(what, err);
        }
    }
}

/* The host's identity, hidden where it is cheap (after the run's cgroups were joined): a UTS
 * namespace with a fixed host name, and a cgroup namespace rooted at the run's own group, so
 * /proc/self/cgroup names no group of the host's. Best effort: the accounting never reads
 * either from inside. */
static void hide_host(void) {
    static const char name[] = "ktl-sandbox";
    if (unshare(CLONE_NEWUTS) == 0) {
        int r = sethostname(name, sizeof name - 1);
        (void)r;
    }
    int r = unshare(CLONE_NEWCGROUP);
    (void)r;
}

/* The launcher's own command line (the plan descriptor, the command and its paths), wiped
 * in the PID namespace's init so /proc/1/cmdline shows nothing of the host's layout. */
static char **own_argv;
static int own_argc;

static void wipe_own_argv(void) {
    for (int i = 0; i < own_argc; i++)
        memset(own_argv[i], 0, strlen(own_argv[i]));
}

static int enter_namespaces(struct layers *ly) {
    uid_t uid = getuid();
    gid_t gid = getgid();
    char map[64];
    ly->user_ns = unshare(CLONE_NEWUSER) == 0;
    if (ly->user_ns) {
        if (write_text("/proc/self/setgroups", "deny") != 0)
            fail("cannot map ids in the new user namespace", errno);
        snprintf(map, sizeof map, "%d %u 1\n", SANDBOX_UID, (unsigned)uid);
        if (write_text("/proc/self/uid_map", map) != 0)
            fail("cannot map ids in the new user namespace", errno);
        snprintf(map, sizeof map, "%d %u 1\n", SANDBOX_UID, (unsigned)gid);
        if (write_text("/proc/self/gid_map", map) != 0)
            fail("cannot map ids in the new user namespace", errno);
    }
    ly->pid_ns = unshare(CLONE_NEWPID) == 0;
    ly->net_ns = unshare(CLONE_NEWNET) == 0;
    ly->no_caps = ly->user_ns || geteuid() != 0;
    hide_host();
    return ly->pid_ns;
}

/* A tmpfs of `size` bytes (mode 0700) over `folder` in a mount namespace of its own, made the
 * working folder: the parent's view of `folder` is untouched, and the tmpfs goes with the
 * sandbox's last process. */
static int private_tmpfs(const char *folder, int64_t size) {
    char options[96];
    if (unshare(CLONE_NEWNS) != 0) return 0;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return 0;
    snprintf(options, sizeof options, "size=%lld,mode=0700,nr_inodes=65536", (long long)size);
    if (mount("ktl-private", folder, "tmpfs", MS_NOSUID | MS_NODEV, options) != 0) return 0;
    return chdir(folder) == 0;
}

static int private_proc(void) {
    if (unshare(CLONE_NEWNS) != 0) return 0;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return 0;
    return mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0;
}

/* -- the target's set-up: Landlock, seccomp, limits, report ----------------------------- */

static int landlock(const struct plan *pl) {
    unsigned char attr[MAX_ATTR] = {0};
    memcpy(attr, pl->attr, pl->attr_size);
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, attr, (size_t)pl->attr_size, 0U);
    if (ruleset < 0) return 0;
    int ok = 1;
    for (uint32_t i = 0; ok && i < pl->n_paths; i++) {
        int fd = open(pl->paths[i], O_PATH | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st;
        struct __attribute__((packed)) { uint64_t allowed; int32_t parent_fd; } rule;
        rule.allowed = pl->rights[i];
        if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) rule.allowed &= pl->file_rights;
        rule.parent_fd = fd;
        ok = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0U) == 0;
        close(fd);
    }
    ok = ok && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
         && syscall(SYS_landlock_restrict_self, ruleset, 0U) == 0;
    close(ruleset);
    return ok;
}

static long load(const struct program *p, unsigned long flags) {
    struct sock_fprog_ prog = { p->len, p->insns };
    return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
}

/* Returns the listener's fd, or -1 when the kill filter is in force. */
static int seccomp(const struct plan *pl) {
#if !defined(__x86_64__) && !defined(__aarch64__)
    fail("cannot load the seccomp filter: this architecture is not supported by the filter", 0);
#endif
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        fail("cannot load the seccomp filter: prctl(PR_SET_NO_NEW_PRIVS) failed", errno);
    if (pl->notify.len) {
        long fd = load(&pl->notify, SECCOMP_FILTER_FLAG_NEW_LISTENER);
        if (fd >= 0) return (int)fd;
    }
    if (load(&pl->kill, 0) < 0) fail("cannot load the seccomp filter", errno);
    return -1;
}

static void limit(int resource, int64_t soft, int64_t hard) {
    struct rlimit rl = { (rlim_t)soft, (rlim_t)hard };
    if (setrlimit(resource, &rl) != 0) fail("cannot set resource limits", errno);
}

static void report(int control_fd, const struct layers *ly, int listener) {
    unsigned char msg[4 + sizeof *ly];
    memcpy(msg, "KTLL", 4);
    memcpy(msg + 4, ly, sizeof *ly);
    struct iovec iov = { msg, sizeof msg };
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } ctl;
    struct msghdr mh = { 0 };
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (listener >= 0) {
        memset(&ctl, 0, sizeof ctl);
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof ctl.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &listener, sizeof(int));
    }
    if (sendmsg(control_fd, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof msg)
        fail("cannot report to the parent", errno);
}

static void target(const struct plan *pl, struct layers *ly, char **argv) {
    die_with_parent();
    if (pl->landlock_abi >= 1 && !landlock(pl))
        fail("Landlock is offered by this kernel but the filesystem could not be confined", 0);
    ly->landlock_abi = (int32_t)pl->landlock_abi;
    ly->dev_restricted = pl->landlock_abi >= 1;
    int listener = seccomp(pl);
    ly->seccomp = listener >= 0 ? 2 : 1;
    ly->unaccountable_denied = (pl->flags & 2) != 0;
    ly->process_limit = ly->user_ns ? (int32_t)pl->processes : 0;
    limit(RLIMIT_CPU, pl->cpu_s, pl->cpu_s + 1);
    if (pl->flags & 1) limit(RLIMIT_AS, pl->address_space, pl->address_space);
    limit(RLIMIT_FSIZE, pl->file_size, pl->file_size);
    limit(RLIMIT_NOFILE, pl->open_files, pl->open_files);
    if (ly->user_ns)  /* counted per user namespace; outside one it would count all the uid's */
        limit(RLIMIT_NPROC, pl->processes, pl->processes);
    report(pl->control_fd, ly, listener);
    if (listener >= 0) close(listener);
    if (fcntl(pl->control_fd, F_SETFD, FD_CLOEXEC) != 0) fail("cannot mark the control socket", errno);
    if (pl->address.len && load(&pl->address, 0) < 0)  /* now no socket reaches an address */
        fail("cannot load the seccomp address filter", errno);
    execvp(argv[0], argv);
    unsigned char msg[8];
    int err = errno;
    memcpy(msg, "KTLE", 4);
    memcpy(msg + 4, &err, 4);
    ssize_t w = write(pl->control_fd, msg, sizeof msg);
    (void)w;
    fail("cannot execute the command", err);
}

/* -- the three processes ----------------------------------------------------------------- */

static void reap(const struct plan *pl, struct layers *ly, int status_fd, char **argv, int pid_ns) {
    die_with_parent();
    ly->private_proc = pid_ns && private_proc();
    if (pl->private_dir) {
        char what[96];
        snprintf(what, sizeof what, "cannot mount a %lld MiB tmpfs on the private folder",
                 (long long)(pl->private_bytes >> 20));
        if (!private_tmpfs(pl->private_dir, pl->private_bytes)) fail(what, 0);
        ly->private_tmpfs_mib = (int32_t)(pl->private_bytes >> 20);
    }
    pid_t child = fork();
    if (child < 0) fail("cannot fork the target", errno);
    if (child == 0) {
        close(status_fd);
        target(pl, ly, argv);
    }
    close_all_but(status_fd);
    wipe_own_argv();
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) _exit(SETUP_FAILED);
        if (pid == child) {
            ssize_t w = write(status_fd, &status, sizeof status);
            (void)w;
            _exit(0);
        }
    }
}

int main(int argc, char **argv) {
    struct plan pl;
    struct layers ly;
    sigset_t none;
    memset(&pl, 0, sizeof pl);
    memset(&ly, 0, sizeof ly);
    if (argc < 3) fail("usage: ktl-launcher PLAN_FD COMMAND [ARG...]", 0);
    own_argv = argv;
    own_argc = argc;
    char *end = NULL;
    long plan_fd = strtol(argv[1], &end, 10);
    if (!end || *end || plan_fd < 0 || plan_fd >= MAX_FD) fail("usage: bad PLAN_FD", 0);
    size_t size = 0;
    unsigned char *buf = read_all((int)plan_fd, &size);
    close((int)plan_fd);
    parse(buf, size, &pl);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    die_with_parent();
    join_cgroups(&pl);  /* before anything else: all of the tree is accounted */
    ly.cgroup = pl.n_cgroups > 0;
    limit(RLIMIT_CORE, 0, 0);
    int pid_ns = enter_namespaces(&ly);
    die_with_parent();  /* a credential change (the new user namespace) clears it */
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) fail("cannot make the status pipe", errno);
    pid_t reaper = fork();
    if (reaper < 0) fail("cannot fork the reaper", errno);
    if (reaper == 0) {
        close(fds[0]);
        reap(&pl, &ly, fds[1], argv + 2, pid_ns);
    }
    close(fds[1]);
    close_all_but(fds[0]);
    int status = 0, target_status = 0;
    while (waitpid(reaper, &status, 0) < 0 && errno == EINTR) {}
    ssize_t n = read(fds[0], &target_status, sizeof target_status);
    mirror(n == (ssize_t)sizeof target_status ? target_status : status);
    return SETUP_FAILED;
}
