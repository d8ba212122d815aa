"""The trusted-state store: pins per log URL, the largest verified checkpoint per log origin.

Layout under `$KTL_HOME` (default `$XDG_CONFIG_HOME/ktl`, else `~/.config/ktl`):

    pins/<slug of URL>.json   the origin and verifier key first seen at a log URL (trusted on
                              first use, or given with --log-key): {"url", "origin", "log_key",
                              "how", "pinned_at"}
    logs/<slug>/<id>/log.json     which log a trusted checkpoint is for: {"origin",
                                  "log_key"}; <id> is a hash of the two
    logs/<slug>/<id>/checkpoint   the signed note of the largest checkpoint verified for that
                                  (origin, key)
    evidence/<time>-<kind>-<slug>.txt   rollback / fork / pin-mismatch evidence: both signed
                              checkpoints and what went wrong

Pins are keyed by the URL the user chose, never by what a server says it is: a log
that later announces another origin or key at a pinned URL is refused. Trusted
checkpoints are keyed by (origin, key): an impostor at another URL that announces the
real log's origin under its own key gets a state of its own and cannot lock the user
out of the real log, nor take its rollback protection away. The URL is deliberately
not part of that key: a checkpoint signed by the log's key is the log's word wherever
it was fetched, so a fork or rollback served under the real key at a mirror's URL is
still judged against everything trusted for that key (the pins, which decide which
key a URL must use, stay per URL).

Before that, trusted checkpoints were kept per origin alone (``logs/<slug>/checkpoint``).
Such a file is still read: for a log whose own folder is empty, a legacy checkpoint
that verifies under the log's key is taken over (copied to the log's folder); one that
does not verify was another key's and is ignored.

Every write goes to a temporary file in the same folder, is fsynced, then renamed
over the old one, so a crash leaves either the old or the new file, never half of one.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from client.errors import InputError

MAX_STATE_FILE_BYTES = 64 * 1024
MAX_PINS = 10_000
PinHow = Literal["given", "tofu"]
EvidenceKind = Literal["rollback", "fork", "pin-mismatch", "index-mismatch"]


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


def normalize_log_url(url: str) -> str:
    """The form a log URL is pinned under: scheme and host lowercased, no trailing slash."""
    text = url.strip()
    parts = urlsplit(text)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise InputError(f"log URL {url!r} must start with http:// or https://")
    if parts.query or parts.fragment:
        raise InputError(f"log URL {url!r} must not have a query or fragment")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), "", ""))


@dataclass(frozen=True)
class Pin:
    """What was first seen (or given) at one log URL: its origin and verifier key."""

    url: str
    origin: str
    log_key: str
    how: PinHow
    pinned_at: str

    def to_json(self) -> dict[str, Any]:
        return {"url": self.url, "origin": self.origin, "log_key": self.log_key,
                "how": self.how, "pinned_at": self.pinned_at}

    @classmethod
    def from_json(cls, obj: object) -> Pin:
        if not isinstance(obj, dict):
            raise InputError("a pin file must hold a JSON object")
        fields = ("url", "origin", "log_key", "how", "pinned_at")
        if set(obj) != set(fields) or not all(isinstance(obj[f], str) for f in fields):
            raise InputError(f"a pin file must hold exactly the strings {', '.join(fields)}")
        how = obj["how"]
        if how not in ("given", "tofu"):
            raise InputError(f"a pin's 'how' must be 'given' or 'tofu', not {how!r}")
        return cls(obj["url"], obj["origin"], obj["log_key"], "given" if how == "given" else "tofu",
                   obj["pinned_at"])


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


@dataclass(frozen=True)
class LogRef:
    """The identity trusted checkpoints are kept under: origin and verifier key."""

    origin: str
    log_key: str

    def to_json(self) -> dict[str, Any]:
        return {"origin": self.origin, "log_key": self.log_key}

    @property
    def slug(self) -> str:
        text = "\n".join((self.origin, self.log_key))
        return hashlib.sha256(text.encode()).hexdigest()[:24]


class TrustedState:
    """Pins per log URL and trusted checkpoints per (origin, key), under one folder."""

    def __init__(self, home: Path | None = None) -> None:
        self.home = home if home is not None else default_home()

    def _legacy_dir(self, origin: str) -> Path:
        return self.home / "logs" / origin_slug(origin)

    def _dir(self, ref: LogRef) -> Path:
        return self._legacy_dir(ref.origin) / ref.slug

    def _read(self, ref: LogRef, name: str) -> bytes | None:
        path = self._dir(ref) / name
        if not path.exists():
            return None
        stored = read_capped(self._dir(ref) / "log.json", 4096, "state file")
        try:
            same = json.loads(stored) == ref.to_json()
        except ValueError:
            same = False
        if not same:
            raise InputError(f"state folder {path.parent} belongs to another log; remove it")
        return read_capped(path, MAX_STATE_FILE_BYTES, "state file")

    def _write(self, ref: LogRef, name: str, data: bytes) -> None:
        folder = self._dir(ref)
        atomic_write(folder / "log.json", json.dumps(ref.to_json()).encode())
        atomic_write(folder / name, data)

    def lock(self, ref: LogRef) -> AbstractContextManager[None]:
        """Serialize read-compare-store of one log's state across processes (flock)."""
        return _flock(self._dir(ref))

    def pins_lock(self) -> AbstractContextManager[None]:
        """Serialize read-then-pin of log URLs across processes (flock)."""
        return _flock(self.home / "pins")

    def checkpoint(self, ref: LogRef) -> bytes | None:
        """The signed note of the largest checkpoint verified for `ref`, if any."""
        return self._read(ref, "checkpoint")

    def legacy_checkpoint(self, origin: str) -> bytes | None:
        """A checkpoint stored per origin by an older ktl (verify it before using it)."""
        folder = self._legacy_dir(origin)
        if not (folder / "checkpoint").is_file():
            return None
        stored_origin = read_capped(folder / "origin", 1024, "state file")
        if stored_origin.decode("utf-8", "replace") != origin:
            raise InputError(f"state folder {folder} belongs to another origin; remove it")
        return read_capped(folder / "checkpoint", MAX_STATE_FILE_BYTES, "state file")

    def store_checkpoint(self, ref: LogRef, note: bytes) -> None:
        """Remember `note` (already verified and proven consistent by the caller)."""
        self._write(ref, "checkpoint", note)

    # ---- pins, keyed by the URL the user chose
    def _pin_path(self, url: str) -> Path:
        return self.home / "pins" / f"{origin_slug(normalize_log_url(url))}.json"

    def pin(self, url: str) -> Pin | None:
        """The pin for log `url`, if any (a pin file for another URL is an error, not a match)."""
        path = self._pin_path(url)
        if not path.exists():
            return None
        pin = _load_pin(path)
        if pin.url != normalize_log_url(url):
            raise InputError(f"pin file {path} is for {pin.url!r}, not {url!r}; remove it")
        return pin

    def set_pin(self, pin: Pin) -> None:
        """Pin `pin.origin` and `pin.log_key` for `pin.url` (the caller checked there was none)."""
        if pin.url != normalize_log_url(pin.url):
            raise InputError(f"pin URL {pin.url!r} is not normalized")
        atomic_write(self._pin_path(pin.url), json.dumps(pin.to_json(), indent=1).encode())

    def pins(self) -> list[Pin]:
        """Every pin, sorted by URL (at most MAX_PINS files are read)."""
        folder = self.home / "pins"
        if not folder.is_dir():
            return []
        files = sorted(p for p in folder.iterdir() if p.suffix == ".json")
        if len(files) > MAX_PINS:
            raise InputError(f"{folder} holds more than {MAX_PINS} pins; remove some")
        return sorted((_load_pin(p) for p in files), key=lambda p: p.url)

    def forget(self, url: str) -> Pin | None:
        """Drop the pin for `url`; return it (None when there was none)."""
        pin = self.pin(url)
        if pin is not None:
            self._pin_path(url).unlink()
        return pin

    def drop_checkpoint(self, ref: LogRef, legacy: bool = True) -> bool:
        """Forget the trusted checkpoint of `ref` (and, with `legacy`, its origin's
        per-origin one from an older ktl); True if there was one."""
        dropped = False
        if self._read(ref, "checkpoint") is not None:
            (self._dir(ref) / "checkpoint").unlink()
            dropped = True
        if legacy and self.legacy_checkpoint(ref.origin) is not None:
            (self._legacy_dir(ref.origin) / "checkpoint").unlink()
            dropped = True
        return dropped

    def save_evidence(
        self, origin: str, kind: EvidenceKind, old_note: bytes, new_note: bytes, detail: str
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


@contextmanager
def _flock(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _load_pin(path: Path) -> Pin:
    raw = read_capped(path, MAX_STATE_FILE_BYTES, "pin file")
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise InputError(f"pin file {path} is not JSON ({exc}); remove it") from exc
    try:
        return Pin.from_json(obj)
    except InputError as exc:
        raise InputError(f"pin file {path}: {exc}; remove it") from exc
