"""The log entry: RFC 8785 canonical JSON of `{"envelope": <DSSE>, "keys": {keyid: b64 key}}`.

An entry carries the public keys its signatures need, so it verifies on its own.
Its canonical bytes are what the log hashes into a leaf; they are at most
MAX_ENTRY_BYTES (65,535, one tlog-tiles entry bundle record), so large data (raw
samples, sources) travels as content-addressed blobs referenced by sha256.

`decode_entry` raises EntryError (EntryTooLargeError above the size cap);
`verify_entry` raises EntryError (keys do not match the signatures),
SignatureError (a signature does not verify) or ValidationError (the statement
or predicate is malformed). All are AttestError.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from attest._canonical import canonical_json
from attest._errors import (
    EntryError,
    EntryKeysError,
    EntryTooLargeError,
    EnvelopeError,
    KeyFileError,
    NonCanonicalEntryError,
    SignatureError,
)
from attest._json import JSONRejected, strict_loads
from attest.dsse import Envelope, sign_envelope
from attest.keys import keyid, public_key_b64, public_key_from_b64
from attest.predicates import HEX64_PATTERN
from attest.statement import PAYLOAD_TYPE, Statement, parse_statement_payload, statement_payload

MAX_ENTRY_BYTES = 65535
MAX_KEYS = 16
_KEYID = re.compile(HEX64_PATTERN)
#: The canonical base64 of 32 bytes (what `ledger/openapi.json` states for a public key).
PUBLIC_KEY_B64_PATTERN = r"^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$"
_PUBLIC_B64 = re.compile(PUBLIC_KEY_B64_PATTERN)


@dataclass(frozen=True)
class LogEntry:
    """A DSSE envelope plus the public keys (keyid -> base64 raw key) its signatures use."""

    envelope: Envelope
    keys: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"envelope": self.envelope.to_json(), "keys": dict(self.keys)}

    @classmethod
    def from_json(cls, obj: object) -> LogEntry:
        """Parse the JSON form strictly (shape only; `verify_entry` checks keys and signatures)."""
        if not isinstance(obj, dict):
            raise EntryError("log entry must be a JSON object with 'envelope' and 'keys'")
        for field in ("envelope", "keys"):
            if field not in obj:
                raise EntryError(f"{field}: required field is missing")
        extra = sorted(str(k) for k in obj if k not in ("envelope", "keys"))
        if extra:
            raise EntryError(f"{extra[0]}: unknown field (a log entry has only envelope and keys)")
        try:
            envelope = Envelope.from_json(obj["envelope"])
        except EnvelopeError as exc:
            raise EntryError(str(exc)) from None
        keys = obj["keys"]
        if not isinstance(keys, dict) or not 1 <= len(keys) <= MAX_KEYS:
            raise EntryError(f"keys: must be an object of 1 to {MAX_KEYS} keyid -> base64 public key")
        for kid, value in keys.items():
            if not _KEYID.fullmatch(kid):
                raise EntryError(f"keys[{kid[:70]!r}]: keyid must be 64 lowercase hex characters")
            if not isinstance(value, str) or not _PUBLIC_B64.fullmatch(value):
                raise EntryError(f"keys[{kid!r}]: public key must be the canonical base64 of "
                                 "32 raw bytes (Ed25519)")
        for i, signature in enumerate(envelope.signatures):
            # DSSE lets a keyid be any hint; a log entry's names a key in `keys`, so it has
            # that key's shape (what `ledger/openapi.json` states), or the entry is malformed.
            if not _KEYID.fullmatch(signature.keyid):
                raise EntryError(f"envelope.signatures[{i}].keyid: must be 64 lowercase hex "
                                 "characters (the SHA-256 of a key in keys)")
        return cls(envelope=envelope, keys=dict(keys))


@dataclass(frozen=True)
class VerifiedEntry:
    """The statement of an entry whose every signature verified, and who signed it."""

    statement: Statement
    signer_keyids: tuple[str, ...]


def encode_entry(entry: LogEntry) -> bytes:
    """The entry's RFC 8785 canonical bytes; EntryTooLargeError above MAX_ENTRY_BYTES."""
    data = canonical_json(entry.to_json())
    if len(data) > MAX_ENTRY_BYTES:
        raise EntryTooLargeError(len(data), MAX_ENTRY_BYTES)
    return data


def decode_entry(data: bytes) -> LogEntry:
    """Parse entry bytes: size cap first, then strict JSON that must already be canonical."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise EntryError("log entry must be bytes")
    data = bytes(data)
    if len(data) > MAX_ENTRY_BYTES:
        raise EntryTooLargeError(len(data), MAX_ENTRY_BYTES)
    obj = _canonical_or_none(data)
    if obj is None:
        obj = _strictly_canonical(data)
    return LogEntry.from_json(obj)


_REJECTED = (UnicodeError, ValueError, TypeError, RecursionError)  # rfc8785's are ValueErrors


def _canonical_or_none(data: bytes) -> Any:
    """What canonical bytes decode to, or None for any other bytes.

    Parsed with the plain (C) decoder: bytes that equal the canonical encoding of what
    they parse to hold no duplicate key (that encoding has one member per key) and no
    NaN or Infinity (they have none), so the strict decoder would find nothing more.
    """
    try:
        obj = json.loads(data.decode("utf-8"))
        return obj if canonical_json(obj) == data else None
    except _REJECTED:
        return None


def _strictly_canonical(data: bytes) -> Any:
    """Decode strictly and compare with the canonical form, naming what is wrong."""
    try:
        obj = strict_loads(data)
    except JSONRejected as exc:
        raise EntryError(f"log entry {exc}") from None
    try:
        canonical = rfc8785.dumps(obj)
    except ValueError as exc:  # CanonicalizationError; UnicodeEncodeError for a lone surrogate key
        raise NonCanonicalEntryError(
            f"log entry cannot be canonicalized (RFC 8785): {exc}") from None
    if canonical != data:
        raise NonCanonicalEntryError(
            "log entry is not RFC 8785 canonical JSON (sorted keys, no whitespace, "
            "canonical numbers and escapes); re-encode it with encode_entry"
        )
    return obj


def verify_entry(entry: LogEntry) -> VerifiedEntry:
    """Check that every signature verifies with its own key and the statement is valid."""
    env = entry.envelope
    if env.payload_type != PAYLOAD_TYPE:
        raise EntryError(f"envelope.payloadType: must be {PAYLOAD_TYPE!r}, got {env.payload_type!r}"[:300])
    if not env.signatures:
        raise EntryError("envelope.signatures: at least one signature is required")
    public_keys = {}
    for kid, b64 in entry.keys.items():
        try:
            public_key = public_key_from_b64(b64)
        except KeyFileError as exc:
            raise EntryKeysError(f"keys[{kid!r}]: {exc}") from None
        if keyid(public_key) != kid:
            raise EntryKeysError(f"keys[{kid!r}]: keyid is not the SHA-256 of this public key")
        public_keys[kid] = public_key
    used: set[str] = set()
    for i, signature in enumerate(env.signatures):
        if signature.keyid not in public_keys:
            raise EntryKeysError(f"envelope.signatures[{i}].keyid: no key with this keyid in keys")
        if signature.keyid in used:
            raise EntryKeysError(f"envelope.signatures[{i}].keyid: the same key signs twice")
        used.add(signature.keyid)
    unused = sorted(public_keys.keys() - used)
    if unused:
        raise EntryKeysError(f"keys[{unused[0]!r}]: no signature uses this key; remove it")
    message = env.pae()
    for i, signature in enumerate(env.signatures):
        try:
            public_keys[signature.keyid].verify(signature.sig, message)
        except InvalidSignature:
            raise SignatureError(
                f"envelope.signatures[{i}]: signature does not verify with key {signature.keyid}"
            ) from None
    statement = parse_statement_payload(env.payload)
    return VerifiedEntry(statement=statement, signer_keyids=tuple(sorted(used)))


def make_entry(statement: Statement, private_keys: Sequence[Ed25519PrivateKey]) -> LogEntry:
    """Validate, canonicalize and sign a statement; the entry must fit in MAX_ENTRY_BYTES."""
    payload = statement_payload(statement)
    envelope = sign_envelope(payload, PAYLOAD_TYPE, private_keys)
    keys = {keyid(k.public_key()): public_key_b64(k.public_key()) for k in private_keys}
    entry = LogEntry(envelope=envelope, keys=keys)
    encode_entry(entry)
    return entry
