"""Filesystem confinement of a sandboxed child with Linux Landlock (via raw syscalls).

After `confine(read_only, read_write)` the calling process (and what it executes)
can read and execute only under `read_only`, and read, write and create only under
`read_write`; everything else on the filesystem (the caller's home folder and its
signing keys included) is out of reach, even for root. Where the kernel's Landlock
is new enough it also gets no TCP bind/connect (ABI 4) and cannot signal processes
outside the sandbox, such as its parent (ABI 6). Meant to run in a child
between fork and exec. Where the kernel lacks Landlock, `abi_version()` is 0 and
the caller records that the filesystem was not confined.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Sequence

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

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


def _handled(abi: int) -> int:
    mask = _ABI1_ALL
    if abi >= 2:
        mask |= REFER
    if abi >= 3:
        mask |= TRUNCATE
    if abi >= 5:
        mask |= IOCTL_DEV
    return mask


def confine(read_only: Sequence[str], read_write: Sequence[str]) -> bool:
    """Restrict this process to the given trees; True if Landlock is now enforced."""
    abi = abi_version()
    if abi < 1:
        return False
    libc = _libc()
    handled = _handled(abi)
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    attr = struct.pack("=QQQ", handled, net, scoped)[:size]
    buf = ctypes.create_string_buffer(attr, 24)
    ruleset = int(libc.syscall(SYS_CREATE_RULESET, buf, ctypes.c_size_t(size), 0))
    if ruleset < 0:
        return False
    try:
        for paths, rights in ((read_only, READ_ONLY), (read_write, handled)):
            for path in paths:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    allowed = rights if os.path.isdir(path) else rights & FILE_RIGHTS
                    rule = ctypes.create_string_buffer(struct.pack("=Qi", allowed, fd), 12)
                    if int(libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, rule, 0)) < 0:
                        return False
                finally:
                    os.close(fd)
        if int(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) != 0:
            return False
        return int(libc.syscall(SYS_RESTRICT_SELF, ruleset, 0)) == 0
    finally:
        os.close(ruleset)
