"""Turn a submitted JSON log entry into a verified `Submission`, or an `ApiError` naming why."""

from __future__ import annotations

from typing import Any

from attest import (
    AttestError,
    EntryKeysError,
    EntryTooLargeError,
    JSONRejected,
    LogEntry,
    NonCanonicalEntryError,
    SignatureError,
    ValidationError,
    canonical_json,
    decode_entry,
    strict_loads,
    verify_entry,
)
from ledger.sequencer import Submission
from ledger.server._errors import ApiError
from ledger.storage import EntryFacts


def parse_json(body: bytes) -> Any:
    """Strict JSON: UTF-8, no duplicate keys, no NaN/Infinity (`attest.strict_loads`)."""
    try:
        return strict_loads(body)
    except JSONRejected as e:
        raise ApiError(400, "malformed_json", f"request body {e}") from None


def canonical_entry_bytes(obj: Any, max_entry_bytes: int) -> bytes:
    """RFC 8785 bytes of a submitted entry object (the bytes the log hashes)."""
    if not isinstance(obj, dict):
        raise ApiError(400, "invalid_entry", "a log entry must be a JSON object with envelope and keys")
    try:
        data = canonical_json(obj)
    except (ValueError, TypeError) as e:  # rfc8785.CanonicalizationError is a ValueError
        raise ApiError(400, "non_canonical", f"log entry cannot be canonicalized (RFC 8785): {e}") from None
    if len(data) > max_entry_bytes:
        raise ApiError(
            413, "entry_too_large",
            f"log entry is {len(data)} canonical bytes; the limit is {max_entry_bytes}: move large "
            "data into a blob referenced by sha256",
        )
    return data


_ENVELOPE_FIELDS = ("payload", "payloadType", "signatures")


def as_log_entry(obj: Any) -> Any:
    """A submission is a log entry ``{"envelope", "keys"}`` or a bare DSSE envelope with
    its keys beside it, ``{"payload", "payloadType", "signatures", "keys"}``; the second
    form becomes the first (the log stores and hashes only log entries)."""
    if not isinstance(obj, dict) or "envelope" in obj or "payloadType" not in obj:
        return obj
    extra = sorted(set(obj) - {*_ENVELOPE_FIELDS, "keys"})
    if extra:
        raise ApiError(400, "invalid_entry",
                       f"a bare DSSE envelope may carry only {', '.join(_ENVELOPE_FIELDS)} and "
                       f"keys; unexpected: {', '.join(extra)}")
    if "keys" not in obj:
        raise ApiError(400, "invalid_entry",
                       "a bare DSSE envelope needs 'keys' beside it ({keyid: base64 public key}) "
                       "so that the entry verifies on its own")
    return {"envelope": {k: obj[k] for k in _ENVELOPE_FIELDS if k in obj}, "keys": obj["keys"]}


def admit(obj: Any, max_entry_bytes: int) -> Submission:
    """Verify one submitted entry (signatures, statement, predicate, size) before it is queued.

    ``obj`` comes from `parse_json` (strict: no duplicate keys, no NaN), so its RFC 8785
    bytes are canonical by construction and the entry is read from ``obj`` directly.
    """
    obj = as_log_entry(obj)
    data = canonical_entry_bytes(obj, max_entry_bytes)
    try:
        entry = LogEntry.from_json(obj)
    except AttestError as e:
        raise _api_error(e) from None
    return _verified(data, entry)


def admit_body(body: bytes, max_entry_bytes: int) -> Submission:
    """Verify a request body holding one entry.

    Clients normally send the canonical bytes (what `attest.entry.encode_entry` gives):
    those are checked as they are. Any other body is parsed strictly and canonicalized
    first, so pretty-printed JSON is accepted and an error names the real problem.
    """
    if len(body) <= max_entry_bytes:
        try:
            entry = decode_entry(body)
        except AttestError:
            pass
        else:
            return _verified(body, entry)
    return admit(parse_json(body), max_entry_bytes)


def admit_bytes(data: bytes) -> Submission:
    """Verify canonical entry bytes."""
    try:
        entry = decode_entry(data)
    except AttestError as e:
        raise _api_error(e) from None
    return _verified(data, entry)


def _verified(data: bytes, entry: LogEntry) -> Submission:
    try:
        verified = verify_entry(entry)
    except AttestError as e:
        raise _api_error(e) from None
    st = verified.statement
    facts = EntryFacts(
        predicate_type=st.predicate_type,
        subjects=tuple((s.name, s.sha256) for s in st.subjects),
        keyids=verified.signer_keyids,
    )
    return Submission(data=data, facts=facts)


def _api_error(err: AttestError) -> ApiError:
    """The API error for an attest rejection (stable codes)."""
    msg = str(err)
    if isinstance(err, EntryTooLargeError):
        return ApiError(413, "entry_too_large", msg)
    if isinstance(err, SignatureError):
        return ApiError(422, "invalid_signature", msg)
    if isinstance(err, EntryKeysError):
        return ApiError(422, "invalid_keys", msg)
    if isinstance(err, ValidationError):
        code = "unknown_predicate" if err.path.endswith("predicateType") else "invalid_statement"
        return ApiError(422, code, msg)
    if isinstance(err, NonCanonicalEntryError):
        return ApiError(400, "non_canonical", msg)
    return ApiError(400, "invalid_entry", msg)
