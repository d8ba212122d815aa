"""Tile files on disk: written atomically (temporary file + rename), read back by path.

Every path under the data folder is opened component by component with ``O_NOFOLLOW``
(relative to the folder's own descriptor): a symbolic link planted anywhere below the
folder is refused, never followed, so its target (``/etc/...``) is never served.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from ledger.storage._types import StorageError

# Only what ledger.tlog.tiles produces, plus the published checkpoint.
_SAFE_PATH = re.compile(r"^(checkpoint|tile/(entries|[0-9]{1,2})(/x[0-9]{3})*/[0-9]{3}(\.p/[0-9]{1,3})?)$")

_TEMP = re.compile(r"\.[^/]+\.[0-9]+\.[0-9]+\.tmp")  # what `write` names its temporary files

_NOFOLLOW = os.O_NOFOLLOW
_CLOEXEC = os.O_CLOEXEC


def _open_nofollow(dir_fd: int, name: str, flags: int) -> int:
    """Open ``name`` in ``dir_fd``; a symbolic link there is a StorageError, not followed."""
    try:
        return os.open(name, flags | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and _is_link(dir_fd, name)):
            raise StorageError(f"{name!r} in the data folder is a symbolic link; refused "
                               "(tile files are never read through links)") from None
        raise


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def check_file_path(path: str) -> str:
    """Reject anything that is not a tile, entry bundle or checkpoint path."""
    if not _SAFE_PATH.fullmatch(path):
        raise StorageError(f"not a tile file path: {path!r}")
    return path


class TileFiles:
    """A folder holding the static read path (`checkpoint`, `tile/...`)."""

    def __init__(self, root: Path, fsync: bool = False) -> None:
        self.root = root
        self.fsync = fsync
        root.mkdir(parents=True, exist_ok=True)
        self._counter = 0

    def write(self, files: Mapping[str, bytes]) -> None:
        """Write each file atomically; `checkpoint` (if given) is written last.

        Partial tiles of a tile written in full here are deleted afterwards.
        """
        ordered = sorted(files.items(), key=lambda kv: kv[0] == "checkpoint")
        for path, data in ordered:
            parts = check_file_path(path).split("/")
            dfd = self._open_dir(parts[:-1], create=True)
            try:
                self._write_in(dfd, parts[-1], data)
            finally:
                os.close(dfd)
        for path in files:
            if path.startswith("tile/") and ".p/" not in path:
                # The full tile exists now; tlog-tiles lets partial ones go.
                self._remove_partials(path)

    def _write_in(self, dfd: int, name: str, data: bytes) -> None:
        self._counter += 1
        tmp = f".{name}.{os.getpid()}.{self._counter}.tmp"  # _TEMP
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC,
                         0o644, dir_fd=dfd)
            with open(fd, "wb") as fh:
                fh.write(data)
                if self.fsync:
                    fh.flush()
                    os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):  # a full disk leaves no half files
                os.unlink(tmp, dir_fd=dfd)
            raise

    def _remove_partials(self, path: str) -> None:
        parts = path.split("/")
        try:
            dfd = self._open_dir(parts[:-1], create=False)
        except (FileNotFoundError, NotADirectoryError):
            return
        try:
            # rmtree with dir_fd never follows links (it is fd-based on this platform)
            shutil.rmtree(f"{parts[-1]}.p", dir_fd=dfd, ignore_errors=True)
        finally:
            os.close(dfd)

    def _open_dir(self, parts: list[str], create: bool) -> int:
        """A descriptor of root/parts..., each component opened without following links."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        try:
            for part in parts:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                nxt = _open_nofollow(fd, part, os.O_RDONLY | os.O_DIRECTORY)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read(self, path: str) -> bytes | None:
        """The file's bytes; None when absent; StorageError when a link is in its way."""
        parts = check_file_path(path).split("/")
        try:
            dfd = self._open_dir(parts[:-1], create=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            fd = _open_nofollow(dfd, parts[-1], os.O_RDONLY | os.O_NONBLOCK)  # a FIFO: no wait
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        finally:
            os.close(dfd)
        with open(fd, "rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            if stat.S_ISDIR(mode):
                return None
            if not stat.S_ISREG(mode):
                raise StorageError(f"{path} in the data folder is not a regular file; refused")
            return fh.read()

    def remove_temporaries(self) -> list[str]:
        """Delete temporary files a killed writer left (call only while no one writes)."""
        gone: list[str] = []
        for dirpath, _dirs, names in os.walk(self.root):
            for name in names:
                if _TEMP.fullmatch(name):
                    os.unlink(os.path.join(dirpath, name))
                    gone.append(os.path.relpath(os.path.join(dirpath, name), self.root))
        return sorted(gone)

    def list(self) -> Iterator[str]:
        for dirpath, _dirs, names in os.walk(self.root):
            for name in names:
                if name.startswith("."):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), self.root)
                yield rel.replace(os.sep, "/")
