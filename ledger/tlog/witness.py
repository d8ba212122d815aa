"""C2SP tlog-witness `add-checkpoint`, pure: the request bytes and the witness's decision.

A request is an ``old <size>`` line, at most 63 base64 consistency-proof lines, a
blank line and a signed checkpoint. `AddCheckpoint.parse` checks the framing
(anything malformed is a 400); `decide` is the witness's whole judgement — the
parsed request, the log's keys and the checkpoint the witness holds in, a typed
`Cosign` or `Reject` (with the spec's status code) out. The server does the I/O:
it holds the origin's row locked while it calls `decide`, and stores the new
checkpoint durably before it answers with the cosignature line.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ledger.tlog._errors import LedgerError
from ledger.tlog.checkpoint import Checkpoint, SignedCheckpoint
from ledger.tlog.merkle import EMPTY_ROOT, HASH_SIZE, verify_consistency
from ledger.tlog.note import NoteError, Verifier, b64decode_strict, open_note, split_note

#: Most consistency-proof lines a request may carry (the spec's limit).
MAX_PROOF_LINES = 63
#: Largest add-checkpoint body accepted (bytes); larger ones get 413.
MAX_REQUEST_BYTES = 64 * 1024
#: Media type of a 409 answer's body (the size the witness holds, then a newline).
SIZE_MEDIA_TYPE = "text/x.tlog.size"

_SIZE = re.compile(r"0|[1-9][0-9]{0,19}")

RejectStatus = Literal[400, 403, 404, 409, 413, 422]


class WitnessError(LedgerError):
    """A witness request or answer is malformed, or a witness refused a checkpoint."""


class RequestError(WitnessError):
    """An add-checkpoint request is malformed (the witness answers 400)."""


def parse_size(text: str, what: str) -> int:
    """A decimal tree size with no leading zeros, as the spec writes sizes."""
    if not _SIZE.fullmatch(text):
        raise RequestError(f"{what} {text[:40]!r} is not a decimal size without leading zeros")
    value = int(text)
    if value >= 1 << 63:
        raise RequestError(f"{what} {value} is too large")
    return value


@dataclass(frozen=True)
class AddCheckpoint:
    """One add-checkpoint request: old size, consistency proof and signed checkpoint."""

    old_size: int
    proof: tuple[bytes, ...]
    note: bytes
    checkpoint: Checkpoint
    """Parsed from the note's text, signature not yet checked (`decide` checks it)."""

    def encode(self) -> bytes:
        """The request body, byte for byte as the spec lays it out."""
        return encode_add_checkpoint(self.old_size, self.proof, self.note)

    @classmethod
    def parse(cls, body: bytes) -> AddCheckpoint:
        """Parse a request body strictly; every framing error is a `RequestError`."""
        if not isinstance(body, bytes):
            raise RequestError("request body must be bytes")
        if len(body) > MAX_REQUEST_BYTES:
            raise RequestError(f"request body is larger than {MAX_REQUEST_BYTES} bytes")
        head, sep, note = body.partition(b"\n\n")
        if not sep:
            raise RequestError("request has no blank line between the proof and the checkpoint")
        try:
            lines = head.decode("ascii").split("\n")
        except UnicodeDecodeError:
            raise RequestError("the old size and proof lines must be ASCII") from None
        first, proof_lines = lines[0], lines[1:]
        if not first.startswith("old "):
            raise RequestError("the first line must be 'old <size>'")
        old = parse_size(first[4:], "old size")
        if len(proof_lines) > MAX_PROOF_LINES:
            raise RequestError(f"more than {MAX_PROOF_LINES} consistency proof lines")
        proof = []
        for n, line in enumerate(proof_lines, 1):
            try:
                h = b64decode_strict(line, f"consistency proof line {n}")
            except NoteError as exc:
                raise RequestError(str(exc)) from None
            if len(h) != HASH_SIZE:
                raise RequestError(f"consistency proof line {n} is not a {HASH_SIZE}-byte hash")
            proof.append(h)
        try:
            text, _ = split_note(note)
            cp = Checkpoint.from_text(text)
        except NoteError as exc:
            raise RequestError(f"the checkpoint is not a signed checkpoint note: {exc}") from None
        if old > cp.size:
            raise RequestError(f"old size {old} is larger than the checkpoint size {cp.size}")
        return cls(old, tuple(proof), note, cp)


def encode_add_checkpoint(old_size: int, proof: Sequence[bytes], note: bytes) -> bytes:
    """Build an add-checkpoint body (what a log sends)."""
    if isinstance(old_size, bool) or not isinstance(old_size, int) or old_size < 0:
        raise RequestError("old size must be a non-negative integer")
    if len(proof) > MAX_PROOF_LINES:
        raise RequestError(f"more than {MAX_PROOF_LINES} consistency proof lines")
    lines = [f"old {old_size}\n"] + [base64.b64encode(h).decode() + "\n" for h in proof]
    return "".join(lines).encode() + b"\n" + note


@dataclass(frozen=True)
class Cosign:
    """The witness may cosign: `signed` verified under the log's key and extends what it held."""

    signed: SignedCheckpoint


@dataclass(frozen=True)
class Reject:
    """The witness must not cosign; `status` is the spec's HTTP status for the reason."""

    status: RejectStatus
    message: str
    held_size: int | None = None
    """For 409: the size of the checkpoint the witness holds (the answer's body)."""


Decision = Cosign | Reject


def decide(
    request: AddCheckpoint,
    log_keys: Sequence[Verifier] | None,
    held: Checkpoint | None,
) -> Decision:
    """The witness's judgement, in the spec's order of checks.

    ``log_keys`` are the keys trusted for the request's origin (None: unknown
    origin); ``held`` is the latest checkpoint cosigned for it (None: never).
    """
    origin = request.checkpoint.origin
    if not log_keys:
        return Reject(404, f"unknown log origin {origin!r}")
    signed = _open(request.note, log_keys, origin)
    if isinstance(signed, Reject):
        return signed
    new = signed.checkpoint
    held_size = 0 if held is None else held.size
    if request.old_size != held_size:
        return Reject(409, f"old size {request.old_size} is not the size {held_size} this "
                           f"witness holds for {origin!r}", held_size)
    if new.size == 0 and new.root_hash != EMPTY_ROOT:
        return Reject(422, "a checkpoint of size 0 must have the empty tree's root")
    if request.old_size == 0:
        if request.proof:
            return Reject(422, "old size 0 needs an empty consistency proof")
        return Cosign(signed)
    assert held is not None
    if new.size == held.size:
        if request.proof or new.root_hash != held.root_hash:
            return Reject(422, f"checkpoint of size {new.size} differs from the one held "
                               "(same size, different root or a non-empty proof)")
        return Cosign(signed)
    try:
        verify_consistency(held.size, new.size, held.root_hash, new.root_hash,
                           list(request.proof))
    except LedgerError as exc:
        return Reject(422, f"consistency proof from size {held.size} to {new.size} does not "
                           f"verify: {exc}")
    return Cosign(signed)


def _open(note: bytes, log_keys: Sequence[Verifier], origin: str) -> SignedCheckpoint | Reject:
    """The checkpoint verified under the origin's keys, or a 403 saying why not.

    Every signature from a trusted key must verify (a bad one makes the note
    malformed), and at least one must be present; others are ignored.
    """
    try:
        opened = open_note(note, log_keys)
    except NoteError as exc:
        return Reject(403, f"the checkpoint is not validly signed by a key trusted for "
                           f"{origin!r}: {exc}")
    return SignedCheckpoint(Checkpoint.from_text(opened.text), note, opened)
