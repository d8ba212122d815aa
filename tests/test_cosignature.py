"""C2SP tlog-cosignature/v1: message bytes from the spec, signing, verification, quorum."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.tlog.checkpoint import Checkpoint, CheckpointError, sign_checkpoint
from ledger.tlog.cosignature import (
    Cosignature,
    CosignatureError,
    CosignatureSigner,
    CosignatureVerifier,
    cosign_checkpoint,
    cosigned_message,
    verify_cosignatures,
)
from ledger.tlog.note import NoteError, NoteSigner, NoteVerifier, open_note

NOTE: dict[str, Any] = json.loads((Path(__file__).parent / "vectors" / "note.json").read_text())
KEY, WKEY = NOTE["key"], NOTE["witness_key"]
LOG = NoteSigner(KEY["name"], Ed25519PrivateKey.from_private_bytes(bytes.fromhex(KEY["seed_hex"])))
LOG_V = NoteVerifier.from_key_string(KEY["verifier_key"])
W_PRIV = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(WKEY["seed_hex"]))
TS = 1679315147
SIGNED = NOTE["signed_checkpoint"]["signed_note"].encode()
TEXT = NOTE["signed_checkpoint"]["text"]


def _witness(name: str = WKEY["name"], ts: int = TS, seed: int = 0) -> CosignatureSigner:
    key = W_PRIV if seed == 0 else Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32)
    return CosignatureSigner(name, key, clock=lambda: ts)


def test_key_id_and_vkey_use_type_0x04() -> None:
    w = _witness()
    pub = bytes.fromhex(WKEY["public_key_hex"])
    want_id = hashlib.sha256(WKEY["name"].encode() + b"\n\x04" + pub).digest()[:4]
    assert w.key_id == want_id and w.key_id.hex() != WKEY["key_id_hex"]
    vkey = w.verifier_key_string()
    material = base64.b64encode(b"\x04" + pub).decode()
    assert vkey == f"{WKEY['name']}+{want_id.hex()}+{material}"
    v = CosignatureVerifier.from_key_string(vkey)
    assert v.key_id == want_id and v.key_string() == vkey
    with pytest.raises(NoteError):
        CosignatureVerifier.from_key_string(WKEY["verifier_key"])  # a type-0x01 note key


def test_cosignature_line_matches_the_spec_formula() -> None:
    out = cosign_checkpoint(SIGNED, LOG_V, _witness())
    assert out.startswith(SIGNED)
    line = out[len(SIGNED) :].decode()
    msg = b"cosignature/v1\ntime 1679315147\n" + TEXT.encode()
    assert cosigned_message(TEXT, TS) == msg
    sig = W_PRIV.sign(msg)  # Ed25519 is deterministic
    kid = hashlib.sha256(WKEY["name"].encode() + b"\n\x04" + W_PRIV.public_key().public_bytes_raw()).digest()[:4]
    want = "\u2014 " + WKEY["name"] + " " + base64.b64encode(kid + TS.to_bytes(8, "big") + sig).decode() + "\n"
    assert line == want
    signed, cosigs = verify_cosignatures(out, LOG_V, [_witness().verifier()])
    assert signed.checkpoint.size == 1000
    assert [(c.name, c.timestamp) for c in cosigs] == [(WKEY["name"], TS)]
    # A verifier that knows only the log key ignores the cosignature.
    assert open_note(out, [LOG_V]).unverified_signatures[0].name == WKEY["name"]


def test_quorum_and_failures() -> None:
    w1, w2, w3 = _witness("w1.example", seed=1), _witness("w2.example", seed=2), _witness("w3.example", seed=3)
    data = cosign_checkpoint(cosign_checkpoint(SIGNED, LOG_V, w1), LOG_V, w2)
    vs = [w1.verifier(), w2.verifier(), w3.verifier()]
    assert len(verify_cosignatures(data, LOG_V, vs, threshold=2)[1]) == 2
    with pytest.raises(CosignatureError, match="2 valid witness cosignatures; 3 required"):
        verify_cosignatures(data, LOG_V, vs, threshold=3)
    with pytest.raises(CosignatureError, match="more than"):
        verify_cosignatures(data, LOG_V, vs[:1], threshold=2)
    with pytest.raises(CosignatureError, match="already"):
        cosign_checkpoint(data, LOG_V, w1)
    # A cosignature whose timestamp is changed after signing fails.
    lines = data.decode().split("\n")
    raw = bytearray(base64.b64decode(lines[-2].split(" ")[2]))
    raw[11] ^= 1
    lines[-2] = " ".join([*lines[-2].split(" ")[:2], base64.b64encode(bytes(raw)).decode()])
    with pytest.raises(NoteError, match="invalid signature"):
        verify_cosignatures("\n".join(lines).encode(), LOG_V, vs, threshold=1)


def test_witness_only_checks_log_signature_first() -> None:
    other = NoteSigner(KEY["name"], Ed25519PrivateKey.from_private_bytes(b"\x09" * 32))
    forged = sign_checkpoint(Checkpoint(KEY["name"], 5, b"\x00" * 32), other)
    with pytest.raises(NoteError, match="no signature from a trusted key"):
        cosign_checkpoint(forged, LOG_V, _witness())


def test_signer_refuses_non_checkpoints_and_bad_times() -> None:
    with pytest.raises(CheckpointError):
        _witness().sign(b"hello\n")
    with pytest.raises(CosignatureError, match="out of range"):
        _witness(ts=-5).sign(TEXT.encode())
    with pytest.raises(CosignatureError, match="out of range"):
        cosigned_message(TEXT, 1 << 63)
    v = _witness().verifier()
    assert v.verify(TEXT.encode(), b"\xff" * 72) is False  # timestamp above 2^63 - 1
    assert v.verify(TEXT.encode(), b"\x00" * 71) is False


@settings(max_examples=40, deadline=None)
@given(ts=st.integers(0, (1 << 63) - 1), size=st.integers(0, 10**12))
def test_sign_verify_round_trip(ts: int, size: int) -> None:
    cp = Checkpoint("example.test/ktl", size, hashlib.sha256(b"%d" % size).digest())
    w = _witness(ts=ts)
    data = cosign_checkpoint(sign_checkpoint(cp, LOG), LOG_V, w)
    signed, cosigs = verify_cosignatures(data, LOG_V, [w.verifier()], threshold=1)
    assert signed.checkpoint == cp and cosigs[0].timestamp == ts


def test_cosignature_json_round_trip() -> None:
    c = Cosignature("w.example", b"\x01\x02\x03\x04", TS)
    assert Cosignature.from_json(json.loads(json.dumps(c.to_json()))) == c
    for bad in [{}, {**c.to_json(), "key_id": "zz"}, {**c.to_json(), "timestamp": -1},
                {**c.to_json(), "name": "a b"}]:
        with pytest.raises(NoteError):
            Cosignature.from_json(bad)


MAX_TS = (1 << 63) - 1  # written out: the largest timestamp a v1 cosignature may carry


def _cosig_line(name: str, kid: bytes, blob: bytes) -> bytes:
    return ("\u2014 " + name + " " + base64.b64encode(kid + blob).decode() + "\n").encode()


def test_timestamps_are_integers_up_to_2_to_the_63_minus_1() -> None:
    assert cosigned_message(TEXT, MAX_TS).startswith(b"cosignature/v1\ntime 9223372036854775807\n")
    assert cosigned_message(TEXT, 0).startswith(b"cosignature/v1\ntime 0\n")
    for bad in (True, 1.0, "1"):
        with pytest.raises(CosignatureError, match="timestamp must be an integer"):
            cosigned_message(TEXT, bad)  # type: ignore[arg-type]
    with pytest.raises(CosignatureError, match=r"timestamp -1 is out of range \[0, 2\^63\)"):
        cosigned_message(TEXT, -1)
    w = _witness(ts=MAX_TS)
    data = cosign_checkpoint(SIGNED, LOG_V, w)
    assert verify_cosignatures(data, LOG_V, [w.verifier()])[1][0].timestamp == MAX_TS


def test_attack_a_validly_signed_timestamp_of_2_to_the_63_is_refused() -> None:
    """The witness key really signed 'time 2^63': the verifier still refuses the cosignature."""
    w = _witness()
    msg = f"cosignature/v1\ntime {1 << 63}\n".encode() + TEXT.encode()
    blob = (1 << 63).to_bytes(8, "big") + W_PRIV.sign(msg)
    assert w.verifier().verify(TEXT.encode(), blob) is False
    with pytest.raises(NoteError, match=f"invalid signature for key {WKEY['name']}"):
        verify_cosignatures(SIGNED + _cosig_line(w.name, w.key_id, blob), LOG_V, [w.verifier()])


@pytest.mark.parametrize("length", [8, 64, 71, 73])
def test_attack_a_cosignature_of_the_wrong_length_is_refused(length: int) -> None:
    w = _witness()
    good = w.sign(TEXT.encode())
    blob = (good + good)[:length]
    assert w.verifier().verify(TEXT.encode(), blob) is False
    with pytest.raises(NoteError, match=f"invalid signature for key {WKEY['name']}"):
        verify_cosignatures(SIGNED + _cosig_line(w.name, w.key_id, blob), LOG_V, [w.verifier()])
    assert w.verifier().verify(TEXT.encode(), good)
    assert w.verifier().verify(b"\xff" + TEXT.encode(), good) is False


def test_cosignature_timestamp_needs_the_v1_length() -> None:
    from ledger.tlog.cosignature import cosignature_timestamp
    from ledger.tlog.note import NoteSignature

    blob = TS.to_bytes(8, "big") + b"\x00" * 64
    assert cosignature_timestamp(NoteSignature("w", b"\x00" * 4, blob)) == TS
    with pytest.raises(CosignatureError, match="cosignature from w has the wrong length"):
        cosignature_timestamp(NoteSignature("w", b"\x00" * 4, blob[:-1]))


def test_keys_must_be_ed25519() -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    ec_key = ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(CosignatureError, match="cosigner needs an Ed25519 private key"):
        CosignatureSigner("w", ec_key)  # type: ignore[arg-type]
    with pytest.raises(CosignatureError, match="verifier needs an Ed25519 public key"):
        CosignatureVerifier("w", ec_key.public_key())  # type: ignore[arg-type]


def test_two_witnesses_may_share_a_name_but_not_a_key() -> None:
    a, b = _witness("w.example", seed=1), _witness("w.example", seed=2)
    data = cosign_checkpoint(cosign_checkpoint(SIGNED, LOG_V, a), LOG_V, b)
    _, cosigs = verify_cosignatures(data, LOG_V, [a.verifier(), b.verifier()], threshold=2)
    assert sorted(c.key_id for c in cosigs) == sorted([a.key_id, b.key_id])
    with pytest.raises(CosignatureError, match=r"already carries a cosignature from w\.example"):
        cosign_checkpoint(data, LOG_V, b)


def test_threshold_must_be_a_non_negative_integer() -> None:
    w = _witness()
    data = cosign_checkpoint(SIGNED, LOG_V, w)
    for bad in (True, -1, 1.0, "1"):
        with pytest.raises(CosignatureError, match="threshold must be a non-negative integer"):
            verify_cosignatures(data, LOG_V, [w.verifier()], threshold=bad)  # type: ignore[arg-type]
    assert verify_cosignatures(SIGNED, LOG_V, [], threshold=0)[1] == []
    assert verify_cosignatures(data, LOG_V, [w.verifier()], threshold=0)[1][0].name == w.name
    with pytest.raises(CosignatureError, match="threshold 1 is more than the 0 witnesses"):
        verify_cosignatures(data, LOG_V, [], threshold=1)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"extra": 1}, "needs exactly name, key_id, timestamp"),
        ({"key_id": "0102030"}, "key_id must be 8 hex digits"),
        ({"key_id": "010203040"}, "key_id must be 8 hex digits"),
        ({"key_id": "0102030z"}, "key_id must be 8 hex digits"),
        ({"key_id": 16909060}, "key_id must be 8 hex digits"),
        ({"timestamp": True}, "timestamp must be an integer in"),
        ({"timestamp": "5"}, "timestamp must be an integer in"),
        ({"timestamp": 1 << 63}, "timestamp must be an integer in"),
    ],
)
def test_bad_cosignature_json(change: dict[str, Any], message: str) -> None:
    doc = {**Cosignature("w.example", b"\x01\x02\x03\x04", TS).to_json(), **change}
    with pytest.raises(CosignatureError, match=message):
        Cosignature.from_json(doc)
    assert Cosignature.from_json(Cosignature("w", b"\x00" * 4, MAX_TS).to_json()).timestamp == MAX_TS


def test_witness_keys_and_zero_timestamps() -> None:
    with pytest.raises(NoteError, match=r"^witness key must look like <name>"):
        CosignatureVerifier.from_key_string("w.example")
    assert Cosignature.from_json({"name": "w", "key_id": "00000000", "timestamp": 0}).timestamp == 0
    w = _witness()
    good = w.sign(TEXT.encode())
    assert w.verifier().verify(TEXT.encode(), good[:-1] + bytes([good[-1] ^ 1])) is False
