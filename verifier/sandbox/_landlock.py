"""Filesystem confinement of a sandboxed child with Linux Landlock (via raw syscalls).

The sandbox launcher (`_launcher.c`) applies the rules this module describes: after
them the child (and what it executes) can read and execute only under the read-only
roots (rights `READ_ONLY`), and read, write and create only under the read-write roots
(every handled right; a file root gets only `FILE_RIGHTS`); everything else on the filesystem (the caller's home folder and its
signing keys included) is out of reach, even for root. Where the kernel's Landlock
is new enough it also gets no TCP bind/connect (ABI 4) and cannot signal processes
outside the sandbox, such as its parent (ABI 6). Where the kernel lacks Landlock,
`abi_version()` is 0 and the caller records that the filesystem was not confined.
"""

from __future__ import annotations

import ctypes
import struct

SYS_CREATE_RULESET = 444
CREATE_RULESET_VERSION = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_ABI1_ALL = (1 << 13) - 1
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
READ_ONLY = EXECUTE | READ_FILE | READ_DIR
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
"""ABI 4+: no TCP bind or connect at all (no rule grants any port)."""
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
"""ABI 6+: no signals to, and no abstract sockets of, processes outside the sandbox
(the kernel cannot kill or poke the `ktl` process that runs it)."""
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The Landlock ABI version this kernel offers (0: none)."""
    try:
        version = int(_libc().syscall(SYS_CREATE_RULESET, None, 0, CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(version, 0)


def handled(abi: int) -> int:
    """The filesystem rights a ruleset of this ABI handles (everything it can deny)."""
    mask = _ABI1_ALL
    if abi >= 2:
        mask |= REFER
    if abi >= 3:
        mask |= TRUNCATE
    if abi >= 5:
        mask |= IOCTL_DEV
    return mask


def ruleset_attr(abi: int) -> bytes:
    """`struct landlock_ruleset_attr` for this ABI, as `landlock_create_ruleset` takes it:
    the handled filesystem rights, no TCP bind/connect (ABI 4+), signals and abstract
    sockets scoped to the sandbox (ABI 6+)."""
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    return struct.pack("=QQQ", handled(abi), net, scoped)[:size]
