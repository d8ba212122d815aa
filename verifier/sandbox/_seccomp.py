"""A seccomp-bpf filter for sandboxed children, built here in Python (no libseccomp).

`build_filter(deny)` is pure: it returns the classic-BPF program (bytes, one
8-byte `sock_filter` per instruction) that the kernel runs on every system call
of the child and its descendants. It

- kills on an unknown architecture: only x86_64 and aarch64 are allowed, and on
  x86_64 the x32 ABI (syscall numbers with bit 30 set) is killed too, so a kernel
  cannot reach a denied call through another ABI's numbers;
- denies, with the `deny` action, the calls a kernel has no use for and that reach
  outside its sandbox: every socket (`socket`, `socketpair`: pathname and abstract
  UNIX sockets, netlink, packet, inet), `ptrace`, `process_vm_*`, `mount` and the
  new mount API, `unshare`, `setns`, `clone` with namespace flags, the key
  store, `bpf`, `perf_event_open`, `kexec_*`, module loading, `io_uring_*` (its
  operations would bypass this filter), `userfaultfd`, `pidfd_getfd`, `kcmp`, ...;
- lets `prlimit64` through only on the caller itself (pid 0), and `sched_setaffinity`
  and `ioprio_set` only on the calling process (anything else gets EPERM: runtimes may
  try them on their own threads and carry on);
- answers every change of scheduling class or priority (`sched_setscheduler`,
  `sched_setparam`, `sched_setattr`, `setpriority`) with EPERM, on itself too: a caller
  that makes itself SCHED_IDLE (or nice 19) while a helper it started does the work turns
  the helper's CPU into its own run-queue wait, which the cost rule would subtract
  (round 4); a runtime that tries carries on at the normal policy;
- for a kernel's run that no cgroup accounts (`deny_unaccountable`), denies `clone` with
  CLONE_VM but without CLONE_THREAD (a process sharing the worker's memory that /proc
  would not list among its threads) and answers every `sched_setaffinity` with EPERM
  (pinning cannot be undone from inside);
- answers `memfd_create` with EPERM outside GPU runs: its pages are host shared memory
  (round 3 raised the host's by 1.47 GiB within one check; the run's cgroup bounds them,
  but no kernel or runtime here needs one: the arenas are made by the parent);
- answers `clone3` with ENOSYS (its flags sit in memory BPF cannot read; the C
  library then falls back to `clone`, whose flags are checked);

GPU runs (`local_unix_sockets`): NVIDIA's `cuInit` fails (CUDA_ERROR_OPERATING_SYSTEM)
unless it can create a UNIX socket (seen on an H200, driver 580). There `socket` and
`socketpair` are allowed for AF_UNIX and fail with EACCES for every other family, and a
second filter (`build_address_filter`, stacked once the child has reported to the
parent over its control socket) answers EACCES to every way a socket reaches a peer by
address: `connect`, `sendmsg`, `sendmmsg` (their addresses sit in memory BPF cannot
read) and `sendto` with a destination address. Such a socket reaches nothing outside
the sandbox (abstract names are also scoped by the network namespace and Landlock),
and no descriptor from outside is ever passed in.

`deny` is `SECCOMP_RET_USER_NOTIF` when the parent listens (it then learns which
call was attempted and kills the run; the call never executes), else
`SECCOMP_RET_KILL_PROCESS`. The sandbox launcher (`_launcher.c`) loads the programs
into the child before exec: the notifying one with a new listener where the kernel
offers it (else the killing one), and the address filter after its report.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = [
    "AUDIT_ARCH_AARCH64",
    "AUDIT_ARCH_X86_64",
    "RET_ALLOW",
    "RET_KILL_PROCESS",
    "RET_USER_NOTIF",
    "Notification",
    "build_address_filter",
    "build_filter",
    "parse_notification",
    "syscall_name",
]

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_SYSCALL_BIT = 0x40000000

RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_USER_NOTIF = 0x7FC00000
RET_ALLOW = 0x7FFF0000
EPERM, EACCES, ENOSYS = 1, 13, 38

CLONE_VM, CLONE_THREAD = 0x00000100, 0x00010000
CLONE_NAMESPACES = 0x7E020080
"""CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME."""
IOPRIO_WHO_PROCESS = 1

_LD_W_ABS, _JEQ, _JSET, _JA, _RET = 0x20, 0x15, 0x45, 0x05, 0x06
_OFF_NR, _OFF_ARCH, _OFF_ARGS = 0, 4, 16
NOTIF_SIZE = 80
"""sizeof(struct seccomp_notif): id, pid, flags, then seccomp_data (nr, arch, ip, args[6])."""

DENIED = (
    "socket", "socketpair", "ptrace", "process_vm_readv", "process_vm_writev", "mount",
    "umount2", "pivot_root", "chroot", "unshare", "setns", "keyctl", "add_key", "request_key",
    "bpf", "perf_event_open", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog",
    "name_to_handle_at", "open_by_handle_at", "userfaultfd", "fanotify_init", "move_pages",
    "migrate_pages", "kcmp", "pidfd_getfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
    "mount_setattr",
)
"""Killed (or reported and killed) whatever their arguments."""

SOCKET_CALLS = ("socket", "socketpair")
AF_UNIX = 1
SELF_ONLY_KILL = {"prlimit64": 0}
"""Allowed only when the argument at this index (a pid) is 0, the caller; else denied."""
SELF_ONLY_EPERM = {"sched_setaffinity": 0}
"""Allowed only on the caller (pid argument 0); else EPERM."""
ALWAYS_EPERM = ("sched_setscheduler", "sched_setparam", "sched_setattr", "setpriority")
"""Scheduling class and priority: EPERM whatever the target (the caller itself included)."""

_NUMBERS = {  # name: (x86_64, aarch64)
    "socket": (41, 198), "socketpair": (53, 199), "ptrace": (101, 117),
    "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "mount": (165, 40),
    "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51), "unshare": (272, 97),
    "setns": (308, 268), "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "bpf": (321, 280), "perf_event_open": (298, 241), "kexec_load": (246, 104),
    "kexec_file_load": (320, 294), "init_module": (175, 105), "finit_module": (313, 273),
    "delete_module": (176, 106), "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142),
    "acct": (163, 89), "quotactl": (179, 60), "syslog": (103, 116),
    "name_to_handle_at": (303, 264), "open_by_handle_at": (304, 265), "userfaultfd": (323, 282),
    "fanotify_init": (300, 262), "move_pages": (279, 239), "migrate_pages": (256, 238),
    "kcmp": (312, 272), "pidfd_getfd": (438, 438), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "open_tree": (428, 428),
    "move_mount": (429, 429), "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432),
    "mount_setattr": (442, 442), "prlimit64": (302, 261), "setpriority": (141, 140),
    "ioprio_set": (251, 30), "sched_setaffinity": (203, 122), "sched_setscheduler": (144, 119),
    "sched_setparam": (142, 118), "sched_setattr": (314, 274), "clone": (56, 220),
    "clone3": (435, 435), "seccomp": (317, 277), "memfd_create": (319, 279),
}
"""Each syscall the filter names, with its number on each architecture (one row a name)."""
TABLES = {arch: {name: nrs[i] for name, nrs in _NUMBERS.items()}
          for i, arch in enumerate((AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64))}
ADDRESS_TABLES = {
    AUDIT_ARCH_X86_64: {"connect": 42, "sendto": 44, "sendmsg": 46, "sendmmsg": 307},
    AUDIT_ARCH_AARCH64: {"connect": 203, "sendto": 206, "sendmsg": 211, "sendmmsg": 269},
}
"""The address filter's calls (every other architecture is killed by the main filter)."""
"""Syscall numbers per audit architecture (from the kernel's syscall tables)."""


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def _arg_is_zero(index: int, deny_len: int) -> list[tuple[int, int, int, int]]:
    """Test 64-bit argument `index` for 0: jump past the `deny_len` deny instructions
    that follow (to an ALLOW) when it is, fall through to them when it is not."""
    lo = _OFF_ARGS + 8 * index
    return [_ins(_LD_W_ABS, lo), _ins(_JEQ, 0, 0, 2),
            _ins(_LD_W_ABS, lo + 4), _ins(_JEQ, 0, deny_len, 0)]


def _clone_rule(deny: int, unaccountable: bool) -> list[tuple[int, int, int, int]]:
    """clone's flags are argument 0: namespaces are denied; with `unaccountable`, so is
    CLONE_VM without CLONE_THREAD."""
    if not unaccountable:
        return [_ins(_LD_W_ABS, _OFF_ARGS), _ins(_JSET, CLONE_NAMESPACES, 0, 1),
                _ins(_RET, deny), _ins(_RET, RET_ALLOW)]
    return [_ins(_LD_W_ABS, _OFF_ARGS), _ins(_JSET, CLONE_NAMESPACES, 0, 1), _ins(_RET, deny),
            _ins(_JSET, CLONE_VM, 0, 2), _ins(_JSET, CLONE_THREAD, 1, 0), _ins(_RET, deny),
            _ins(_RET, RET_ALLOW)]


def _rule(name: str, deny: int, local_unix_sockets: bool,
          unaccountable: bool = False) -> list[tuple[int, int, int, int]]:
    """The body run when the syscall number is `name`'s; every path ends in a RET."""
    eperm, eacces = RET_ERRNO | EPERM, RET_ERRNO | EACCES
    if unaccountable and name == "sched_setaffinity":
        return [_ins(_RET, eperm)]
    if local_unix_sockets and name in SOCKET_CALLS:  # the domain is argument 0
        return [_ins(_LD_W_ABS, _OFF_ARGS), _ins(_JEQ, AF_UNIX, 0, 1), _ins(_RET, RET_ALLOW),
                _ins(_RET, eacces)]
    if name in DENIED:
        return [_ins(_RET, deny)]
    if name in ALWAYS_EPERM:
        return [_ins(_RET, eperm)]
    if name in SELF_ONLY_KILL or name in SELF_ONLY_EPERM:
        action = deny if name in SELF_ONLY_KILL else eperm
        index = SELF_ONLY_KILL.get(name, SELF_ONLY_EPERM.get(name, 0))
        return [*_arg_is_zero(index, 1), _ins(_RET, action), _ins(_RET, RET_ALLOW)]
    if name == "ioprio_set":
        which = IOPRIO_WHO_PROCESS
        return [_ins(_LD_W_ABS, _OFF_ARGS), _ins(_JEQ, which, 0, 4),
                *_arg_is_zero(1, 1), _ins(_RET, eperm), _ins(_RET, RET_ALLOW)]
    if name == "clone":
        return _clone_rule(deny, unaccountable)
    if name == "clone3":
        return [_ins(_RET, RET_ERRNO | ENOSYS)]
    if name == "memfd_create":
        return [_ins(_RET, RET_ALLOW if local_unix_sockets else eperm)]
    if name == "seccomp":
        return [_ins(_RET, RET_ALLOW)]  # stacking more filters only narrows what is allowed
    raise ValueError(f"no seccomp rule for {name!r}")


def _arch_block(table: dict[str, int], deny: int, x86: bool, local_unix_sockets: bool,
                unaccountable: bool) -> list[tuple[int, int, int, int]]:
    out = [_ins(_LD_W_ABS, _OFF_NR)]
    if x86:
        out += [_ins(_JSET, X32_SYSCALL_BIT, 0, 1), _ins(_RET, RET_KILL_PROCESS)]
    for name, nr in table.items():
        body = _rule(name, deny, local_unix_sockets, unaccountable)
        if len(body) > 255:
            raise ValueError("rule too long for a BPF jump")
        out += [_ins(_JEQ, nr, 0, len(body)), *body]
    out.append(_ins(_RET, RET_ALLOW))
    return out


def build_filter(deny: int = RET_KILL_PROCESS, local_unix_sockets: bool = False,
                 deny_unaccountable: bool = False) -> bytes:
    """The whole program as `struct sock_filter[]` bytes (pure).

    With `local_unix_sockets` (GPU runs, see the module's text) `socket` and
    `socketpair` are allowed for AF_UNIX and fail with EACCES for other families,
    instead of being denied. With `deny_unaccountable`, CLONE_VM processes are denied
    and affinity changes fail (a kernel's run that no cgroup accounts)."""
    if deny not in (RET_KILL_PROCESS, RET_USER_NOTIF):
        raise ValueError("deny must be RET_KILL_PROCESS or RET_USER_NOTIF")
    x86 = _arch_block(TABLES[AUDIT_ARCH_X86_64], deny, True, local_unix_sockets, deny_unaccountable)
    arm = _arch_block(TABLES[AUDIT_ARCH_AARCH64], deny, False, local_unix_sockets,
                      deny_unaccountable)
    head = [
        _ins(_LD_W_ABS, _OFF_ARCH),
        _ins(_JEQ, AUDIT_ARCH_X86_64, 0, 1),
        _ins(_JA, 3),                # to x86 block (index 6)
        _ins(_JEQ, AUDIT_ARCH_AARCH64, 0, 1),
        _ins(_JA, 1 + len(x86)),     # to the aarch64 block
        _ins(_RET, RET_KILL_PROCESS),  # unknown architecture (i386, x32 via another audit arch, ...)
    ]
    return b"".join(struct.pack("=HBBI", *ins) for ins in (*head, *x86, *arm))


def build_address_filter() -> bytes:
    """The GPU runs' second program (pure): EACCES for `connect`, `sendmsg`, `sendmmsg`
    and `sendto` with a destination address; everything else passes to the main filter."""
    eacces = RET_ERRNO | EACCES
    out: list[tuple[int, int, int, int]] = []
    for arch, table in ADDRESS_TABLES.items():
        block = [_ins(_LD_W_ABS, _OFF_NR)]
        for name, nr in table.items():
            body = ([*_arg_is_zero(4, 1), _ins(_RET, eacces), _ins(_RET, RET_ALLOW)]
                    if name == "sendto" else [_ins(_RET, eacces)])
            block += [_ins(_JEQ, nr, 0, len(body)), *body]
        block.append(_ins(_RET, RET_ALLOW))
        out += [_ins(_LD_W_ABS, _OFF_ARCH), _ins(_JEQ, arch, 0, len(block)), *block]
    out.append(_ins(_RET, RET_ALLOW))  # another architecture: the main filter kills it
    return b"".join(struct.pack("=HBBI", *ins) for ins in out)


def syscall_name(arch: int, nr: int) -> str:
    """`socket`, `ptrace`, ... for a denied call; `syscall <nr> (arch 0x...)` otherwise."""
    for name, number in TABLES.get(arch, {}).items():
        if number == nr:
            return name
    return f"syscall {nr} (arch {arch:#x})"


@dataclass(frozen=True)
class Notification:
    """One `struct seccomp_notif`: which task tried which call."""

    id: int
    pid: int
    nr: int
    arch: int
    args: tuple[int, ...]

    @property
    def name(self) -> str:
        return syscall_name(self.arch, self.nr)


def parse_notification(raw: bytes) -> Notification:
    """Decode the kernel's 80-byte notification (pure)."""
    if len(raw) != NOTIF_SIZE:
        raise ValueError(f"a seccomp notification is {NOTIF_SIZE} bytes, got {len(raw)}")
    nid, pid, _flags, nr, arch, _ip, *args = struct.unpack("=QIIiIQ6Q", raw)
    return Notification(nid, pid, nr, arch, tuple(args))
