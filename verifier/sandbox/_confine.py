"""The child side of the sandbox: what runs between fork and exec (`preexec`).

The process `subprocess` forks (the *keeper*) never executes the command itself:

1. it enters new user, PID and network namespaces (`verifier.sandbox._namespaces`), then
   forks the PID namespace's init (the *reaper*) and waits for it;
2. the reaper mounts a private /proc, forks the *target* and reaps every process
   of the namespace until the target ends; when the reaper exits the kernel kills
   whatever is left in the namespace (setsid and double forks do not escape);
3. the target sets its resource limits (including a process count), confines its
   filesystem with Landlock (/dev reduced to null, zero, urandom and the GPU nodes
   of a GPU run), loads the seccomp filter, sends the parent the layers that are in
   force and the filter's listener over the control socket, and returns to
   `subprocess`, which executes the command.

The keeper and the reaper close every descriptor they do not need (the stdout
pipe included) and pass the target's exit status up the chain, so the parent's
`wait4` sees the target's exit code or signal, and its rusage.
Nothing here assumes the command is Python.
"""

from __future__ import annotations

import array
import ctypes
import json
import os
import resource
import signal
import socket
import struct
from dataclasses import dataclass

from verifier.sandbox import _landlock, _namespaces, _seccomp
from verifier.sandbox._layers import SandboxLayers

__all__ = ["SETUP_FAILED", "ChildPlan", "preexec"]

PR_SET_PDEATHSIG = 1
SETUP_FAILED = 97
"""Exit status of a child whose confinement could not be set up (it never runs the command)."""
MAX_FD = 65536


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


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _fail(what: str) -> None:
    os.write(2, f"ktl sandbox: {what}\n".encode())
    os._exit(SETUP_FAILED)


def _close_all_but(keep: int) -> None:
    os.closerange(0, keep)
    os.closerange(keep + 1, MAX_FD)


def _mirror(status: int) -> None:
    """End this process the way `status` (a wait status) says: same exit code or signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.signal(sig, ctypes.c_void_p(0))  # SIG_DFL
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else SETUP_FAILED)


def _keep(plan: ChildPlan, pid_ns: bool, layers: dict[str, object]) -> None:
    """The keeper: fork the reaper, then wait for it and pass the target's status up."""
    rd, wr = os.pipe()
    reaper = os.fork()
    if reaper == 0:
        os.close(rd)
        _reap(plan, pid_ns, layers, wr)
        return  # only the target returns, to be executed
    os.close(wr)
    _close_all_but(rd)
    _, status = os.waitpid(reaper, 0)
    raw = os.read(rd, 4)
    _mirror(struct.unpack("=i", raw)[0] if len(raw) == 4 else status)


def _reap(plan: ChildPlan, pid_ns: bool, layers: dict[str, object], status_fd: int) -> None:
    """The reaper (the PID namespace's init): fork the target, reap all, report its status."""
    _die_with_parent()
    layers["private_proc"] = pid_ns and _namespaces.private_proc()
    layers["private_tmpfs_mib"] = 0
    if plan.private_dir is not None and plan.private_bytes > 0:
        if not _namespaces.private_tmpfs(plan.private_dir, plan.private_bytes):
            _fail(f"cannot mount a {plan.private_bytes >> 20} MiB tmpfs on the private folder")
        layers["private_tmpfs_mib"] = plan.private_bytes >> 20
    target = os.fork()
    if target == 0:
        os.close(status_fd)
        _target(plan, layers)
        return
    _close_all_but(status_fd)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(SETUP_FAILED)
        if pid == target:
            os.write(status_fd, struct.pack("=i", status))
            os._exit(0)


def _limits(plan: ChildPlan, count_processes: bool) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (plan.cpu_s, plan.cpu_s + 1))
    if plan.address_space is not None:
        resource.setrlimit(resource.RLIMIT_AS, (plan.address_space, plan.address_space))
    resource.setrlimit(resource.RLIMIT_FSIZE, (plan.file_size, plan.file_size))
    resource.setrlimit(resource.RLIMIT_NOFILE, (plan.open_files, plan.open_files))
    if count_processes:  # counted per user namespace; outside one it would count all of the uid's
        resource.setrlimit(resource.RLIMIT_NPROC, (plan.processes, plan.processes))


def _target(plan: ChildPlan, layers: dict[str, object]) -> None:
    """The target: Landlock, seccomp, report to the parent, limits; then `subprocess` execs.

    The limits come last: until `subprocess` closes them, the target still holds the
    parent's descriptors, and RLIMIT_NOFILE would leave Landlock and seccomp no fd."""
    _die_with_parent()
    abi = _landlock.abi_version()
    if abi >= 1 and not _landlock.confine(plan.read_only, plan.read_write):
        _fail("Landlock is offered by this kernel but the filesystem could not be confined")
    layers["landlock_abi"] = abi if abi >= 1 else 0
    layers["dev_restricted"] = abi >= 1
    try:
        listener = _seccomp.install(plan.listen, plan.local_unix_sockets, plan.deny_unaccountable)
    except OSError as exc:
        _fail(f"cannot load the seccomp filter: {exc}")
    layers["seccomp"] = "notify" if listener is not None else "kill"
    layers["unaccountable_denied"] = plan.deny_unaccountable
    in_userns = bool(layers["user_namespace"])
    layers["process_limit"] = plan.processes if in_userns else 0
    try:
        _limits(plan, in_userns)
    except (OSError, ValueError) as exc:
        _fail(f"cannot set resource limits: {exc}")
    message = json.dumps(SandboxLayers(**layers).to_json()).encode()  # type: ignore[arg-type]
    fds = [listener] if listener is not None else []
    try:
        ctl = socket.socket(fileno=plan.control_fd)
        ctl.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
                    if fds else [])
        ctl.detach()
    except OSError as exc:
        _fail(f"cannot report to the parent: {exc}")
    os.close(plan.control_fd)
    if listener is not None:
        os.close(listener)
    if plan.local_unix_sockets:  # now that the report is sent: no socket reaches an address
        try:
            _seccomp.install_address_filter()
        except OSError as exc:
            _fail(f"cannot load the seccomp address filter: {exc}")


def join_cgroup(procs_paths: tuple[str, ...]) -> None:
    """Move this process into the run's cgroup (`0` is the writer itself); fail the set-up
    rather than run unaccounted."""
    for path in procs_paths:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
        except OSError as exc:
            _fail(f"cannot join the run's cgroup ({path}): {exc.strerror}")


def preexec(plan: ChildPlan) -> None:
    """Runs in the child `subprocess` forked; returns only in the target process."""
    _die_with_parent()
    join_cgroup(plan.cgroup_procs)  # before anything else: all of the tree is accounted
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        user, pid_ns, net = _namespaces.enter()
    except OSError as exc:  # a user namespace without an id map: nothing would work in it
        _fail(str(exc))
    _die_with_parent()  # a credential change (the new user namespace) clears it
    layers: dict[str, object] = {
        "user_namespace": user, "no_capabilities": user or os.geteuid() != 0,
        "pid_namespace": pid_ns, "network_namespace": net, "cgroup": bool(plan.cgroup_procs)}
    _keep(plan, pid_ns, layers)

