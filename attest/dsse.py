"""DSSE envelopes (Dead Simple Signing Envelope, v1) signed with Ed25519.

The signed bytes are `pae(payload_type, payload)` and nothing else: this module is
the only place that builds them. Envelopes may carry several signatures;
`verify_envelope` counts distinct keys whose signature verifies and requires a
threshold. JSON form: `{"payload": b64, "payloadType": str, "signatures":
[{"keyid": str, "sig": b64}]}` with standard, padded base64.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from attest._errors import AttestError, EnvelopeError, SignatureError
from attest.keys import keyid as _keyid
from attest.keys import raw_public_key

MAX_SIGNATURES = 16
MAX_PAYLOAD_BYTES = 1 << 20
MAX_PAYLOAD_TYPE_CHARS = 256
MAX_KEYID_CHARS = 256
MAX_SIG_BYTES = 1024
_FIELDS = frozenset({"payload", "payloadType", "signatures"})
_SIG_FIELDS = frozenset({"keyid", "sig"})


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding: "DSSEv1" SP len(type) SP type SP len(body) SP body."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(type_bytes), type_bytes, len(payload), payload)


@dataclass(frozen=True)
class Signature:
    """One DSSE signature: the signer's keyid (a hint) and the raw signature bytes."""

    keyid: str
    sig: bytes

    def to_json(self) -> dict[str, str]:
        return {"keyid": self.keyid, "sig": _b64(self.sig)}

    @classmethod
    def from_json(cls, obj: object, path: str = "signature") -> Signature:
        if not isinstance(obj, dict):
            raise EnvelopeError(f"{path}: must be an object with keyid and sig")
        _exact_fields(obj, _SIG_FIELDS, path)
        keyid = obj["keyid"]
        if not isinstance(keyid, str) or len(keyid) > MAX_KEYID_CHARS:
            raise EnvelopeError(f"{path}.keyid: must be a string of at most {MAX_KEYID_CHARS} characters")
        sig = _unb64(obj["sig"], f"{path}.sig", MAX_SIG_BYTES)
        if not sig:
            raise EnvelopeError(f"{path}.sig: must not be empty")
        return cls(keyid=keyid, sig=sig)


@dataclass(frozen=True)
class Envelope:
    """A DSSE envelope: payload bytes, their type, and signatures over `pae(...)`."""

    payload: bytes
    payload_type: str
    signatures: tuple[Signature, ...]

    def pae(self) -> bytes:
        return pae(self.payload_type, self.payload)

    def to_json(self) -> dict[str, Any]:
        return {
            "payload": _b64(self.payload),
            "payloadType": self.payload_type,
            "signatures": [s.to_json() for s in self.signatures],
        }

    @classmethod
    def from_json(cls, obj: object, path: str = "envelope") -> Envelope:
        """Parse strictly: exact fields, canonical base64, 1..16 signatures, size caps."""
        if not isinstance(obj, dict):
            raise EnvelopeError(f"{path}: must be an object with payload, payloadType and signatures")
        _exact_fields(obj, _FIELDS, path)
        payload = _unb64(obj["payload"], f"{path}.payload", MAX_PAYLOAD_BYTES)
        payload_type = obj["payloadType"]
        if not isinstance(payload_type, str) or not 0 < len(payload_type) <= MAX_PAYLOAD_TYPE_CHARS:
            raise EnvelopeError(
                f"{path}.payloadType: must be a non-empty string of at most "
                f"{MAX_PAYLOAD_TYPE_CHARS} characters"
            )
        sigs = obj["signatures"]
        if not isinstance(sigs, list) or not 1 <= len(sigs) <= MAX_SIGNATURES:
            raise EnvelopeError(f"{path}.signatures: must be an array of 1 to {MAX_SIGNATURES} signatures")
        signatures = tuple(
            Signature.from_json(s, f"{path}.signatures[{i}]") for i, s in enumerate(sigs)
        )
        return cls(payload=payload, payload_type=payload_type, signatures=signatures)


def sign_envelope(payload: bytes, payload_type: str,
                  private_keys: Sequence[Ed25519PrivateKey]) -> Envelope:
    """Sign `pae(payload_type, payload)` once with each distinct key (keyid = SHA-256 of key)."""
    if not isinstance(payload, bytes | bytearray):
        raise EnvelopeError("payload must be bytes")
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise EnvelopeError(f"payload is {len(payload)} bytes; the limit is {MAX_PAYLOAD_BYTES}")
    if not payload_type or len(payload_type) > MAX_PAYLOAD_TYPE_CHARS:
        raise EnvelopeError(f"payload type must be 1 to {MAX_PAYLOAD_TYPE_CHARS} characters")
    if not private_keys:
        raise EnvelopeError("need at least one private key to sign")
    if len(private_keys) > MAX_SIGNATURES:
        raise EnvelopeError(f"at most {MAX_SIGNATURES} signatures per envelope")
    message = pae(payload_type, bytes(payload))
    signatures: list[Signature] = []
    seen: set[str] = set()
    for key in private_keys:
        if not isinstance(key, Ed25519PrivateKey):
            raise EnvelopeError("only Ed25519 private keys can sign")
        kid = _keyid(key.public_key())
        if kid in seen:
            continue
        seen.add(kid)
        signatures.append(Signature(keyid=kid, sig=key.sign(message)))
    return Envelope(payload=bytes(payload), payload_type=payload_type, signatures=tuple(signatures))


def verify_envelope(env: Envelope, public_keys: Mapping[str, Ed25519PublicKey],
                    threshold: int = 1) -> list[str]:
    """Verify `env` against trusted keys; return the sorted keyids whose signature verified.

    A signature counts when its keyid names a key in `public_keys` and verifies over
    the PAE; signatures by unknown keys are ignored, and each distinct public key
    counts once. Raises SignatureError when fewer than `threshold` keys verified.
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise AttestError("threshold must be an integer >= 1")
    distinct_keys = {raw_public_key(k) for k in public_keys.values()}
    if threshold > len(distinct_keys):
        raise AttestError(
            f"threshold {threshold} cannot be met by {len(distinct_keys)} distinct trusted key(s)"
        )
    message = env.pae()
    verified: dict[bytes, str] = {}
    problems: list[str] = []
    for i, signature in enumerate(env.signatures):
        key = public_keys.get(signature.keyid)
        if key is None:
            problems.append(f"signatures[{i}]: keyid {signature.keyid[:16]!r} is not a trusted key")
            continue
        raw = raw_public_key(key)
        if raw in verified:
            continue
        try:
            key.verify(signature.sig, message)
        except InvalidSignature:
            problems.append(f"signatures[{i}]: invalid signature for keyid {signature.keyid[:16]}")
            continue
        verified[raw] = signature.keyid
    if len(verified) < threshold:
        detail = "; ".join(problems) if problems else "no signatures"
        raise SignatureError(
            f"{len(verified)} of the required {threshold} trusted signature(s) verified ({detail})"
        )
    return sorted(verified.values())


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(value: object, path: str, max_bytes: int) -> bytes:
    """Strict standard base64 with padding; rejects anything that does not re-encode identically."""
    if not isinstance(value, str):
        raise EnvelopeError(f"{path}: must be a base64 string")
    # Padded base64 decodes to exactly 3 bytes per 4 characters less its padding: check
    # the decoded length before decoding anything.
    padding = 2 if value.endswith("==") else 1 if value.endswith("=") else 0
    if len(value) // 4 * 3 - padding > max_bytes:
        raise EnvelopeError(f"{path}: decodes to more than {max_bytes} bytes")
    try:
        data = base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise EnvelopeError(f"{path}: not valid standard base64") from None
    if _b64(data) != value:
        raise EnvelopeError(f"{path}: not canonical standard base64 (padding or trailing bits)")
    return data


def _exact_fields(obj: dict[str, Any], fields: frozenset[str], path: str) -> None:
    missing = sorted(fields - obj.keys())
    if missing:
        raise EnvelopeError(f"{path}.{missing[0]}: required field is missing")
    extra = sorted(str(k) for k in obj.keys() - fields)
    if extra:
        raise EnvelopeError(f"{path}.{extra[0]}: unknown field (allowed: {', '.join(sorted(fields))})")
