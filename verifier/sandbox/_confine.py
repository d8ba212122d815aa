"""The child's set-up, planned here and applied by the native launcher before exec.

No Python runs between fork and exec: `subprocess` (whose fork and exec are C) starts
the launcher (`_launcher.c`, built by `verifier.sandbox._launcher`), which reads the
plan this module encodes and then, like bubblewrap,

1. joins the plan's cgroups, enters new user, PID and network namespaces where the OS
   allows (the *keeper*), and forks the PID namespace's init (the *reaper*);
2. the reaper mounts a private /proc (and, if planned, a tmpfs of the planned size over
   the private folder, its working folder), forks the *target* and reaps every process of
   the namespace until the target ends; when the reaper exits the kernel kills
   whatever is left in the namespace (setsid and double forks do not escape);
3. the target confines its filesystem with Landlock (/dev reduced to null, zero,
   urandom and the GPU nodes of a GPU run), loads the seccomp filter, sets its
   resource limits (including a process count), sends the parent the layers that are
   in force and the filter's listener over the control socket, and executes the
   command.

The keeper and the reaper close every descriptor they do not need (the stdout pipe
included) and pass the target's exit status up the chain, so the parent's `wait4`
sees the target's exit code or signal, and its rusage. A set-up that fails exits with
`SETUP_FAILED` and says why on stderr. Nothing here assumes the command is Python.

This module is pure: `encode_plan` and `decode_report` turn a `ChildPlan` into the
launcher's bytes and the launcher's report back into `SandboxLayers`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from verifier.errors import SandboxError
from verifier.sandbox import _landlock, _seccomp
from verifier.sandbox._layers import SandboxLayers, SeccompMode

__all__ = ["EXEC_FAILED_TAG", "MAX_PLAN_BYTES", "REPORT_SIZE", "SETUP_FAILED", "ChildPlan",
           "decode_report", "encode_plan"]

SETUP_FAILED = 97
"""Exit status of a child whose confinement could not be set up (it never runs the command)."""
MAX_PLAN_BYTES = 1 << 20
MAX_PATH_BYTES = 4096
MAX_PATHS = 4096
MAX_CGROUP_FILES = 16
PLAN_MAGIC = b"KTLPLAN1"
REPORT_TAG, EXEC_FAILED_TAG = b"KTLL", b"KTLE"
_REPORT = struct.Struct("=4s12Biii")
REPORT_SIZE = _REPORT.size
_SECCOMP_MODES: dict[int, SeccompMode] = {1: "kill", 2: "notify"}


@dataclass(frozen=True)
class ChildPlan:
    """Everything the child needs to confine itself (built by the parent before fork)."""

    cpu_s: int
    address_space: int | None
    file_size: int
    open_files: int
    processes: int
    read_only: tuple[str, ...]
    read_write: tuple[str, ...]
    control_fd: int
    listen: bool
    local_unix_sockets: bool = False
    """GPU runs: AF_UNIX sockets that reach nothing outside (see _seccomp)."""
    cgroup_procs: tuple[str, ...] = ()
    """The run's `cgroup.procs` files (`verifier.sandbox._cgroup`): the keeper joins them
    first, so every process of the sandbox is in the run's cgroup before it runs anything."""
    deny_unaccountable: bool = False
    """No cgroup accounts this run: seccomp denies `clone` with CLONE_VM but not CLONE_THREAD
    (a process /proc would not show as the worker's thread) and every affinity change."""
    private_dir: str | None = None
    private_bytes: int = 0
    """With `private_dir`: mount a tmpfs of this size over it in the sandbox's mount namespace
    (what the child writes there is counted in its memory and never reaches the host's disk)."""


def _path(path: str) -> bytes:
    raw = path.encode()
    if not 0 < len(raw) <= MAX_PATH_BYTES or b"\0" in raw:
        raise SandboxError(f"sandbox plan: unusable path {path[:80]!r}")
    return struct.pack("=I", len(raw)) + raw


def _program(program: bytes) -> bytes:
    return struct.pack("=I", len(program)) + program


def _landlock_rules(plan: ChildPlan, abi: int) -> bytes:
    """The ruleset attribute and one (rights, path) rule per readable or writable root."""
    if abi < 1:
        return struct.pack("=II", 0, 0) + struct.pack("=Q", 0) + struct.pack("=I", 0)
    attr = _landlock.ruleset_attr(abi)
    handled = _landlock.handled(abi)
    rules = [(rights, path) for paths, rights in ((plan.read_only, _landlock.READ_ONLY),
                                                  (plan.read_write, handled)) for path in paths]
    if len(rules) > MAX_PATHS:
        raise SandboxError(f"sandbox plan: more than {MAX_PATHS} filesystem rules")
    return (struct.pack("=II", abi, len(attr)) + attr + struct.pack("=Q", _landlock.FILE_RIGHTS)
            + struct.pack("=I", len(rules))
            + b"".join(struct.pack("=Q", rights) + _path(path) for rights, path in rules))


def encode_plan(plan: ChildPlan, landlock_abi: int) -> bytes:
    """The launcher's plan (pure): limits, Landlock rules, seccomp programs, cgroup files."""
    if len(plan.cgroup_procs) > MAX_CGROUP_FILES:
        raise SandboxError(f"sandbox plan: more than {MAX_CGROUP_FILES} cgroup files")
    flags = (1 if plan.address_space is not None else 0) | (2 if plan.deny_unaccountable else 0)
    head = PLAN_MAGIC + struct.pack("=Ii5q", flags, plan.control_fd, plan.cpu_s,
                                    plan.address_space or 0, plan.file_size, plan.open_files,
                                    plan.processes)
    tmpfs = plan.private_dir is not None and plan.private_bytes > 0
    private = (struct.pack("=q", plan.private_bytes) + _path(plan.private_dir)
               if tmpfs and plan.private_dir is not None else struct.pack("=qI", 0, 0))
    unix, deny = plan.local_unix_sockets, plan.deny_unaccountable
    notify = _seccomp.build_filter(_seccomp.RET_USER_NOTIF, unix, deny) if plan.listen else b""
    kill = _seccomp.build_filter(_seccomp.RET_KILL_PROCESS, unix, deny)
    out = (head + _landlock_rules(plan, landlock_abi)
           + struct.pack("=I", len(plan.cgroup_procs))
           + b"".join(_path(p) for p in plan.cgroup_procs) + private
           + _program(notify) + _program(kill)
           + _program(_seccomp.build_address_filter() if unix else b""))
    if len(out) > MAX_PLAN_BYTES:
        raise SandboxError(f"sandbox plan: larger than {MAX_PLAN_BYTES} bytes")
    return out


def decode_report(raw: bytes) -> SandboxLayers:
    """The launcher's report of the layers in force (pure); SandboxError if malformed."""
    if len(raw) != REPORT_SIZE:
        raise SandboxError(f"sandbox report: expected {REPORT_SIZE} bytes, got {len(raw)}")
    (tag, user, no_caps, pid, net, proc, dev, seccomp, cgroup, unaccountable, *_pad, abi, nproc,
     tmpfs_mib) = _REPORT.unpack(raw)
    flags = (user, no_caps, pid, net, proc, dev, cgroup, unaccountable)
    if tag != REPORT_TAG or any(f not in (0, 1) for f in flags) or seccomp not in _SECCOMP_MODES \
            or any(not 0 <= n < 2**31 for n in (abi, nproc, tmpfs_mib)):
        raise SandboxError("sandbox report: malformed")
    return SandboxLayers(user_namespace=bool(user), no_capabilities=bool(no_caps),
                         pid_namespace=bool(pid), network_namespace=bool(net),
                         private_proc=bool(proc), seccomp=_SECCOMP_MODES[seccomp],
                         landlock_abi=abi, dev_restricted=bool(dev), process_limit=nproc,
                         cgroup=bool(cgroup), unaccountable_denied=bool(unaccountable),
                         private_tmpfs_mib=tmpfs_mib)
