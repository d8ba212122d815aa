"""Strict Ed25519 keys: every small-order and non-canonical encoding is refused wherever
a public key is parsed (log entries, note and witness key strings, policy key files)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st
from weak_keys import IDENTITY_SIGNATURE, NON_CANONICAL, SMALL_ORDER, forged_entry

from attest import (
    EntryError,
    KeyFileError,
    PolicyError,
    TrustPolicy,
    decode_entry,
    generate_private_key,
    load_public_key,
    public_key_from_b64,
    public_key_from_raw,
    verify_entry,
)
from attest._ed25519 import WeakKey, check_public_key
from attest.keys import raw_public_key
from ledger.tlog.cosignature import CosignatureVerifier
from ledger.tlog.note import NoteError, NoteVerifier, key_id, verifier_key_string

P = 2**255 - 19
D = (-121665 * pow(121666, P - 2, P)) % P
ALL_BAD = {**SMALL_ORDER, **NON_CANONICAL}


# ---- a naive reference, written from RFC 8032 5.1.3 and the affine addition law
NON_CANONICAL_ENC, OFF_CURVE = "non-canonical", "off-curve"


def _naive_decode(raw: bytes) -> tuple[int, int] | str:
    n = int.from_bytes(raw, "little")
    y, sign = n % 2**255, n >> 255
    if y >= P:
        return NON_CANONICAL_ENC  # canonical: y < p
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    if x2 == 0:
        return NON_CANONICAL_ENC if sign else (0, y)  # canonical: no sign bit when x = 0
    if pow(x2, (P - 1) // 2, P) != 1:
        return OFF_CURVE  # not a square: no point with this y
    x = pow(x2, (P + 3) // 8, P)
    if x * x % P != x2:
        x = x * pow(2, (P - 1) // 4, P) % P
    assert x * x % P == x2
    if x % 2 != sign:
        x = P - x
    return x, y


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    (x1, y1), (x2, y2) = a, b
    t = D * x1 * x2 * y1 * y2 % P
    x3 = (x1 * y2 + x2 * y1) * pow(1 + t, P - 2, P) % P
    y3 = (y1 * y2 + x1 * x2) * pow(1 - t, P - 2, P) % P
    return x3, y3


def naive_acceptable(raw: bytes) -> bool:
    """Canonical and not of small order; an encoding of no point is left to the verifier."""
    pt = _naive_decode(raw)
    if pt == NON_CANONICAL_ENC:
        return False
    if pt == OFF_CURVE:
        return True
    assert isinstance(pt, tuple)
    for _ in range(3):
        pt = _add(pt, pt)
    return pt != (0, 1)  # [8]P is the identity exactly for the small-order points


def _accepted(raw: bytes) -> bool:
    try:
        check_public_key(raw)
    except WeakKey:
        return False
    return True


def test_the_lists_are_what_they_claim() -> None:
    assert len(SMALL_ORDER) == 8 and len(set(SMALL_ORDER.values())) == 8
    for raw in SMALL_ORDER.values():
        assert isinstance(_naive_decode(raw), tuple), raw.hex()  # canonical, real points...
        assert not naive_acceptable(raw)  # ...of small order
    for raw in NON_CANONICAL.values():
        assert _naive_decode(raw) == NON_CANONICAL_ENC


@pytest.mark.parametrize("label", sorted(SMALL_ORDER))
def test_small_order_key_is_refused_everywhere(label: str, tmp_path: Path) -> None:
    raw = SMALL_ORDER[label]
    with pytest.raises(WeakKey) as info:
        check_public_key(raw)
    assert info.value.problem == "small-order"
    _refused_everywhere(raw, "small order", tmp_path)


@pytest.mark.parametrize("label", sorted(NON_CANONICAL))
def test_non_canonical_key_is_refused_everywhere(label: str, tmp_path: Path) -> None:
    raw = NON_CANONICAL[label]
    with pytest.raises(WeakKey) as info:
        check_public_key(raw)
    assert info.value.problem == "non-canonical"
    _refused_everywhere(raw, "not canonical", tmp_path)


def _refused_everywhere(raw: bytes, why: str, tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match=why):
        public_key_from_raw(raw)
    with pytest.raises(KeyFileError, match=why):
        public_key_from_b64(base64.b64encode(raw).decode())
    # a log entry carrying it, with the signature (R = identity, S = 0)
    with pytest.raises(EntryError, match=why):
        verify_entry(decode_entry(forged_entry(raw)))
    # note (log) and witness key strings
    with pytest.raises(NoteError, match=why):
        NoteVerifier.from_key_string(verifier_key_string("example.org/log", raw))
    with pytest.raises(NoteError, match=why):
        CosignatureVerifier.from_key_string(verifier_key_string("witness.example", raw, 0x04))
    # a policy's key file (SubjectPublicKeyInfo PEM around the raw bytes)
    spki = bytes.fromhex("302a300506032b6570032100") + raw
    pem = b"-----BEGIN PUBLIC KEY-----\n" + base64.encodebytes(spki) + b"-----END PUBLIC KEY-----\n"
    (tmp_path / "weak.pub").write_bytes(pem)
    with pytest.raises(KeyFileError, match=why):
        load_public_key(tmp_path / "weak.pub")
    (tmp_path / "policy.toml").write_text(
        'version = 1\n[[rule]]\nname = "r"\nkernel = "*"\npredicate_types = ["*"]\n'
        'key_files = ["weak.pub"]\nthreshold = 1\n')
    with pytest.raises(PolicyError, match=why):
        TrustPolicy.load(tmp_path / "policy.toml")


def test_the_attack_is_real_without_the_check() -> None:
    """OpenSSL alone accepts (identity, 0) under the identity key: the check is what stops it."""
    weak = Ed25519PublicKey.from_public_bytes(SMALL_ORDER["order 1 (identity, y=1)"])
    try:
        weak.verify(IDENTITY_SIGNATURE, b"any message at all")
    except InvalidSignature:
        pytest.skip("this OpenSSL rejects the identity signature by itself")


def test_real_keys_are_accepted_everywhere() -> None:
    for _ in range(20):
        raw = raw_public_key(generate_private_key().public_key())
        assert _accepted(raw) and naive_acceptable(raw)
        assert raw_public_key(public_key_from_raw(raw)) == raw
        vkey = verifier_key_string("example.org/log", raw)
        assert NoteVerifier.from_key_string(vkey).key_id == key_id("example.org/log", raw, 0x01)


def test_an_encoding_of_no_point_never_verifies_anything() -> None:
    y = 2
    while _naive_decode(_le(y)) != OFF_CURVE:
        y += 1
    key = public_key_from_raw(_le(y))  # accepted by the cheap check...
    for sig in (IDENTITY_SIGNATURE, bytes(64), os.urandom(64)):
        with pytest.raises(InvalidSignature):  # ...but nothing verifies under it
            key.verify(sig, b"any message")


def _le(n: int) -> bytes:
    return n.to_bytes(32, "little")


EDGES = [_le(v) for v in (*range(0, 40), *range(P - 40, P + 19), 2**255 - 1)]


@pytest.mark.parametrize("sign", [0, 1])
def test_fast_check_agrees_with_the_naive_reference_on_edges(sign: int) -> None:
    for raw in EDGES:
        raw = raw[:31] + bytes([raw[31] | (0x80 * sign)])
        assert _accepted(raw) == naive_acceptable(raw), raw.hex()


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=32, max_size=32))
def test_fast_check_agrees_with_the_naive_reference(raw: bytes) -> None:
    assert _accepted(raw) == naive_acceptable(raw)


def test_wrong_size_is_refused() -> None:
    for n in (0, 31, 33):
        with pytest.raises(WeakKey) as info:
            check_public_key(os.urandom(n))
        assert info.value.problem == "size"


def test_pem_round_trip_of_a_good_key(tmp_path: Path) -> None:
    pub = generate_private_key().public_key()
    (tmp_path / "k.pub").write_bytes(pub.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    assert raw_public_key(load_public_key(tmp_path / "k.pub")) == raw_public_key(pub)


@pytest.mark.parametrize("label", sorted(SMALL_ORDER)[:2])
def test_verifier_objects_refuse_weak_keys_too(label: str) -> None:
    weak = Ed25519PublicKey.from_public_bytes(SMALL_ORDER[label])
    with pytest.raises(NoteError, match="small order"):
        NoteVerifier("example.org/log", weak)
    with pytest.raises(NoteError, match="small order"):
        CosignatureVerifier("witness.example", weak)
