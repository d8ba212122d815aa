"""Linux namespaces for a sandboxed child (raw syscalls via ctypes; run between fork and exec).

`enter()` moves the calling process into a new user, PID and network namespace
where the OS allows and says which worked. In the new user namespace the
process's uid inside is `SANDBOX_UID`, not 0, so the program it executes holds no
capabilities in any namespace (as root, too). The new PID namespace applies to
the caller's children: its first child is the namespace's init, and when that
init dies the kernel kills every process left in the namespace.
`private_proc()` (run by that init) mounts a /proc that lists only the namespace's
processes, in a private mount namespace.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["SANDBOX_UID", "enter", "private_proc", "private_tmpfs"]

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
SANDBOX_UID = 1000
"""The uid and gid inside the sandbox's user namespace (mapped to the caller's own)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _unshare(flags: int) -> bool:
    return int(_libc().unshare(flags)) == 0


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _map_ids(uid: int, gid: int) -> None:
    """Map SANDBOX_UID/GID inside to the caller's uid/gid outside (one id each)."""
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{SANDBOX_UID} {uid} 1\n")
        _write("/proc/self/gid_map", f"{SANDBOX_UID} {gid} 1\n")
    except OSError as exc:
        raise OSError(exc.errno, f"cannot map ids in the new user namespace: {exc}") from exc


def enter() -> tuple[bool, bool, bool]:
    """Unshare what this process may: (user namespace, PID namespace, network namespace).

    Raises OSError when a user namespace was entered but its ids cannot be mapped
    (the process is then unusable and must not run the command)."""
    uid, gid = os.getuid(), os.getgid()
    user = _unshare(CLONE_NEWUSER)
    if user:
        _map_ids(uid, gid)
    pid = _unshare(CLONE_NEWPID)
    net = _unshare(CLONE_NEWNET)
    return user, pid, net


def private_proc() -> bool:
    """In a new mount namespace, mount a /proc of this (the init's) PID namespace."""
    libc = _libc()
    if int(libc.unshare(CLONE_NEWNS)) != 0:
        return False
    if int(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None)) != 0:
        return False
    return int(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          None)) == 0


def private_tmpfs(folder: str, size: int) -> bool:
    """Mount a tmpfs of `size` bytes (mode 0700) over `folder` in this process's own mount
    namespace (a new one), and make it the working folder: the parent's view of `folder`
    is untouched, and the tmpfs goes when the sandbox's last process does."""
    libc = _libc()
    if int(libc.unshare(CLONE_NEWNS)) != 0:
        return False
    if int(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None)) != 0:
        return False
    options = f"size={int(size)},mode=0700,nr_inodes=65536".encode()
    if int(libc.mount(b"ktl-private", folder.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                      options)) != 0:
        return False
    try:
        os.chdir(folder)
    except OSError:
        return False
    return True
