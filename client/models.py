"""Typed, validated views of the log's JSON API answers (docs/CONTRACTS.md "HTTP API").

Every `from_json` is strict: a missing key, a wrong type, a hash of the wrong
length or a count over its limit raises `ServerError`, because these objects
come off the network and are untrusted until checked.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from attest import HEX64_PATTERN
from client.errors import ServerError
from ledger.tlog import SearchHit as SearchHit
from ledger.tlog import SearchPage as SearchPage

HASH_SIZE = 32
MAX_PROOF_HASHES = 64  # a proof for a tree of 2**63 leaves has at most 63 hashes (+1 slack)
MAX_CHECKPOINT_BYTES = 16 * 1024
MAX_ENTRY_BYTES = 65535
_HEX64 = re.compile(HEX64_PATTERN)


def _need(obj: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in obj:
        raise ServerError(f"log answer for {what} lacks the field {key!r}")
    return obj[key]


def _int(obj: Mapping[str, Any], key: str, what: str, *, minimum: int = 0) -> int:
    value = _need(obj, key, what)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum or value >= 2**63:
        raise ServerError(f"log answer for {what}: {key!r} must be an integer >= {minimum}")
    return value


def _str(obj: Mapping[str, Any], key: str, what: str, *, max_len: int = 4096) -> str:
    value = _need(obj, key, what)
    if not isinstance(value, str) or len(value) > max_len:
        raise ServerError(f"log answer for {what}: {key!r} must be a string of <= {max_len} chars")
    return value


def _hex_hash(obj: Mapping[str, Any], key: str, what: str) -> bytes:
    value = _str(obj, key, what, max_len=64)
    if not _HEX64.fullmatch(value):
        raise ServerError(f"log answer for {what}: {key!r} must be 64 lowercase hex digits")
    return bytes.fromhex(value)


def _b64(value: Any, what: str, *, max_len: int) -> bytes:
    if not isinstance(value, str) or len(value) > (max_len * 4) // 3 + 4:
        raise ServerError(f"log answer for {what}: expected base64 of at most {max_len} bytes")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ServerError(f"log answer for {what}: invalid base64 ({exc})") from exc
    if len(raw) > max_len:
        raise ServerError(f"log answer for {what}: more than {max_len} bytes")
    return raw


def _proof(obj: Mapping[str, Any], key: str, what: str) -> tuple[bytes, ...]:
    value = _need(obj, key, what)
    if not isinstance(value, list) or len(value) > MAX_PROOF_HASHES:
        raise ServerError(f"log answer for {what}: {key!r} must be a list of <= 64 hashes")
    out = []
    for item in value:
        raw = _b64(item, what, max_len=HASH_SIZE)
        if len(raw) != HASH_SIZE:
            raise ServerError(f"log answer for {what}: proof hash is not {HASH_SIZE} bytes")
        out.append(raw)
    return tuple(out)


def _note(obj: Mapping[str, Any], key: str, what: str) -> bytes:
    text = _str(obj, key, what, max_len=MAX_CHECKPOINT_BYTES)
    return text.encode("utf-8")


def _obj(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ServerError(f"log answer for {what} is not a JSON object")
    return value


def _b64s(items: tuple[bytes, ...]) -> list[str]:
    return [base64.b64encode(h).decode() for h in items]


@dataclass(frozen=True)
class LogInfo:
    """`GET /api/v1/log`: the log's identity and limits."""

    origin: str
    verifier_key: str
    tree_size: int
    max_entry_bytes: int
    max_blob_bytes: int
    max_batch: int
    checkpoint: bytes | None
    reproduce: Mapping[str, float] | None = None
    """Decision defaults the log suggests to `ktl reproduce` (tolerance, confidence)."""

    def to_json(self) -> dict[str, Any]:
        out = {
            "origin": self.origin,
            "verifier_key": self.verifier_key,
            "tree_size": self.tree_size,
            "max_entry_bytes": self.max_entry_bytes,
            "max_blob_bytes": self.max_blob_bytes,
            "max_batch": self.max_batch,
            "checkpoint": self.checkpoint.decode("utf-8") if self.checkpoint is not None else None,
        }
        if self.reproduce is not None:
            out["reproduce"] = dict(self.reproduce)
        return out

    @classmethod
    def from_json(cls, value: Any) -> LogInfo:
        obj = _obj(value, "log info")
        w = "log info"
        return cls(
            origin=_str(obj, "origin", w, max_len=512),
            verifier_key=_str(obj, "verifier_key", w, max_len=1024),
            tree_size=_int(obj, "tree_size", w),
            max_entry_bytes=_int(obj, "max_entry_bytes", w, minimum=1),
            max_blob_bytes=_int(obj, "max_blob_bytes", w, minimum=1),
            max_batch=_int(obj, "max_batch", w, minimum=1),
            checkpoint=None if obj.get("checkpoint") is None else _note(obj, "checkpoint", w),
            reproduce=_reproduce_defaults(obj.get("reproduce")),
        )


_REPRODUCE_RANGES = {"tolerance": (0.0, 1.0, True), "confidence": (0.5, 1.0, False)}


def _reproduce_defaults(value: Any) -> dict[str, float] | None:
    """The log's optional `reproduce` object: known keys, numbers in range, nothing else."""
    if value is None:
        return None
    if not isinstance(value, dict) or not set(value) <= set(_REPRODUCE_RANGES):
        raise ServerError("log info: 'reproduce' must be an object with only 'tolerance' and "
                          "'confidence'")
    out: dict[str, float] = {}
    for key, item in value.items():
        lo, hi, closed = _REPRODUCE_RANGES[key]
        ok = isinstance(item, int | float) and not isinstance(item, bool) and lo <= item and (
            item <= hi if closed else item < hi)
        if not ok:
            raise ServerError(f"log info: reproduce.{key} must be a number in [{lo}, {hi}"
                              f"{']' if closed else ')'}, got {item!r}")
        out[key] = float(item)
    return out


@dataclass(frozen=True)
class SubmitResult:
    """`POST /api/v1/entries`: where the entry landed and the (unverified) proof of it."""

    index: int
    leaf_hash: bytes
    tree_size: int
    inclusion_proof: tuple[bytes, ...]
    checkpoint: bytes
    duplicate: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "leaf_hash": self.leaf_hash.hex(),
            "tree_size": self.tree_size,
            "inclusion_proof": _b64s(self.inclusion_proof),
            "checkpoint": self.checkpoint.decode("utf-8"),
            "duplicate": self.duplicate,
        }

    @classmethod
    def from_json(cls, value: Any) -> SubmitResult:
        w = "submitted entry"
        obj = _obj(value, w)
        duplicate = obj.get("duplicate", False)
        if not isinstance(duplicate, bool):
            raise ServerError(f"log answer for {w}: 'duplicate' must be a boolean")
        return cls(
            index=_int(obj, "index", w),
            leaf_hash=_hex_hash(obj, "leaf_hash", w),
            tree_size=_int(obj, "tree_size", w, minimum=1),
            inclusion_proof=_proof(obj, "inclusion_proof", w),
            checkpoint=_note(obj, "checkpoint", w),
            duplicate=duplicate,
        )


@dataclass(frozen=True)
class EntryRecord:
    """`GET /api/v1/entries/<index>`: an entry's canonical bytes with an (unverified) proof."""

    index: int
    leaf_hash: bytes
    entry_bytes: bytes
    tree_size: int
    inclusion_proof: tuple[bytes, ...]
    checkpoint: bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "leaf_hash": self.leaf_hash.hex(),
            "entry_b64": base64.b64encode(self.entry_bytes).decode(),
            "tree_size": self.tree_size,
            "inclusion_proof": _b64s(self.inclusion_proof),
            "checkpoint": self.checkpoint.decode("utf-8"),
        }

    @classmethod
    def from_json(cls, value: Any) -> EntryRecord:
        w = "log entry"
        obj = _obj(value, w)
        return cls(
            index=_int(obj, "index", w),
            leaf_hash=_hex_hash(obj, "leaf_hash", w),
            entry_bytes=_b64(_need(obj, "entry_b64", w), w, max_len=MAX_ENTRY_BYTES),
            tree_size=_int(obj, "tree_size", w, minimum=1),
            inclusion_proof=_proof(obj, "inclusion_proof", w),
            checkpoint=_note(obj, "checkpoint", w),
        )


def parse_proof_answer(value: Any, key: str, what: str) -> tuple[bytes, ...]:
    """The `proof` list of an inclusion or consistency proof answer."""
    return _proof(_obj(value, what), key, what)
