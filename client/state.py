"""The trusted-state store: per log origin, the largest verified checkpoint and the pinned log key.

Layout under `$KTL_HOME` (default `$XDG_CONFIG_HOME/ktl`, else `~/.config/ktl`):

    logs/<slug>/origin        the origin line, verbatim
    logs/<slug>/checkpoint    the signed note of the largest checkpoint verified
    logs/<slug>/log-key       the verifier key pinned on first use (or given with --log-key)
    evidence/<time>-<kind>-<slug>.txt   rollback / fork evidence: both signed checkpoints

Every write goes to a temporary file in the same folder, is fsynced, then renamed
over the old one, so a crash leaves either the old or the new file, never half of one.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from client._errors import InputError

MAX_STATE_FILE_BYTES = 64 * 1024


def default_home() -> Path:
    """`$KTL_HOME`, else `$XDG_CONFIG_HOME/ktl`, else `~/.config/ktl`."""
    env = os.environ.get("KTL_HOME")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg else Path.home() / ".config"
    return base / "ktl"


def origin_slug(origin: str) -> str:
    """A file-name-safe, collision-free folder name for an origin line."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", origin)[:64].strip("._") or "log"
    return f"{readable}-{hashlib.sha256(origin.encode()).hexdigest()[:12]}"


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data` so that readers see the old or the new bytes, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read_capped(path: Path, cap: int, what: str) -> bytes:
    """Read a local file of at most `cap` bytes, or raise `InputError` saying what is wrong."""
    try:
        size = path.stat().st_size
        if size > cap:
            raise InputError(f"{what} {path} is {size} bytes, more than the {cap} allowed")
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError(f"{what} {path} does not exist") from exc
    except IsADirectoryError as exc:
        raise InputError(f"{what} {path} is a folder, not a file") from exc
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc}") from exc


class TrustedState:
    """Per-origin trusted checkpoints and pinned log keys, stored under one folder."""

    def __init__(self, home: Path | None = None) -> None:
        self.home = home if home is not None else default_home()

    def _dir(self, origin: str) -> Path:
        return self.home / "logs" / origin_slug(origin)

    def _read(self, origin: str, name: str) -> bytes | None:
        path = self._dir(origin) / name
        if not path.exists():
            return None
        stored_origin = read_capped(self._dir(origin) / "origin", 1024, "state file")
        if stored_origin.decode("utf-8", "replace") != origin:
            raise InputError(f"state folder {path.parent} belongs to another origin; remove it")
        return read_capped(path, MAX_STATE_FILE_BYTES, "state file")

    def _write(self, origin: str, name: str, data: bytes) -> None:
        folder = self._dir(origin)
        atomic_write(folder / "origin", origin.encode("utf-8"))
        atomic_write(folder / name, data)

    @contextmanager
    def lock(self, origin: str) -> Iterator[None]:
        """Serialize read-compare-store of one origin's state across processes (flock)."""
        folder = self._dir(origin)
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def checkpoint(self, origin: str) -> bytes | None:
        """The signed note of the largest checkpoint verified for `origin`, if any."""
        return self._read(origin, "checkpoint")

    def store_checkpoint(self, origin: str, note: bytes) -> None:
        """Remember `note` (already verified and proven consistent by the caller)."""
        self._write(origin, "checkpoint", note)

    def log_key(self, origin: str) -> str | None:
        """The verifier key pinned for `origin`, if any."""
        raw = self._read(origin, "log-key")
        return raw.decode("utf-8").strip() if raw is not None else None

    def pin_log_key(self, origin: str, key: str) -> None:
        """Pin `key` as the only verifier key accepted for `origin` from now on."""
        self._write(origin, "log-key", key.encode("utf-8") + b"\n")

    def save_evidence(
        self, origin: str, kind: str, old_note: bytes, new_note: bytes, detail: str
    ) -> Path:
        """Write both signed checkpoints and what went wrong to a new evidence file."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        folder = self.home / "evidence"
        path = folder / f"{stamp}-{kind}-{origin_slug(origin)}.txt"
        n = 1
        while path.exists():
            n += 1
            path = folder / f"{stamp}-{kind}-{origin_slug(origin)}-{n}.txt"
        body = (
            f"ktl evidence: {kind}\norigin: {origin}\ndetected: {stamp}\ndetail: {detail}\n\n"
            "-----BEGIN TRUSTED CHECKPOINT-----\n"
        ).encode() + old_note + b"-----END TRUSTED CHECKPOINT-----\n" + (
            b"-----BEGIN CONFLICTING CHECKPOINT-----\n"
        ) + new_note + b"-----END CONFLICTING CHECKPOINT-----\n"
        atomic_write(path, body)
        return path
