"""C2SP tlog-proof@v1: an offline receipt (index, inclusion proof, signed checkpoint).

Saved as ``<name>.tlog-proof`` next to the thing it proves. Format::

    c2sp.org/tlog-proof@v1
    [extra <base64>]
    index <decimal>
    <base64 hash>            (zero or more, leaf's sibling first)
    <empty line>
    <signed checkpoint note, verbatim>
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ledger.tlog.checkpoint import Checkpoint, SignedCheckpoint
from ledger.tlog.cosignature import Cosignature, CosignatureVerifier, verify_cosignatures
from ledger.tlog.merkle import HASH_SIZE, MAX_TREE_SIZE, verify_inclusion
from ledger.tlog.note import MAX_NOTE_BYTES, NoteError, Verifier, b64decode_strict, split_note

HEADER = "c2sp.org/tlog-proof@v1"
FILE_SUFFIX = ".tlog-proof"
#: Most proof hashes accepted (a tree of 2^63 leaves needs 63).
MAX_PROOF_HASHES = 64
#: Largest extra data accepted (bytes, before base64).
MAX_EXTRA_BYTES = 64 * 1024
MAX_PROOF_BYTES = MAX_NOTE_BYTES + 2 * MAX_EXTRA_BYTES
_DEC = re.compile(r"0|[1-9][0-9]{0,18}")


class TlogProofError(NoteError):
    """A tlog-proof file is malformed or does not prove what it claims."""


def _as_text(text: str | bytes) -> str:
    """A proof's text: at most MAX_PROOF_BYTES, UTF-8 when given as bytes."""
    if isinstance(text, bytes):
        if len(text) > MAX_PROOF_BYTES:
            raise TlogProofError(f"tlog-proof is larger than {MAX_PROOF_BYTES} bytes")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise TlogProofError("tlog-proof is not valid UTF-8") from None
    if not isinstance(text, str):
        raise TlogProofError("tlog-proof must be text")
    if len(text) > MAX_PROOF_BYTES:
        raise TlogProofError(f"tlog-proof is larger than {MAX_PROOF_BYTES} bytes")
    return text


def _proof_hashes(hash_lines: list[str]) -> tuple[bytes, ...]:
    """At most MAX_PROOF_HASHES lines, each one base64 hash of HASH_SIZE bytes."""
    if len(hash_lines) > MAX_PROOF_HASHES:
        raise TlogProofError(f"tlog-proof has more than {MAX_PROOF_HASHES} proof hashes")
    hashes = []
    for i, line in enumerate(hash_lines):
        try:
            h = b64decode_strict(line, f"proof hash {i}")
        except NoteError as e:
            raise TlogProofError(str(e)) from None
        if len(h) != HASH_SIZE:
            raise TlogProofError(f"proof hash {i} must be {HASH_SIZE} bytes, got {len(h)}")
        hashes.append(h)
    return tuple(hashes)


@dataclass(frozen=True)
class TlogProof:
    """A parsed tlog-proof@v1. ``checkpoint`` is the signed note bytes, verbatim."""

    index: int
    hashes: tuple[bytes, ...]
    checkpoint: bytes
    extra: bytes | None = None

    def __post_init__(self) -> None:
        if isinstance(self.index, bool) or not isinstance(self.index, int):
            raise TlogProofError("proof index must be an integer")
        if not 0 <= self.index < MAX_TREE_SIZE:
            raise TlogProofError(f"proof index {self.index} is out of range")
        if not isinstance(self.hashes, tuple) or len(self.hashes) > MAX_PROOF_HASHES:
            raise TlogProofError(f"proof hashes must be a tuple of at most {MAX_PROOF_HASHES}")
        for i, h in enumerate(self.hashes):
            if not isinstance(h, bytes) or len(h) != HASH_SIZE:
                raise TlogProofError(f"proof hash {i} must be {HASH_SIZE} bytes")
        if self.extra is not None and (
            not isinstance(self.extra, bytes) or len(self.extra) > MAX_EXTRA_BYTES
        ):
            raise TlogProofError(f"extra data must be bytes, at most {MAX_EXTRA_BYTES}")
        if not isinstance(self.checkpoint, bytes):
            raise TlogProofError("checkpoint must be the signed note bytes")
        try:
            text, _ = split_note(self.checkpoint)
            Checkpoint.from_text(text)
        except NoteError as e:
            raise TlogProofError(f"proof checkpoint is malformed: {e}") from None

    def to_text(self) -> str:
        lines = [HEADER]
        if self.extra is not None:
            lines.append("extra " + base64.b64encode(self.extra).decode())
        lines.append(f"index {self.index}")
        lines.extend(base64.b64encode(h).decode() for h in self.hashes)
        return "\n".join(lines) + "\n\n" + self.checkpoint.decode("utf-8")

    @classmethod
    def from_text(cls, text: str | bytes) -> TlogProof:
        """Parse strictly; raise TlogProofError saying what is wrong."""
        head, sep, note = _as_text(text).partition("\n\n")
        if not sep:
            raise TlogProofError("tlog-proof has no empty line before the checkpoint")
        lines = head.split("\n")
        if lines[0] != HEADER:
            raise TlogProofError(f"tlog-proof must start with the line {HEADER!r}")
        pos = 1
        extra = None
        if pos < len(lines) and lines[pos].startswith("extra "):
            try:
                extra = b64decode_strict(lines[pos][len("extra ") :], "extra data")
            except NoteError as e:
                raise TlogProofError(str(e)) from None
            pos += 1
        if pos >= len(lines) or not lines[pos].startswith("index "):
            raise TlogProofError("tlog-proof needs an 'index <n>' line after the header")
        digits = lines[pos][len("index ") :]
        if not _DEC.fullmatch(digits):
            raise TlogProofError(
                f"index {digits[:30]!r} must be a decimal number without leading zeros"
            )
        return cls(int(digits), _proof_hashes(lines[pos + 1 :]), note.encode(), extra)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "hashes": [base64.b64encode(h).decode() for h in self.hashes],
            "checkpoint": self.checkpoint.decode("utf-8"),
            "extra": None if self.extra is None else base64.b64encode(self.extra).decode(),
        }

    @classmethod
    def from_json(cls, obj: object) -> TlogProof:
        if not isinstance(obj, dict) or set(obj) != {"index", "hashes", "checkpoint", "extra"}:
            raise TlogProofError("tlog-proof JSON needs exactly index, hashes, checkpoint, extra")
        hashes, cp, extra = obj["hashes"], obj["checkpoint"], obj["extra"]
        if not isinstance(hashes, list) or not all(isinstance(h, str) for h in hashes):
            raise TlogProofError("tlog-proof JSON hashes must be a list of base64 strings")
        if not isinstance(cp, str) or not (extra is None or isinstance(extra, str)):
            raise TlogProofError("tlog-proof JSON checkpoint must be text, extra base64 or null")
        try:
            decoded = tuple(b64decode_strict(h, "proof hash") for h in hashes)
            extra_b = None if extra is None else b64decode_strict(extra, "extra data")
        except NoteError as e:
            raise TlogProofError(str(e)) from None
        return cls(obj["index"], decoded, cp.encode(), extra_b)


def verify_tlog_proof(
    proof: TlogProof,
    leaf_hash: bytes,
    log_verifier: Verifier,
    origin: str | None = None,
    witnesses: Sequence[CosignatureVerifier] = (),
    threshold: int = 0,
) -> tuple[SignedCheckpoint, list[Cosignature]]:
    """The C2SP verification steps 2-4: log signature, witness quorum, inclusion.

    Step 1 (computing ``leaf_hash`` from the logged data) is the caller's.
    """
    signed, cosigs = verify_cosignatures(
        proof.checkpoint, log_verifier, witnesses, threshold, origin
    )
    cp = signed.checkpoint
    if proof.index >= cp.size:
        raise TlogProofError(f"proof index {proof.index} is not below checkpoint size {cp.size}")
    verify_inclusion(leaf_hash, proof.index, cp.size, list(proof.hashes), cp.root_hash)
    return signed, cosigs
