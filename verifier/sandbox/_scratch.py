"""Scratch folders that a kernel wrote into, and their removal without recursion.

A kernel's private folder holds whatever the kernel made there: 3,000 nested folders,
symbolic links, folders it made unreadable. `shutil.rmtree` recurses once per level
(a `RecursionError` on deep trees) and a path-based walk passes PATH_MAX. `remove_tree`
does neither: it flattens the tree into its top folder, one level at a time, moving
every sub-folder it meets up to the top (rename between two open folder descriptors,
never following a link), so it holds at most three descriptors and its depth is one,
whatever the tree. `scratch_dir` is a temporary folder whose removal never raises: the
caller's result (a report) is built inside it and is never lost to the clean-up.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["MAX_ENTRIES", "remove_tree", "scratch_dir"]

MAX_ENTRIES = 10_000_000
"""Entries removed before giving up (a bound on the time clean-up may take)."""
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _is_dir(name: str, parent_fd: int) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _empty_one(root_fd: int, name: str, pending: list[str]) -> int:
    """Unlink the files of top-level folder `name`, move its sub-folders to the top
    (appended to `pending`), then remove it; the number of entries handled."""
    with contextlib.suppress(OSError):
        os.chmod(name, 0o700, dir_fd=root_fd, follow_symlinks=False)
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=root_fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=root_fd)
        return 1
    handled = 0
    try:
        with os.scandir(fd) as entries:
            names = [e.name for e in entries]
        for child in names:
            handled += 1
            if _is_dir(child, fd):
                moved = f".ktl-rm-{secrets.token_hex(8)}"
                try:
                    os.rename(child, moved, src_dir_fd=fd, dst_dir_fd=root_fd)
                    pending.append(moved)
                except OSError:
                    pass
            else:
                with contextlib.suppress(OSError):
                    os.unlink(child, dir_fd=fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(name, dir_fd=root_fd)
    return handled + 1


def remove_tree(path: str | Path) -> bool:
    """Remove the folder `path` and everything below it; True if it is gone.

    Never raises and never recurses; links are removed, never followed. Where the walk
    cannot finish (entries it cannot remove, more than `MAX_ENTRIES`), `rm -rf` is the
    last resort."""
    target = Path(path)
    try:
        root_fd = os.open(target, _DIR_FLAGS)
    except OSError:
        with contextlib.suppress(OSError):
            target.unlink()
        return not os.path.lexists(target)
    try:
        with contextlib.suppress(OSError):
            os.fchmod(root_fd, 0o700)
        with os.scandir(root_fd) as entries:
            pending = [e.name for e in entries]
        handled = 0
        while pending and handled < MAX_ENTRIES:
            name = pending.pop()
            if _is_dir(name, root_fd):
                handled += _empty_one(root_fd, name, pending)
            else:
                handled += 1
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=root_fd)
    except OSError:
        pass
    finally:
        os.close(root_fd)
    with contextlib.suppress(OSError):
        os.rmdir(target)
    if os.path.lexists(target):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["rm", "-rf", "--one-file-system", "--", str(target)], check=False,
                           timeout=300, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return not os.path.lexists(target)


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A new private temporary folder, removed (by `remove_tree`) on leaving, never raising."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        remove_tree(folder)
