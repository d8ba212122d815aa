"""Turn stored entry bytes into what a page shows (pure; never raises on bad entries).

Entries are attacker-written. The log checked each one on submission, but the
pages must not trust that: every step here tolerates malformed input and
reports it as a problem string instead of raising. The JSON shapes read here
are the predicate bodies fixed in docs/CONTRACTS.md.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attest import HEX64_PATTERN, SHORT_NAMES, AttestError
from attest.entry import decode_entry, verify_entry

KINDS = tuple(SHORT_NAMES)
MAX_DISPLAY_BYTES = 1 << 17
_HEX64 = re.compile(HEX64_PATTERN)


def predicate_kind(predicate_type: str) -> str:
    """Short name of a predicate type (``benchmark``), or ``other``."""
    for kind, uri in SHORT_NAMES.items():
        if predicate_type == uri:
            return kind
    return "other"


def predicate_type_of(kind: str) -> str | None:
    """The predicate type URI of a short kind name, None for an unknown one."""
    return SHORT_NAMES.get(kind)


def is_hex64(value: str) -> bool:
    return bool(_HEX64.fullmatch(value))


@dataclass(frozen=True)
class DecodedEntry:
    """An entry as the pages show it. ``problems`` lists what did not check out."""

    raw_text: str
    entry_pretty: str
    statement: Mapping[str, Any] | None
    statement_pretty: str
    predicate: Mapping[str, Any] | None
    predicate_type: str
    kind: str
    subjects: tuple[tuple[str, str], ...]
    signer_keyids: tuple[str, ...]
    signatures_verified: bool
    problems: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "raw_text": self.raw_text,
            "entry_pretty": self.entry_pretty,
            "statement": self.statement,
            "statement_pretty": self.statement_pretty,
            "predicate": self.predicate,
            "predicate_type": self.predicate_type,
            "kind": self.kind,
            "subjects": [list(s) for s in self.subjects],
            "signer_keyids": list(self.signer_keyids),
            "signatures_verified": self.signatures_verified,
            "problems": list(self.problems),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> DecodedEntry:
        return cls(
            raw_text=str(obj["raw_text"]),
            entry_pretty=str(obj["entry_pretty"]),
            statement=obj["statement"],
            statement_pretty=str(obj["statement_pretty"]),
            predicate=obj["predicate"],
            predicate_type=str(obj["predicate_type"]),
            kind=str(obj["kind"]),
            subjects=tuple((str(a), str(b)) for a, b in obj["subjects"]),
            signer_keyids=tuple(str(k) for k in obj["signer_keyids"]),
            signatures_verified=bool(obj["signatures_verified"]),
            problems=tuple(str(p) for p in obj["problems"]),
        )


def _pretty(obj: object) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False)


def _statement(envelope: object, problems: list[str]) -> Mapping[str, Any] | None:
    """The statement an envelope's payload decodes to, or None with the problem added."""
    statement: Mapping[str, Any] | None = None
    payload = envelope.get("payload") if isinstance(envelope, dict) else None
    if isinstance(payload, str):
        try:
            decoded = json.loads(base64.b64decode(payload, validate=True))
            statement = decoded if isinstance(decoded, dict) else None
        except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
            problems.append(f"envelope payload is not base64 JSON: {exc}")
    else:
        problems.append("entry has no envelope payload")
    if statement is None and not problems:
        problems.append("envelope payload is not a JSON object")
    return statement


def _subjects(statement: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """Up to 64 (name, sha256) pairs of the statement's subjects."""
    subjects: list[tuple[str, str]] = []
    subj = statement.get("subject") if statement is not None else None
    if isinstance(subj, list):
        for s in subj[:64]:
            if isinstance(s, dict):
                digest = s.get("digest")
                sha = digest.get("sha256") if isinstance(digest, dict) else None
                subjects.append((str(s.get("name", "")), str(sha or "")))
    return tuple(subjects)


def _signers(data: bytes, envelope: object,
             problems: list[str]) -> tuple[tuple[str, ...], bool]:
    """The signers' keyids and whether the entry verifies; when it does not, the keyids
    the envelope names (up to 16) and the problem added."""
    try:
        return tuple(verify_entry(decode_entry(data)).signer_keyids), True
    except AttestError as exc:
        problems.append(f"entry does not verify: {exc}")
        sigs = envelope.get("signatures") if isinstance(envelope, dict) else None
        if isinstance(sigs, list):
            return tuple(str(s.get("keyid", "")) for s in sigs[:16] if isinstance(s, dict)), False
        return (), False


def decode_for_display(data: bytes, pretty: bool = False) -> DecodedEntry:
    """Decode canonical entry bytes for display; a malformed entry yields problems, not errors.

    `pretty`: also the indented JSON of the entry and its statement (the entry's own page
    shows them); the listings and verdict readers, which decode up to a few hundred entries
    a view, leave them empty (their re-encoding was most of a view's time)."""
    problems: list[str] = []
    raw = data[:MAX_DISPLAY_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_DISPLAY_BYTES:
        problems.append(f"entry is {len(data)} bytes; only the first {MAX_DISPLAY_BYTES} shown")
    try:
        entry_obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        return DecodedEntry(raw, raw, None, "", None, "", "other", (), (), False,
                            (f"entry is not JSON: {exc}",))
    entry_pretty = _pretty(entry_obj) if pretty else ""
    envelope = entry_obj.get("envelope") if isinstance(entry_obj, dict) else None
    statement = _statement(envelope, problems)
    predicate_type = ""
    predicate: Mapping[str, Any] | None = None
    if statement is not None:
        pt = statement.get("predicateType")
        predicate_type = pt if isinstance(pt, str) else ""
        pred = statement.get("predicate")
        predicate = pred if isinstance(pred, dict) else None
    signer_keyids, verified = _signers(data, envelope, problems)
    return DecodedEntry(
        raw_text=raw,
        entry_pretty=entry_pretty,
        statement=statement,
        statement_pretty=_pretty(statement) if pretty and statement is not None else "",
        predicate=predicate,
        predicate_type=predicate_type,
        kind=predicate_kind(predicate_type),
        subjects=_subjects(statement),
        signer_keyids=signer_keyids,
        signatures_verified=verified,
        problems=tuple(problems),
    )
