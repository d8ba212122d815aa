"""C2SP tlog-cosignature/v1: timestamped Ed25519 witness cosignatures on checkpoints.

A cosignature is a note signature of type 0x04 whose bytes are a big-endian
uint64 POSIX timestamp followed by an Ed25519 signature over
``"cosignature/v1\\ntime <timestamp>\\n" || checkpoint text``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.tlog.checkpoint import Checkpoint, CheckpointError, SignedCheckpoint, open_checkpoint
from ledger.tlog.note import (
    KeyIdentity,
    NoteSignature,
    Verifier,
    check_key_name,
    parse_ed25519_key_string,
    parse_private_key_string,
    private_key_string,
    split_note,
    verifier_key_string,
)

COSIGNATURE_TYPE = 0x04
MAX_TIMESTAMP = (1 << 63) - 1
_TS_LEN = 8
_SIG_LEN = 64


class CosignatureError(CheckpointError):
    """A cosignature is malformed, fails to verify, or too few witnesses cosigned."""


def cosigned_message(text: str, timestamp: int) -> bytes:
    """The bytes a v1 cosigner signs for checkpoint ``text`` at ``timestamp``."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise CosignatureError("cosignature timestamp must be an integer")
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise CosignatureError(f"cosignature timestamp {timestamp} is out of range [0, 2^63)")
    return f"cosignature/v1\ntime {timestamp}\n".encode() + text.encode()


def cosignature_timestamp(sig: NoteSignature) -> int:
    """The timestamp carried in a v1 cosignature's bytes."""
    if len(sig.signature) != _TS_LEN + _SIG_LEN:
        raise CosignatureError(f"cosignature from {sig.name} has the wrong length")
    return int.from_bytes(sig.signature[:_TS_LEN], "big")


class CosignatureSigner(KeyIdentity):
    """A witness's Ed25519 v1 cosigner; usable wherever a note Signer is."""

    def __init__(
        self,
        name: str,
        private_key: Ed25519PrivateKey,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(private_key, Ed25519PrivateKey):
            raise CosignatureError("cosigner needs an Ed25519 private key")
        super().__init__(name, private_key.public_key(), COSIGNATURE_TYPE)
        self._key = private_key
        self._clock = clock

    def sign(self, text: bytes) -> bytes:
        """Timestamp || Ed25519 signature; ``text`` must be a checkpoint body."""
        body = text.decode("utf-8")
        Checkpoint.from_text(body)
        ts = int(self._clock())
        msg = cosigned_message(body, ts)
        return ts.to_bytes(_TS_LEN, "big") + self._key.sign(msg)

    def verifier(self) -> CosignatureVerifier:
        return CosignatureVerifier(self._name, Ed25519PublicKey.from_public_bytes(self._public))

    def verifier_key_string(self) -> str:
        return verifier_key_string(self._name, self._public, COSIGNATURE_TYPE)

    def to_key_string(self) -> str:
        """The private key as ``PRIVATE+KEY+<name>+<id>+base64(0x04 || seed)``; keep it secret."""
        return private_key_string(self._name, self._key, COSIGNATURE_TYPE)

    @classmethod
    def from_key_string(
        cls, skey: str, clock: Callable[[], float] = time.time
    ) -> CosignatureSigner:
        """Parse the string `to_key_string` writes (a witness's key file)."""
        name, kid_hex, key = parse_private_key_string(skey, COSIGNATURE_TYPE, "witness key")
        signer = cls(name, key, clock)
        if kid_hex != signer.key_id.hex():
            raise CosignatureError("witness key ID does not match its name and key")
        return signer


class CosignatureVerifier(KeyIdentity):
    """Checks v1 cosignatures from one witness; usable wherever a note Verifier is."""

    def __init__(self, name: str, public_key: Ed25519PublicKey) -> None:
        if not isinstance(public_key, Ed25519PublicKey):
            raise CosignatureError("cosignature verifier needs an Ed25519 public key")
        super().__init__(name, public_key, COSIGNATURE_TYPE)
        self._key = public_key

    def verify(self, text: bytes, signature: bytes) -> bool:
        if len(signature) != _TS_LEN + _SIG_LEN:
            return False
        ts = int.from_bytes(signature[:_TS_LEN], "big")
        if ts > MAX_TIMESTAMP:
            return False
        try:
            msg = cosigned_message(text.decode("utf-8"), ts)
            self._key.verify(signature[_TS_LEN:], msg)
        except (InvalidSignature, UnicodeDecodeError):
            return False
        return True

    def key_string(self) -> str:
        return verifier_key_string(self._name, self._public, COSIGNATURE_TYPE)

    @classmethod
    def from_key_string(cls, vkey: str) -> CosignatureVerifier:
        """Parse a witness vkey ``<name>+<hex id>+<base64(0x04 || public key)>``."""
        return cls(*parse_ed25519_key_string(vkey, COSIGNATURE_TYPE, "witness key"))


@dataclass(frozen=True)
class Cosignature:
    """A verified cosignature: who cosigned and when (POSIX seconds)."""

    name: str
    key_id: bytes
    timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "key_id": self.key_id.hex(), "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj: object) -> Cosignature:
        if not isinstance(obj, dict) or set(obj) != {"name", "key_id", "timestamp"}:
            raise CosignatureError("cosignature JSON needs exactly name, key_id, timestamp")
        kid, ts = obj["key_id"], obj["timestamp"]
        if not isinstance(kid, str) or len(kid) != 8:
            raise CosignatureError("cosignature JSON key_id must be 8 hex digits")
        try:
            key = bytes.fromhex(kid)
        except ValueError:
            raise CosignatureError("cosignature JSON key_id must be 8 hex digits") from None
        if isinstance(ts, bool) or not isinstance(ts, int) or not 0 <= ts <= MAX_TIMESTAMP:
            raise CosignatureError("cosignature JSON timestamp must be an integer in [0, 2^63)")
        return cls(check_key_name(obj["name"]), key, ts)


def cosign_checkpoint(data: bytes, log_verifier: Verifier, signer: CosignatureSigner) -> bytes:
    """Verify the log's signature on ``data``, then append ``signer``'s cosignature line."""
    open_checkpoint(data, log_verifier)
    text, sigs = split_note(data)
    if any(s.name == signer.name and s.key_id == signer.key_id for s in sigs):
        raise CosignatureError(f"checkpoint already carries a cosignature from {signer.name}")
    line = NoteSignature(signer.name, signer.key_id, signer.sign(text.encode())).line()
    return data + line.encode()


def verify_cosignatures(
    data: bytes,
    log_verifier: Verifier,
    witnesses: Sequence[CosignatureVerifier],
    threshold: int = 1,
    origin: str | None = None,
) -> tuple[SignedCheckpoint, list[Cosignature]]:
    """Open a cosigned checkpoint and require ``threshold`` valid witness cosignatures.

    Cosignatures from known witnesses must all verify; unknown ones are ignored.
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise CosignatureError("threshold must be a non-negative integer")
    if threshold > len(witnesses):
        raise CosignatureError(
            f"threshold {threshold} is more than the {len(witnesses)} witnesses configured"
        )
    signed = open_checkpoint(data, log_verifier, origin, others=witnesses)
    known = {(w.name, w.key_id): w.public_key_bytes for w in witnesses}
    cosigs: list[Cosignature] = []
    keys_seen: set[bytes] = set()
    for s in signed.note.verified_signatures:
        public = known.get((s.name, s.key_id))
        # One public key counts once, whatever names it is configured under: a
        # cosignature does not sign its key's name, so a copy renamed would verify.
        if public is not None and public not in keys_seen:
            keys_seen.add(public)
            cosigs.append(Cosignature(s.name, s.key_id, cosignature_timestamp(s)))
    if len(cosigs) < threshold:
        raise CosignatureError(
            f"checkpoint has {len(cosigs)} valid witness cosignatures; {threshold} required"
        )
    return signed, cosigs
