"""The log's Ed25519 signing key: created on first start (mode 0600) or taken from a file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.server._errors import ApiError
from ledger.tlog.note import NoteError, NoteSigner

KEY_NAME = "log.key"


class LogKeyError(ApiError):
    """The log key is missing, unreadable, malformed or for another origin."""

    def __init__(self, message: str) -> None:
        super().__init__(500, "log_key_error", message)


def read_signer(path: Path) -> NoteSigner:
    try:
        text = path.read_text("ascii").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise LogKeyError(f"cannot read the log key {path}: {e}") from None
    try:
        return NoteSigner.from_key_string(text)
    except NoteError as e:
        raise LogKeyError(f"{path} is not a log signing key (PRIVATE+KEY+...): {e}") from None


class _KeyString(Protocol):
    def to_key_string(self) -> str: ...


def write_signer(path: Path, signer: _KeyString) -> None:
    """Write the key string (a log's or a witness's) to a new file readable only by its owner."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(signer.to_key_string() + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def log_key_path(data_dir: str | os.PathLike[str], key_file: str | None = None) -> Path:
    """Where the log key lives: ``key_file`` if given, else ``<data>/log.key`` (the one place
    that says so; `ktl serve`, `ktl log-key` and `ktl migrate` all ask here)."""
    return Path(key_file) if key_file is not None else Path(data_dir) / KEY_NAME


def load_or_create_signer(
    data_dir: str | os.PathLike[str], origin: str | None, key_file: str | None = None
) -> NoteSigner:
    """The log key: ``key_file`` if given, else ``<data>/log.key`` (created if absent).

    The key's name is the log origin; a different ``origin`` is refused so that one
    data folder never signs checkpoints for two origins.
    """
    data = Path(data_dir)
    path = log_key_path(data_dir, key_file)
    if key_file is not None:
        signer = read_signer(path)
    else:
        if path.exists():
            signer = read_signer(path)
        else:
            data.mkdir(parents=True, exist_ok=True)
            signer = NoteSigner(origin or "localhost/ktl", Ed25519PrivateKey.generate())
            write_signer(path, signer)
    if origin is not None and signer.name != origin:
        raise LogKeyError(
            f"the log key is for origin {signer.name!r}, not {origin!r}: drop --origin or use "
            "a new data folder"
        )
    return signer


def read_verifier_key(data_dir: str | os.PathLike[str], key_file: str | None = None) -> str:
    """The verifier key string of an existing log (for `ktl log-key`)."""
    path = log_key_path(data_dir, key_file)
    if not path.exists():
        raise LogKeyError(f"no log key at {path}: start the log once with `ktl serve --data {data_dir}`")
    return read_signer(path).verifier_key_string()
