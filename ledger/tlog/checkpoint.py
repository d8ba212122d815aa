"""C2SP tlog-checkpoint: the signed statement of a log's size and root hash.

The note text is the origin line, the decimal tree size (no leading zeros), the
base64 root hash, and optional non-empty extension lines, each ending in a newline.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.tlog.merkle import HASH_SIZE, MAX_TREE_SIZE
from ledger.tlog.note import (
    Note,
    NoteError,
    NoteVerifier,
    Signer,
    Verifier,
    b64decode_strict,
    open_note,
    sign_note,
)

#: Most extension lines accepted after the root hash.
MAX_EXTENSION_LINES = 16
#: Longest origin or extension line accepted (characters).
MAX_LINE_LENGTH = 1024
_SIZE = re.compile(r"0|[1-9][0-9]{0,18}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class CheckpointError(NoteError):
    """A checkpoint's text is malformed or does not match what was expected."""


def _check_line(line: object, what: str) -> str:
    if not isinstance(line, str) or not line:
        raise CheckpointError(f"{what} must be a non-empty string")
    if len(line) > MAX_LINE_LENGTH:
        raise CheckpointError(f"{what} is longer than {MAX_LINE_LENGTH} characters")
    if _CONTROL.search(line):
        raise CheckpointError(f"{what} must not contain newlines or control characters")
    return line


def check_origin(origin: object) -> str:
    """Return ``origin`` if it can be a checkpoint's origin line, else raise CheckpointError."""
    return _check_line(origin, "checkpoint origin")


@dataclass(frozen=True)
class Checkpoint:
    """A log checkpoint (unsigned). Construction validates every field."""

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        check_origin(self.origin)
        if isinstance(self.size, bool) or not isinstance(self.size, int):
            raise CheckpointError("checkpoint size must be an integer")
        if not 0 <= self.size <= MAX_TREE_SIZE:
            raise CheckpointError(f"checkpoint size {self.size} is out of range [0, 2^63)")
        if not isinstance(self.root_hash, bytes) or len(self.root_hash) != HASH_SIZE:
            raise CheckpointError(f"checkpoint root hash must be {HASH_SIZE} bytes")
        if not isinstance(self.extensions, tuple):
            raise CheckpointError("checkpoint extensions must be a tuple of strings")
        if len(self.extensions) > MAX_EXTENSION_LINES:
            raise CheckpointError(f"checkpoint has more than {MAX_EXTENSION_LINES} extension lines")
        for i, ext in enumerate(self.extensions):
            _check_line(ext, f"checkpoint extension line {i + 1}")

    def to_text(self) -> str:
        root = base64.b64encode(self.root_hash).decode()
        return "".join(f"{line}\n" for line in (self.origin, str(self.size), root, *self.extensions))

    @classmethod
    def from_text(cls, text: str | bytes) -> Checkpoint:
        """Parse checkpoint note text strictly; raise CheckpointError saying what is wrong."""
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                raise CheckpointError("checkpoint is not valid UTF-8") from None
        if not isinstance(text, str):
            raise CheckpointError("checkpoint text must be a string")
        limit = (3 + MAX_EXTENSION_LINES) * (MAX_LINE_LENGTH + 1)
        if len(text) > limit:
            raise CheckpointError(f"checkpoint text is longer than {limit} characters")
        if not text.endswith("\n"):
            raise CheckpointError("checkpoint text must end with a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise CheckpointError("checkpoint needs an origin, a size and a root hash line")
        origin, size_line, root_line, *exts = lines
        if not _SIZE.fullmatch(size_line):
            raise CheckpointError(
                f"checkpoint size {size_line[:40]!r} must be a decimal number without leading zeros"
            )
        try:
            root = b64decode_strict(root_line, "checkpoint root hash")
        except NoteError as e:
            raise CheckpointError(str(e)) from None
        if len(root) != HASH_SIZE:
            raise CheckpointError(f"checkpoint root hash must be {HASH_SIZE} bytes, got {len(root)}")
        return cls(origin, int(size_line), root, tuple(exts))

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "size": self.size,
            "root_hash": base64.b64encode(self.root_hash).decode(),
            "extensions": list(self.extensions),
        }

    @classmethod
    def from_json(cls, obj: object) -> Checkpoint:
        if not isinstance(obj, dict) or set(obj) - {"origin", "size", "root_hash", "extensions"}:
            raise CheckpointError(
                "checkpoint JSON must be an object with origin, size, root_hash, extensions"
            )
        try:
            origin, size, root_b64 = obj["origin"], obj["size"], obj["root_hash"]
        except KeyError as e:
            raise CheckpointError(f"checkpoint JSON is missing {e.args[0]!r}") from None
        exts = obj.get("extensions", [])
        if not isinstance(root_b64, str) or not isinstance(exts, list):
            raise CheckpointError("checkpoint JSON root_hash must be base64, extensions a list")
        try:
            root = b64decode_strict(root_b64, "checkpoint root hash")
        except NoteError as e:
            raise CheckpointError(str(e)) from None
        return cls(origin, size, root, tuple(exts))


@dataclass(frozen=True)
class SignedCheckpoint:
    """A checkpoint whose log signature verified, with the exact note it came from."""

    checkpoint: Checkpoint
    note_bytes: bytes
    note: Note


def sign_checkpoint(cp: Checkpoint, signer: Signer, *extra_signers: Signer) -> bytes:
    """The signed note for ``cp``: the log's signature first, then any extra ones."""
    return sign_note(cp.to_text(), [signer, *extra_signers])


def open_checkpoint(
    data: bytes,
    verifier: NoteVerifier | Verifier,
    origin: str | None = None,
    *,
    others: Sequence[Verifier] = (),
) -> SignedCheckpoint:
    """Verify the log's signature on ``data`` and parse the checkpoint strictly.

    ``verifier`` is the log's key: its signature must be present and valid.
    Signatures by ``others`` (for example witnesses) are verified too when
    present; unknown signatures are ignored. If ``origin`` is given the
    checkpoint's origin line must equal it.
    """
    note = open_note(data, [verifier, *others])
    if not any(
        s.name == verifier.name and s.key_id == verifier.key_id for s in note.verified_signatures
    ):
        raise CheckpointError(
            f"checkpoint is not signed by the log key {verifier.name}+{verifier.key_id.hex()}"
        )
    cp = Checkpoint.from_text(note.text)
    if origin is not None and cp.origin != origin:
        raise CheckpointError(
            f"checkpoint origin {cp.origin!r} is not the expected origin {origin!r}"
        )
    return SignedCheckpoint(cp, data, note)
