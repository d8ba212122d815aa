"""C2SP signed-note with Ed25519 signatures: keys, signing, and strict opening.

A note is text ending in a newline, a blank line, then one or more signature
lines ``— <name> base64(key ID || signature)``. Opening a note checks every
signature from a known (name, key ID) and ignores the others; at least one
known signature must verify. Everything is bounded: note size, text lines and
the number of signatures.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from attest import KeyFileError
from attest.keys import public_key_from_raw
from ledger.tlog._errors import LedgerError

ED25519_TYPE = 0x01
#: Largest signed note accepted (bytes). C2SP asks for at least 16 signatures of up to ~5 kB.
MAX_NOTE_BYTES = 256 * 1024
#: Most signature lines accepted in one note.
MAX_SIGNATURES = 64
#: Most lines in the note text.
MAX_TEXT_LINES = 1024
#: Longest key name accepted.
MAX_NAME_LENGTH = 256

_DASH = "\u2014 "
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
_HEX8 = re.compile(r"[0-9a-f]{8}")


class NoteError(LedgerError):
    """A note, key or signature is malformed, or the note is not signed by a trusted key."""


class Signer(Protocol):
    """Anything that can add a note signature line (Ed25519 notes, cosigners)."""

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> bytes: ...

    def sign(self, text: bytes) -> bytes: ...


class Verifier(Protocol):
    """Anything that can check a note signature from one (name, key ID)."""

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> bytes: ...

    def verify(self, text: bytes, signature: bytes) -> bool: ...


def check_key_name(name: object) -> str:
    """Return ``name`` if it is a valid key name (non-empty, no spaces, no '+'), else raise."""
    if not isinstance(name, str) or not name:
        raise NoteError("key name must be a non-empty string")
    if len(name) > MAX_NAME_LENGTH:
        raise NoteError(f"key name is longer than {MAX_NAME_LENGTH} characters")
    if "+" in name or any(c.isspace() for c in name) or _CONTROL.search(name):
        raise NoteError(f"key name {name!r} must not contain spaces, '+' or control characters")
    return name


def key_id(name: str, public_key_bytes: bytes, sig_type: int = ED25519_TYPE) -> bytes:
    """The 4-byte key ID: SHA-256(name || 0x0A || type || public key)[:4]."""
    check_key_name(name)
    data = name.encode() + b"\n" + bytes([sig_type]) + public_key_bytes
    return hashlib.sha256(data).digest()[:4]


def verifier_key_string(
    name: str, public_key_bytes: bytes, sig_type: int = ED25519_TYPE
) -> str:
    """The vkey ``<name>+<hex key ID>+<base64(type || public key)>``."""
    kid = key_id(name, public_key_bytes, sig_type)
    material = base64.b64encode(bytes([sig_type]) + public_key_bytes).decode()
    return f"{name}+{kid.hex()}+{material}"


def b64decode_strict(text: str, what: str) -> bytes:
    """Standard base64 with padding, canonical form only."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise NoteError(f"{what} is not valid base64") from None
    if base64.b64encode(raw).decode() != text:
        raise NoteError(f"{what} is not canonical base64")
    return raw


def _public_bytes(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def _split_key(body: str, sig_type: int, what: str) -> tuple[str, str, bytes]:
    """Split ``<name>+<hex id>+<base64(type || 32-byte key)>`` into its parts."""
    if not isinstance(body, str) or len(body) > 4 * MAX_NAME_LENGTH:
        raise NoteError(f"{what} must be a string of reasonable length")
    parts = body.split("+", 2)
    if len(parts) != 3:
        raise NoteError(f"{what} must look like <name>+<hex key id>+<base64 key>")
    name, kid_hex, material_b64 = parts
    check_key_name(name)
    if not _HEX8.fullmatch(kid_hex):
        raise NoteError(f"{what} key ID must be 8 lowercase hex digits")
    material = b64decode_strict(material_b64, f"{what} key")
    if len(material) != 33 or material[0] != sig_type:
        raise NoteError(f"{what} must hold a type-{sig_type:#04x} 32-byte key")
    return name, kid_hex, material[1:]


def parse_key_string(vkey: str, sig_type: int, what: str = "verifier key") -> tuple[str, bytes]:
    """Parse a vkey ``<name>+<hex id>+<base64(type || key)>``; return (name, public key)."""
    name, kid_hex, public = _split_key(vkey, sig_type, what)
    if key_id(name, public, sig_type).hex() != kid_hex:
        raise NoteError(f"{what} key ID {kid_hex} does not match its name and key")
    return name, public


def parse_ed25519_key_string(
    vkey: str, sig_type: int, what: str = "verifier key"
) -> tuple[str, Ed25519PublicKey]:
    """`parse_key_string`, then the key bytes as an Ed25519 public key."""
    name, public = parse_key_string(vkey, sig_type, what)
    try:
        return name, public_key_from_raw(public)
    except KeyFileError as exc:
        raise NoteError(f"{what} is not a usable Ed25519 public key: {exc}") from None


def parse_private_key_string(
    skey: str, sig_type: int, what: str = "signer key"
) -> tuple[str, str, Ed25519PrivateKey]:
    """Split ``PRIVATE+KEY+<name>+<hex id>+<base64(type || seed)>``: (name, hex id, key).

    The caller checks the key ID against the key it builds (it knows the signature type).
    """
    prefix = "PRIVATE+KEY+"
    if not isinstance(skey, str) or not skey.startswith(prefix):
        raise NoteError(f"{what} must start with PRIVATE+KEY+")
    name, kid_hex, seed = _split_key(skey[len(prefix) :], sig_type, what)
    return name, kid_hex, Ed25519PrivateKey.from_private_bytes(seed)


def private_key_string(name: str, key: Ed25519PrivateKey, sig_type: int) -> str:
    """``PRIVATE+KEY+<name>+<hex id>+<base64(type || seed)>`` (Go x/mod format); keep it secret."""
    seed = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    kid = key_id(name, _public_bytes(key.public_key()), sig_type)
    material = base64.b64encode(bytes([sig_type]) + seed).decode()
    return f"PRIVATE+KEY+{name}+{kid.hex()}+{material}"


class KeyIdentity:
    """Name, public key bytes and key ID of a signer or verifier of one signature type.

    Shared by the note and cosignature signers and verifiers, so that the key ID is
    derived in exactly one way for all of them.
    """

    def __init__(self, name: str, public_key: Ed25519PublicKey, sig_type: int) -> None:
        self._name = check_key_name(name)
        self._public = _public_bytes(public_key)
        try:
            public_key_from_raw(self._public)  # strict: canonical, not of small order
        except KeyFileError as exc:
            raise NoteError(f"key {self._name!r} is not a usable Ed25519 public key: {exc}"
                            ) from None
        self._key_id = key_id(self._name, self._public, sig_type)

    @property
    def name(self) -> str:
        return self._name

    @property
    def key_id(self) -> bytes:
        return self._key_id

    @property
    def public_key_bytes(self) -> bytes:
        return self._public


class NoteSigner(KeyIdentity):
    """An Ed25519 note signer (signature type 0x01)."""

    def __init__(self, name: str, private_key: Ed25519PrivateKey) -> None:
        if not isinstance(private_key, Ed25519PrivateKey):
            raise NoteError("note signer needs an Ed25519 private key")
        super().__init__(name, private_key.public_key(), ED25519_TYPE)
        self._key = private_key

    def sign(self, text: bytes) -> bytes:
        return self._key.sign(text)

    def verifier(self) -> NoteVerifier:
        return NoteVerifier(self._name, Ed25519PublicKey.from_public_bytes(self._public))

    def verifier_key_string(self) -> str:
        return verifier_key_string(self._name, self._public)

    @classmethod
    def from_key_string(cls, skey: str) -> NoteSigner:
        """Parse ``PRIVATE+KEY+<name>+<hex id>+<base64(0x01 || seed)>`` (Go x/mod format)."""
        name, kid_hex, key = parse_private_key_string(skey, ED25519_TYPE, "signer key")
        signer = cls(name, key)
        if kid_hex != signer.key_id.hex():
            raise NoteError("signer key ID does not match its name and key")
        return signer

    def to_key_string(self) -> str:
        """The private key as ``PRIVATE+KEY+...``; keep it secret."""
        return private_key_string(self._name, self._key, ED25519_TYPE)


class NoteVerifier(KeyIdentity):
    """An Ed25519 note verifier (signature type 0x01)."""

    def __init__(self, name: str, public_key: Ed25519PublicKey) -> None:
        if not isinstance(public_key, Ed25519PublicKey):
            raise NoteError("note verifier needs an Ed25519 public key")
        super().__init__(name, public_key, ED25519_TYPE)
        self._key = public_key

    def verify(self, text: bytes, signature: bytes) -> bool:
        if len(signature) != 64:
            return False
        try:
            self._key.verify(signature, text)
        except InvalidSignature:
            return False
        return True

    def key_string(self) -> str:
        return verifier_key_string(self._name, self._public)

    @classmethod
    def from_key_string(cls, vkey: str) -> NoteVerifier:
        return cls(*parse_ed25519_key_string(vkey, ED25519_TYPE))


@dataclass(frozen=True)
class NoteSignature:
    """One signature line: key name, 4-byte key ID, and the signature bytes after the ID."""

    name: str
    key_id: bytes
    signature: bytes

    def line(self) -> str:
        blob = base64.b64encode(self.key_id + self.signature).decode()
        return f"{_DASH}{self.name} {blob}\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "key_id": self.key_id.hex(),
            "signature": base64.b64encode(self.signature).decode(),
        }

    @classmethod
    def from_json(cls, obj: object) -> NoteSignature:
        if not isinstance(obj, dict) or set(obj) != {"name", "key_id", "signature"}:
            raise NoteError("signature JSON needs exactly name, key_id, signature")
        name, kid, sig = obj["name"], obj["key_id"], obj["signature"]
        if not isinstance(kid, str) or not _HEX8.fullmatch(kid) or not isinstance(sig, str):
            raise NoteError("signature JSON key_id must be 8 hex digits, signature base64")
        return cls(check_key_name(name), bytes.fromhex(kid), b64decode_strict(sig, "signature"))


@dataclass(frozen=True)
class Note:
    """An opened note: its text and which signatures were verified or merely carried."""

    text: str
    verified_signatures: tuple[NoteSignature, ...]
    unverified_signatures: tuple[NoteSignature, ...]


def check_text(text: object) -> str:
    """Return ``text`` if it can be a note text, else raise NoteError."""
    if not isinstance(text, str):
        raise NoteError("note text must be a string")
    if not text.endswith("\n"):
        raise NoteError("note text must end with a newline")
    if _CONTROL.search(text):
        raise NoteError("note text must not contain control characters other than newline")
    if text.count("\n") > MAX_TEXT_LINES:
        raise NoteError(f"note text has more than {MAX_TEXT_LINES} lines")
    if len(text.encode()) > MAX_NOTE_BYTES:
        raise NoteError(f"note text is larger than {MAX_NOTE_BYTES} bytes")
    return text


def sign_note(text: str, signers: Sequence[Signer]) -> bytes:
    """Sign ``text`` with every signer; return the full signed note bytes."""
    check_text(text)
    if not signers:
        raise NoteError("a note needs at least one signer")
    msg = text.encode()
    seen: set[tuple[str, bytes]] = set()
    lines = []
    for s in signers:
        ident = (check_key_name(s.name), s.key_id)
        if ident in seen:
            raise NoteError(f"signer {s.name}+{s.key_id.hex()} given twice")
        seen.add(ident)
        lines.append(NoteSignature(s.name, s.key_id, s.sign(msg)).line())
    return (text + "\n" + "".join(lines)).encode()


def split_note(data: bytes) -> tuple[str, list[NoteSignature]]:
    """Parse a signed note into its text and signature lines (no verification)."""
    if not isinstance(data, bytes):
        raise NoteError("signed note must be bytes")
    if len(data) > MAX_NOTE_BYTES:
        raise NoteError(f"signed note is larger than {MAX_NOTE_BYTES} bytes")
    try:
        s = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NoteError("signed note is not valid UTF-8") from None
    if _CONTROL.search(s):
        raise NoteError("signed note contains control characters other than newline")
    if not s.endswith("\n"):
        raise NoteError("signed note must end with a newline")
    split = s.rfind("\n\n")
    if split < 0:
        raise NoteError("signed note has no blank line between text and signatures")
    text, block = s[: split + 1], s[split + 2 :]
    check_text(text)
    lines = block[:-1].split("\n") if block else []
    if not lines:
        raise NoteError("signed note has no signature lines")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"signed note has more than {MAX_SIGNATURES} signatures")
    sigs: list[NoteSignature] = []
    seen: set[tuple[str, bytes]] = set()
    for n, line in enumerate(lines, 1):
        if not line.startswith(_DASH):
            raise NoteError(f"signature line {n} must start with an em dash and a space")
        name, sep, blob = line[len(_DASH) :].partition(" ")
        if not sep:
            raise NoteError(f"signature line {n} must be '— <name> <base64>'")
        check_key_name(name)
        raw = b64decode_strict(blob, f"signature line {n}")
        if len(raw) < 5:
            raise NoteError(f"signature line {n} is too short")
        sig = NoteSignature(name, raw[:4], raw[4:])
        if (name, sig.key_id) in seen:
            raise NoteError(f"duplicate signature for key {name}+{sig.key_id.hex()}")
        seen.add((name, sig.key_id))
        sigs.append(sig)
    return text, sigs


def open_note(data: bytes, verifiers: Iterable[Verifier]) -> Note:
    """Parse ``data`` and verify it against ``verifiers``.

    Signatures from unknown (name, key ID) pairs are ignored; every known one must
    verify, and at least one must be present.
    """
    known: dict[tuple[str, bytes], Verifier] = {}
    for v in verifiers:
        ident = (v.name, v.key_id)
        if ident in known:
            raise NoteError(f"verifier {v.name}+{v.key_id.hex()} given twice")
        known[ident] = v
    if not known:
        raise NoteError("no verifier keys given; cannot trust any note")
    text, sigs = split_note(data)
    msg = text.encode()
    verified: list[NoteSignature] = []
    unverified: list[NoteSignature] = []
    for sig in sigs:
        verifier = known.get((sig.name, sig.key_id))
        if verifier is None:
            unverified.append(sig)
        elif verifier.verify(msg, sig.signature):
            verified.append(sig)
        else:
            raise NoteError(f"invalid signature for key {sig.name}+{sig.key_id.hex()}")
    if not verified:
        names = ", ".join(sorted(f"{n}+{k.hex()}" for n, k in known))
        raise NoteError(f"note has no signature from a trusted key (trusted: {names})")
    return Note(text, tuple(verified), tuple(unverified))
