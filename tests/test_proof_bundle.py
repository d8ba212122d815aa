"""C2SP tlog-proof@v1: format exactly as the spec writes it, strict parsing, verification."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.tlog.cosignature import CosignatureError, CosignatureSigner, cosign_checkpoint
from ledger.tlog.merkle import (
    MemoryHashStore,
    ProofError,
    RootMismatchError,
    inclusion_proof,
    leaf_hash,
)
from ledger.tlog.note import NoteError, NoteVerifier
from ledger.tlog.proof_bundle import (
    FILE_SUFFIX,
    HEADER,
    TlogProof,
    TlogProofError,
    verify_tlog_proof,
)

NOTE: dict[str, Any] = json.loads((Path(__file__).parent / "vectors" / "note.json").read_text())
MERKLE: dict[str, Any] = json.loads((Path(__file__).parent / "vectors" / "merkle.json").read_text())
KEY = NOTE["key"]
LOG_V = NoteVerifier.from_key_string(KEY["verifier_key"])
SIGNED = NOTE["signed_checkpoint"]["signed_note"].encode()  # size 1000 of merkle.json


@pytest.fixture(scope="module")
def store() -> MemoryHashStore:
    return MemoryHashStore.from_entries(b"leaf-%d" % i for i in range(1000))


def test_format_matches_the_spec_layout(store: MemoryHashStore) -> None:
    proof = inclusion_proof(73, 1000, store)
    p = TlogProof(73, tuple(proof), SIGNED, extra=b"age-v1.2.1")
    text = p.to_text()
    want = (
        "c2sp.org/tlog-proof@v1\n"
        f"extra {base64.b64encode(b'age-v1.2.1').decode()}\n"
        "index 73\n"
        + "".join(base64.b64encode(h).decode() + "\n" for h in proof)
        + "\n"
        + SIGNED.decode()
    )
    assert text == want and text.split("\n")[0] == HEADER and FILE_SUFFIX == ".tlog-proof"
    assert TlogProof.from_text(text) == p
    assert TlogProof.from_text(text.encode()) == p
    assert TlogProof.from_json(json.loads(json.dumps(p.to_json()))) == p
    no_extra = TlogProof(73, tuple(proof), SIGNED)
    assert "extra" not in no_extra.to_text() and TlogProof.from_text(no_extra.to_text()) == no_extra
    signed, _ = verify_tlog_proof(p, leaf_hash(b"leaf-73"), LOG_V, origin=KEY["name"])
    assert signed.checkpoint.size == 1000


@pytest.mark.parametrize("v", [c for c in MERKLE["inclusion"] if c["size"] == 1000], ids=lambda v: str(v["index"]))
def test_vector_proofs_verify_as_tlog_proofs(v: dict[str, Any]) -> None:
    p = TlogProof(v["index"], tuple(bytes.fromhex(h) for h in v["proof"]), SIGNED)
    verify_tlog_proof(TlogProof.from_text(p.to_text()), bytes.fromhex(v["leaf_hash"]), LOG_V)
    with pytest.raises(RootMismatchError):
        verify_tlog_proof(p, leaf_hash(b"something else"), LOG_V)


def test_verification_failures(store: MemoryHashStore) -> None:
    proof = tuple(inclusion_proof(5, 1000, store))
    good = TlogProof(5, proof, SIGNED)
    with pytest.raises(ProofError, match="exactly"):
        verify_tlog_proof(TlogProof(5, proof[:-1], SIGNED), leaf_hash(b"leaf-5"), LOG_V)
    with pytest.raises(NoteError, match="expected origin"):
        verify_tlog_proof(good, leaf_hash(b"leaf-5"), LOG_V, origin="other/log")
    other = NoteVerifier(KEY["name"], Ed25519PrivateKey.from_private_bytes(b"\x05" * 32).public_key())
    with pytest.raises(NoteError, match="trusted key"):
        verify_tlog_proof(good, leaf_hash(b"leaf-5"), other)
    with pytest.raises(TlogProofError, match="not below"):
        verify_tlog_proof(TlogProof(1000, (), SIGNED), leaf_hash(b"leaf-5"), LOG_V)
    w = CosignatureSigner("w.example", Ed25519PrivateKey.from_private_bytes(b"\x06" * 32), lambda: 7.0)
    with pytest.raises(CosignatureError, match="0 valid witness"):
        verify_tlog_proof(good, leaf_hash(b"leaf-5"), LOG_V, witnesses=[w.verifier()], threshold=1)
    cosigned = TlogProof(5, proof, cosign_checkpoint(SIGNED, LOG_V, w))
    _, cosigs = verify_tlog_proof(
        TlogProof.from_text(cosigned.to_text()), leaf_hash(b"leaf-5"), LOG_V,
        witnesses=[w.verifier()], threshold=1,
    )
    assert [c.timestamp for c in cosigs] == [7]


H = base64.b64encode(b"\x01" * 32).decode()
CP = SIGNED.decode()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty line"),
        (f"c2sp.org/tlog-proof@v2\nindex 0\n\n{CP}", "must start"),
        (f"c2sp.org/tlog-proof@v1\n\n{CP}", "index"),
        (f"c2sp.org/tlog-proof@v1\nindex 01\n\n{CP}", "leading zeros"),
        (f"c2sp.org/tlog-proof@v1\nindex -1\n\n{CP}", "decimal"),
        (f"c2sp.org/tlog-proof@v1\nindex  1\n\n{CP}", "decimal"),
        (f"c2sp.org/tlog-proof@v1\nindex 1\nextra AAAA\n\n{CP}", "proof hash 0"),
        (f"c2sp.org/tlog-proof@v1\nextra !!\nindex 1\n\n{CP}", "base64"),
        (f"c2sp.org/tlog-proof@v1\nindex 1\nAAAA\n\n{CP}", "32 bytes"),
        (f"c2sp.org/tlog-proof@v1\nindex 1\n{H[:-1]}\n\n{CP}", "base64"),
        ("c2sp.org/tlog-proof@v1\nindex 1\n" + f"{H}\n" * 65 + f"\n{CP}", "more than 64"),
        ("c2sp.org/tlog-proof@v1\nindex 1\n\nnot a note\n", "checkpoint is malformed"),
        (f"c2sp.org/tlog-proof@v1\nindex 1\n\n{CP}".replace("\n1000\n", "\n01000\n"), "leading zeros"),
        (b"\xff", "UTF-8"),
    ],
)
def test_malformed_proofs(text: str | bytes, message: str) -> None:
    with pytest.raises(TlogProofError, match=message):
        TlogProof.from_text(text)


@settings(max_examples=100, deadline=None)
@given(
    index=st.integers(0, 2**63 - 2),
    hashes=st.lists(st.binary(min_size=32, max_size=32), max_size=64),
    extra=st.none() | st.binary(max_size=100),
)
def test_round_trip_property(index: int, hashes: list[bytes], extra: bytes | None) -> None:
    p = TlogProof(index, tuple(hashes), SIGNED, extra)
    assert TlogProof.from_text(p.to_text()) == p


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(max_size=200).map(lambda t: HEADER + "\n" + t)
    | st.text(max_size=200).map(lambda t: f"{HEADER}\nindex 3\n{t}\n\n{CP}")
    | st.binary(max_size=200)
)
def test_parser_only_raises_typed_errors(text: str | bytes) -> None:
    try:
        p = TlogProof.from_text(text)
    except TlogProofError:
        return
    assert TlogProof.from_text(p.to_text()) == p


H32 = b"\x01" * 32


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("1", (), SIGNED), "index must be an integer"),
        ((True, (), SIGNED), "index must be an integer"),
        ((-1, (), SIGNED), "index -1 is out of range"),
        ((2**63 - 1, (), SIGNED), "out of range"),
        ((1, [H32], SIGNED), "must be a tuple"),
        ((1, (H32,) * 65, SIGNED), "at most 64"),
        ((1, (H32, H32[:31]), SIGNED), "proof hash 1 must be 32 bytes"),
        ((1, (H32, H32 + b"\x00"), SIGNED), "proof hash 1 must be 32 bytes"),
        ((1, (H32.hex(),), SIGNED), "proof hash 0 must be 32 bytes"),
        ((1, (), SIGNED, "extra"), "extra data must be bytes"),
        ((1, (), SIGNED, b"x" * (64 * 1024 + 1)), "at most 65536"),
        ((1, (), SIGNED.decode()), "checkpoint must be the signed note bytes"),
        ((1, (), "a\n\n\u2014 x AAAAAA==\n".encode()), "proof checkpoint is malformed"),
        ((1, (), SIGNED.replace(b"\n1000\n", b"\n01000\n")), "proof checkpoint is malformed"),
    ],
)
def test_attack_constructor_refuses_what_the_parser_would(args: tuple[Any, ...], message: str) -> None:
    """Built directly (not parsed), a proof is still checked field by field."""
    with pytest.raises(TlogProofError, match=message):
        TlogProof(*args)


def test_constructor_limits_are_inclusive() -> None:
    assert TlogProof(2**63 - 2, (H32,) * 64, SIGNED, b"x" * (64 * 1024)).index == 2**63 - 2
    assert TlogProof(0, (), SIGNED, b"").extra == b""


GOOD_JSON: dict[str, Any] = {"index": 1, "hashes": [H], "checkpoint": CP, "extra": None}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([], "needs exactly index, hashes, checkpoint, extra"),
        ({**GOOD_JSON, "more": 1}, "needs exactly"),
        ({k: v for k, v in GOOD_JSON.items() if k != "extra"}, "needs exactly"),
        ({**GOOD_JSON, "hashes": H}, "hashes must be a list of base64 strings"),
        ({**GOOD_JSON, "hashes": [H, 1]}, "hashes must be a list of base64 strings"),
        ({**GOOD_JSON, "checkpoint": SIGNED.hex().encode()}, "checkpoint must be text"),
        ({**GOOD_JSON, "extra": 5}, "extra base64 or null"),
        ({**GOOD_JSON, "hashes": [H, "!!"]}, "^proof hash is not valid base64"),
        ({**GOOD_JSON, "extra": "AAA"}, "^extra data is not valid base64"),
        ({**GOOD_JSON, "hashes": ["AAAA"]}, "proof hash 0 must be 32 bytes"),
        ({**GOOD_JSON, "index": "1"}, "index must be an integer"),
    ],
)
def test_bad_proof_json(obj: object, message: str) -> None:
    with pytest.raises(TlogProofError, match=message):
        TlogProof.from_json(obj)


def test_json_with_extra_data_round_trips() -> None:
    p = TlogProof.from_json({**GOOD_JSON, "extra": "AAAA"})
    assert p.extra == b"\x00\x00\x00" and TlogProof.from_json(p.to_json()) == p


def test_size_limits_of_the_text() -> None:
    limit = 256 * 1024 + 2 * 64 * 1024
    for too_big in ("x" * (limit + 1), b"x" * (limit + 1)):
        with pytest.raises(TlogProofError, match=f"larger than {limit} bytes"):
            TlogProof.from_text(too_big)
    for at_limit in ("x" * limit, b"x" * limit):
        with pytest.raises(TlogProofError, match="no empty line"):
            TlogProof.from_text(at_limit)
    with pytest.raises(TlogProofError, match="must be text"):
        TlogProof.from_text(7)  # type: ignore[arg-type]
    with pytest.raises(TlogProofError, match=r"^extra data is not valid base64"):
        TlogProof.from_text(f"{HEADER}\nextra !!\nindex 1\n\n{CP}")
    with pytest.raises(TlogProofError, match=f"^tlog-proof is larger than {limit} bytes"):
        TlogProof.from_text(b"\xff" * (limit + 1))  # refused before decoding
    sixty_four = TlogProof(1, (H32,) * 64, SIGNED)
    assert TlogProof.from_text(sixty_four.to_text()) == sixty_four
    with pytest.raises(TlogProofError, match=r"^proof hash 1 must be 32 bytes, got 3$"):
        TlogProof.from_text(f"{HEADER}\nindex 1\n{H}\nAAAA\n\n{CP}")
    with pytest.raises(TlogProofError, match="needs an 'index <n>' line"):
        TlogProof.from_text(f"{HEADER}\nextra AAAA\n\n{CP}")
