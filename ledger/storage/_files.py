"""Tile files on disk: written atomically (temporary file + rename), read back by path."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

from ledger.storage._types import StorageError

# Only what ledger.tiles produces, plus the published checkpoint.
_SAFE_PATH = re.compile(r"^(checkpoint|tile/(entries|[0-9]{1,2})(/x[0-9]{3})*/[0-9]{3}(\.p/[0-9]{1,3})?)$")

_TEMP = re.compile(r"\.[^/]+\.[0-9]+\.[0-9]+\.tmp")  # what `write` names its temporary files


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
            target = self.root / check_file_path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            self._counter += 1
            tmp = target.parent / f".{target.name}.{os.getpid()}.{self._counter}.tmp"  # _TEMP
            try:
                with open(tmp, "wb") as fh:
                    fh.write(data)
                    if self.fsync:
                        fh.flush()
                        os.fsync(fh.fileno())
                os.replace(tmp, target)
            except BaseException:
                tmp.unlink(missing_ok=True)  # a full disk must not leave half-written files
                raise
        for path in files:
            if path.startswith("tile/") and ".p/" not in path:
                # The full tile exists now; tlog-tiles lets partial ones go.
                shutil.rmtree(self.root / f"{path}.p", ignore_errors=True)

    def read(self, path: str) -> bytes | None:
        target = self.root / check_file_path(path)
        try:
            return target.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

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
