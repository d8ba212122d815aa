"""attest.dsse: PAE, multi-signature envelopes, thresholds, strict parsing, interop."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st
from securesystemslib.dsse import Envelope as SslibEnvelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import CryptoSigner, Key, SSlibKey  # type: ignore[attr-defined]

from attest import (
    AttestError,
    Envelope,
    EnvelopeError,
    Signature,
    SignatureError,
    generate_private_key,
    keyid,
    pae,
    sign_envelope,
    verify_envelope,
)

TYPE = "application/vnd.in-toto+json"
K1, K2, K3 = (generate_private_key() for _ in range(3))


def trusted(*keys: Any) -> dict[str, Ed25519PublicKey]:
    return {keyid(k.public_key()): k.public_key() for k in keys}


def test_pae_matches_the_dsse_spec_example() -> None:
    # DSSE protocol.md test vector.
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert pae("t\u00e9", b"") == b"DSSEv1 3 t\xc3\xa9 0 "  # lengths are in bytes


def test_round_trip_and_json_shape() -> None:
    env = sign_envelope(b'{"a":1}', TYPE, [K1, K2])
    doc = env.to_json()
    assert set(doc) == {"payload", "payloadType", "signatures"}
    assert base64.b64decode(doc["payload"]) == b'{"a":1}'
    assert Envelope.from_json(doc) == env
    assert [s.keyid for s in env.signatures] == [keyid(K1.public_key()), keyid(K2.public_key())]


def test_threshold_and_distinct_keys() -> None:
    env = sign_envelope(b"x", TYPE, [K1, K2, K1])
    assert len(env.signatures) == 2  # the same key signs once
    assert verify_envelope(env, trusted(K1, K2), threshold=2) == sorted(trusted(K1, K2))
    with pytest.raises(SignatureError, match="1 of the required 2"):
        verify_envelope(env, trusted(K1, K3), threshold=2)
    # A duplicated signature by one key still counts once.
    dup = Envelope(env.payload, env.payload_type, (env.signatures[0], env.signatures[0]))
    with pytest.raises(SignatureError, match="1 of the required 2"):
        verify_envelope(dup, trusted(K1, K2), threshold=2)
    # One key listed under two keyids counts once.
    pk = K1.public_key()
    aliased = Envelope(env.payload, env.payload_type,
                       (env.signatures[0], Signature("alias", env.signatures[0].sig)))
    with pytest.raises(AttestError, match="threshold 2 cannot be met by 1"):
        verify_envelope(aliased, {keyid(pk): pk, "alias": pk}, threshold=2)


def test_unknown_and_bad_signatures_are_reported() -> None:
    env = sign_envelope(b"x", TYPE, [K3])
    with pytest.raises(SignatureError, match="not a trusted key"):
        verify_envelope(env, trusted(K1))
    forged = Envelope(env.payload, env.payload_type, (Signature(keyid(K1.public_key()), env.signatures[0].sig),))
    with pytest.raises(SignatureError, match="invalid signature"):
        verify_envelope(forged, trusted(K1))
    for bad in (0, -1, True):
        with pytest.raises(AttestError, match="threshold"):
            verify_envelope(env, trusted(K3), threshold=bad)


def test_sign_preconditions() -> None:
    with pytest.raises(EnvelopeError, match="at least one private key"):
        sign_envelope(b"x", TYPE, [])
    with pytest.raises(EnvelopeError, match="payload type"):
        sign_envelope(b"x", "", [K1])


GOOD = sign_envelope(b"payload", TYPE, [K1]).to_json()


def mutate(path: list[Any], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(GOOD)
    target = doc
    for step in path[:-1]:
        target = target[step]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


@pytest.mark.parametrize(("doc", "where"), [
    (mutate(["payload"], KeyError), "envelope.payload: required"),
    (mutate(["payloadType"], 7), "envelope.payloadType"),
    (mutate(["payload"], "cGF5bG9hZA"), "envelope.payload: not valid"),  # missing padding
    (mutate(["payload"], "cGF5bG9hZA=="[:-1] + "B"), "envelope.payload"),
    (mutate(["payload"], "cGF5bG9hZB=="), "envelope.payload: not canonical"),
    (mutate(["payload"], "cGF5b-9hZA=="), "envelope.payload: not valid"),  # URL-safe alphabet
    (mutate(["extra"], 1), "envelope.extra: unknown field"),
    (mutate(["signatures"], []), "envelope.signatures: must be an array of 1 to 16"),
    (mutate(["signatures"], [GOOD["signatures"][0]] * 17), "envelope.signatures"),
    (mutate(["signatures", 0, "sig"], ""), "envelope.signatures[0].sig: must not be empty"),
    (mutate(["signatures", 0, "sig"], 5), "envelope.signatures[0].sig: must be a base64"),
    (mutate(["signatures", 0, "keyid"], None), "envelope.signatures[0].keyid"),
    (mutate(["signatures", 0, "keyid"], "k" * 300), "envelope.signatures[0].keyid"),
    (mutate(["signatures", 0, "sig"], base64.b64encode(b"s" * 2000).decode()), "signatures[0].sig"),
    (mutate(["signatures", 0, "other"], 1), "envelope.signatures[0].other: unknown field"),
    (mutate(["signatures", 0], "sig"), "envelope.signatures[0]: must be an object"),
    ([], "envelope: must be an object"),
])
def test_from_json_rejects(doc: Any, where: str) -> None:
    with pytest.raises(EnvelopeError) as info:
        Envelope.from_json(doc)
    assert where in str(info.value)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_tampering_any_byte_of_payload_or_signature_fails(data: st.DataObject) -> None:
    env = sign_envelope(b'{"claim": "fast"}', TYPE, [K1])
    sig = env.signatures[0]
    part = data.draw(st.sampled_from(["payload", "sig", "type"]))
    blob = {"payload": env.payload, "sig": sig.sig, "type": env.payload_type.encode()}[part]
    pos = data.draw(st.integers(0, len(blob) - 1))
    flip = data.draw(st.integers(1, 255))
    changed = bytearray(blob)
    changed[pos] ^= flip
    new = bytes(changed)
    if part == "payload":
        tampered = Envelope(new, env.payload_type, env.signatures)
    elif part == "sig":
        tampered = Envelope(env.payload, env.payload_type, (Signature(sig.keyid, new),))
    else:
        tampered = Envelope(env.payload, new.decode("latin-1"), env.signatures)
    with pytest.raises(SignatureError):
        verify_envelope(tampered, trusted(K1))


@settings(max_examples=50, deadline=None)
@given(pos=st.integers(0, 31), flip=st.integers(1, 255))
def test_tampering_any_byte_of_the_key_fails(pos: int, flip: int) -> None:
    env = sign_envelope(b"payload", TYPE, [K1])
    raw = bytearray(K1.public_key().public_bytes_raw())
    raw[pos] ^= flip
    try:
        other = Ed25519PublicKey.from_public_bytes(bytes(raw))
    except ValueError:
        return  # not a curve point: it cannot verify anything
    with pytest.raises(SignatureError):
        verify_envelope(env, {env.signatures[0].keyid: other})


def sslib_key(public_key: Ed25519PublicKey, kid: str | None = None) -> SSlibKey:
    return SSlibKey.from_crypto(public_key, keyid=kid)


def test_securesystemslib_verifies_our_envelope() -> None:
    env = sign_envelope(b'{"_type": "x"}', TYPE, [K1, K2])
    theirs = SslibEnvelope.from_dict(copy.deepcopy(env.to_json()))
    assert theirs.pae() == env.pae()
    keys: list[Key] = [sslib_key(k.public_key(), keyid(k.public_key())) for k in (K1, K2)]
    accepted = theirs.verify(keys, 2)
    assert sorted(accepted) == sorted(trusted(K1, K2))
    # ... and refuses it once the payload changes.
    theirs.payload = b'{"_type": "y"}'
    with pytest.raises(VerificationError):
        theirs.verify(keys, 1)


def test_we_verify_a_securesystemslib_envelope() -> None:
    ours_kid = keyid(K1.public_key())
    signer = CryptoSigner(K1, sslib_key(K1.public_key(), ours_kid))
    default_signer = CryptoSigner(K2)  # securesystemslib's own default keyid scheme
    theirs = SslibEnvelope(b'{"hello": "world"}', TYPE, {})
    theirs.sign(signer)
    theirs.sign(default_signer)
    env = Envelope.from_json(theirs.to_dict())
    assert env.payload == b'{"hello": "world"}'
    assert verify_envelope(env, trusted(K1)) == [ours_kid]
    their_kid = default_signer.public_key.keyid
    both = {ours_kid: K1.public_key(), their_kid: K2.public_key()}
    assert verify_envelope(env, both, threshold=2) == sorted(both)


MIB = 1 << 20  # the payload limit, written out


def _b64s(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize("size", [MIB + 1, MIB + 2, MIB + 3])
def test_attack_payload_just_over_1_mib_is_refused(size: int) -> None:
    """Base64 comes in 3-byte groups: a payload 1 or 2 bytes over must not slip through."""
    with pytest.raises(EnvelopeError, match=rf"^envelope\.payload: decodes to more than {MIB} bytes"):
        Envelope.from_json(mutate(["payload"], _b64s(b"p" * size)))
    with pytest.raises(EnvelopeError, match=f"payload is {size} bytes; the limit is {MIB}"):
        sign_envelope(b"p" * size, TYPE, [K1])


def test_payload_of_exactly_1_mib_is_accepted() -> None:
    env = sign_envelope(bytearray(b"p" * MIB), TYPE, [K1])
    assert isinstance(env.payload, bytes) and Envelope.from_json(env.to_json()) == env
    verify_envelope(env, trusted(K1))
    with pytest.raises(EnvelopeError, match="payload must be bytes"):
        sign_envelope("text", TYPE, [K1])  # type: ignore[arg-type]


@pytest.mark.parametrize(("size", "sig_ok"), [(1024, True), (1025, False), (1026, False)])
def test_signature_size_limit_is_1024_bytes(size: int, sig_ok: bool) -> None:
    doc = mutate(["signatures", 0, "sig"], _b64s(b"s" * size))
    if sig_ok:
        assert len(Envelope.from_json(doc).signatures[0].sig) == size
    else:
        with pytest.raises(EnvelopeError, match="sig: decodes to more than 1024 bytes"):
            Envelope.from_json(doc)


def test_payload_type_is_1_to_256_characters() -> None:
    for bad in ("", "t" * 257):
        with pytest.raises(EnvelopeError, match="payloadType: must be a non-empty string of at most 256"):
            Envelope.from_json(mutate(["payloadType"], bad))
        with pytest.raises(EnvelopeError, match="payload type must be 1 to 256 characters"):
            sign_envelope(b"x", bad, [K1])
    env = sign_envelope(b"x", "t" * 256, [K1])
    assert Envelope.from_json(env.to_json()).payload_type == "t" * 256
    assert Envelope.from_json(mutate(["signatures", 0, "keyid"], "k" * 256)).signatures[0].keyid == "k" * 256


def test_at_most_16_keys_sign_and_16_signatures_parse() -> None:
    keys = [generate_private_key() for _ in range(17)]
    env = sign_envelope(b"x", TYPE, keys[:16])
    assert len(Envelope.from_json(env.to_json()).signatures) == 16
    assert len(verify_envelope(env, trusted(*keys[:16]), threshold=16)) == 16
    with pytest.raises(EnvelopeError, match="at most 16 signatures per envelope"):
        sign_envelope(b"x", TYPE, keys)


def test_attack_only_ed25519_keys_sign() -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    with pytest.raises(EnvelopeError, match="only Ed25519 private keys can sign"):
        sign_envelope(b"x", TYPE, [K1, ec.generate_private_key(ec.SECP256R1())])  # type: ignore[list-item]


def test_missing_fields_are_named_in_order() -> None:
    with pytest.raises(EnvelopeError, match=r"^envelope\.payloadType: required field is missing"):
        Envelope.from_json({"payload": GOOD["payload"]})
    with pytest.raises(EnvelopeError, match=r"x\.signatures\[0\]\.keyid: required field is missing"):
        Envelope.from_json(mutate(["signatures", 0], {"sig": "AAAA"}), path="x")
    with pytest.raises(EnvelopeError, match=r"envelope\.a: unknown field \(allowed: payload, payloadType, signatures\)"):
        Envelope.from_json({**GOOD, "b": 1, "a": 2})


@pytest.mark.parametrize(
    ("limit", "fits", "too_long"),
    [(3, "AAAA", "AAAAAA=="), (4, "AAAAAA==", "AAAAAAA="), (5, "AAAAAAA=", "AAAAAAAA"), (0, "", "AA==")],
)
def test_decoded_length_is_checked_exactly_before_decoding(limit: int, fits: str, too_long: str) -> None:
    from attest.dsse import _unb64

    assert len(_unb64(fits, "f", limit)) == limit
    with pytest.raises(EnvelopeError, match=f"^f: decodes to more than {limit} bytes$"):
        _unb64(too_long, "f", limit)


def test_base64_outside_the_alphabet_is_invalid_not_skipped() -> None:
    with pytest.raises(EnvelopeError, match=r"^envelope\.payload: not valid standard base64$"):
        Envelope.from_json(mutate(["payload"], "AAAA!AAAA"))


def test_keyid_of_257_characters_and_empty_type_names_the_field() -> None:
    with pytest.raises(EnvelopeError, match=r"^envelope\.signatures\[0\]\.keyid: must be a string of at most 256"):
        Envelope.from_json(mutate(["signatures", 0, "keyid"], "k" * 257))
    with pytest.raises(EnvelopeError, match=r"^signature: must be an object with keyid and sig$"):
        Signature.from_json([])
    assert Envelope.from_json(mutate(["payloadType"], "t")).payload_type == "t"


def test_a_repeated_key_in_the_middle_still_lets_later_keys_sign() -> None:
    env = sign_envelope(b"x", TYPE, [K1, K1, K2])
    assert [s.keyid for s in env.signatures] == [keyid(K1.public_key()), keyid(K2.public_key())]


def test_attack_an_unknown_a_repeated_or_a_bad_signature_first_does_not_hide_good_ones() -> None:
    env = sign_envelope(b"x", TYPE, [K1, K2, K3])
    s1, s2, s3 = env.signatures
    bad = Signature(s1.keyid, s2.sig)
    for sigs in ((s3, s1, s2), (s1, s1, s2), (bad, s2, s1)):
        again = Envelope(env.payload, env.payload_type, sigs)
        assert verify_envelope(again, trusted(K1, K2), threshold=2) == sorted(trusted(K1, K2))


def test_a_failure_lists_every_problem() -> None:
    env = sign_envelope(b"x", TYPE, [K3, K1])
    bad = Envelope(env.payload, env.payload_type, (env.signatures[0], Signature(env.signatures[1].keyid, env.signatures[0].sig)))
    k3 = env.signatures[0].keyid[:16]
    k1 = env.signatures[1].keyid[:16]
    with pytest.raises(SignatureError) as info:
        verify_envelope(bad, trusted(K1))
    assert str(info.value) == (
        f"0 of the required 1 trusted signature(s) verified (signatures[0]: keyid '{k3}' is "
        f"not a trusted key; signatures[1]: invalid signature for keyid {k1})"
    )
    with pytest.raises(SignatureError, match=r"^0 of the required 1 trusted signature\(s\) verified \(no signatures\)$"):
        verify_envelope(Envelope(b"x", TYPE, ()), trusted(K1))
