"""Which index keys a log entry names: a pure, structural function of the entry's bytes.

docs/vindex.md defines it; this is its one implementation. An entry names:

- ``signer:<keyid>`` for each signature whose ``keyid`` is 64 lowercase hex characters
  and is a key of the entry's ``keys`` object;
- ``type:<predicateType>`` for the statement's predicate type;
- ``name:<kernel name>`` and ``digest:<sha256 hex>`` for each subject.

Parsing is structural and bounded, not attest's full validation: a monitor that
recomputes the index needs only the entry bytes, and a newer predicate version
still lands under its digest. Anything that does not have the expected shape
names nothing (the log's admission check already refused such entries).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from typing import Any

from attest import JSONRejected, strict_loads
from attest.predicates import HEX64_PATTERN

__all__ = ["KEY_KINDS", "MAX_KEY_VALUE", "IndexKey", "entry_key_hashes", "entry_keys", "key_hash"]

KEY_KINDS = ("digest", "name", "signer", "type")
MAX_KEY_VALUE = 256
"""Longest key value (characters); longer values name nothing."""
MAX_ENTRY_BYTES = 65535
_HEX64 = re.compile(HEX64_PATTERN)
_KEY_DOMAIN = b"ktl/vindex/v1 key\x00"


@dataclass(frozen=True, order=True)
class IndexKey:
    """One key of the index: its kind and value; `hash` is its position in the map."""

    kind: str
    value: str

    def __post_init__(self) -> None:
        if self.kind not in KEY_KINDS:
            raise ValueError(f"index key kind must be one of {KEY_KINDS}, not {self.kind!r}")
        if not 0 < len(self.value) <= MAX_KEY_VALUE or "\x00" in self.value:
            raise ValueError(f"index key value must be 1 to {MAX_KEY_VALUE} characters, no NUL")

    @property
    def hash(self) -> bytes:
        """Where the key sits in the map (`key_hash`)."""
        return key_hash(self.kind, self.value)

    def text(self) -> str:
        return f"{self.kind}:{self.value}"

    @classmethod
    def parse(cls, text: str) -> IndexKey:
        """`kind:value`, e.g. `digest:<64 hex>`; ValueError says what is wrong."""
        kind, sep, value = text.partition(":")
        if not sep:
            raise ValueError(f"index key must be kind:value with kind one of {KEY_KINDS}")
        if kind in ("digest", "signer") and not _HEX64.fullmatch(value):
            raise ValueError(f"{kind}: must be 64 lowercase hex characters")
        return cls(kind, value)


def key_hash(kind: str, value: str) -> bytes:
    """SHA-256("ktl/vindex/v1 key" 0x00 kind 0x00 value)."""
    return hashlib.sha256(_KEY_DOMAIN + kind.encode() + b"\x00" + value.encode("utf-8")).digest()


_Named = set[tuple[str, str]]
"""(kind, value) pairs, each already within the limits an IndexKey checks."""


def _text(value: Any) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= MAX_KEY_VALUE and "\x00" not in value:
        return value
    return None


def _signers(envelope: dict[str, Any], keys: Any) -> _Named:
    found: _Named = set()
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not isinstance(keys, dict):
        return found
    for sig in signatures[:16]:
        kid = sig.get("keyid") if isinstance(sig, dict) else None
        if isinstance(kid, str) and _HEX64.fullmatch(kid) and kid in keys:
            found.add(("signer", kid))
    return found


def _statement(envelope: dict[str, Any]) -> dict[str, Any] | None:
    payload = envelope.get("payload")
    if not isinstance(payload, str) or len(payload) > 2 * MAX_ENTRY_BYTES:
        return None
    try:
        raw = base64.b64decode(payload, validate=True)
        statement = strict_loads(raw)
    except (binascii.Error, ValueError, JSONRejected):
        return None
    return statement if isinstance(statement, dict) else None


def _subjects(statement: dict[str, Any]) -> _Named:
    found: _Named = set()
    subjects = statement.get("subject")
    if not isinstance(subjects, list):
        return found
    for subject in subjects[:64]:
        if not isinstance(subject, dict):
            continue
        name = _text(subject.get("name"))
        if name is not None:
            found.add(("name", name))
        digest = subject.get("digest")
        sha = digest.get("sha256") if isinstance(digest, dict) else None
        if isinstance(sha, str) and _HEX64.fullmatch(sha):
            found.add(("digest", sha))
    return found


def _named(entry: bytes) -> _Named:
    if len(entry) > MAX_ENTRY_BYTES:
        return set()
    try:
        obj = strict_loads(entry)
    except JSONRejected:
        return set()
    if not isinstance(obj, dict) or not isinstance(obj.get("envelope"), dict):
        return set()
    envelope = obj["envelope"]
    found = _signers(envelope, obj.get("keys"))
    statement = _statement(envelope)
    if statement is not None:
        ptype = _text(statement.get("predicateType"))
        if ptype is not None:
            found.add(("type", ptype))
        found |= _subjects(statement)
    return found


def entry_keys(entry: bytes) -> frozenset[IndexKey]:
    """The index keys `entry` (a log entry's bytes) names; empty if it has no such shape."""
    return frozenset(IndexKey(kind, value) for kind, value in _named(entry))


def entry_key_hashes(entry: bytes) -> list[bytes]:
    """The hashes of the keys `entry` names, as `entry_keys` finds them (what the map
    needs, without building the keys)."""
    return [key_hash(kind, value) for kind, value in _named(entry)]
