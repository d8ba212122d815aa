"""C2SP tlog-checkpoint: known answers, strict parsing, signing and opening."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.tlog.checkpoint import (
    MAX_EXTENSION_LINES,
    Checkpoint,
    CheckpointError,
    open_checkpoint,
    sign_checkpoint,
)
from ledger.tlog.merkle import EMPTY_ROOT
from ledger.tlog.note import NoteError, NoteSigner, NoteVerifier

VEC = Path(__file__).parent / "vectors"
NOTE: dict[str, Any] = json.loads((VEC / "note.json").read_text())
MERKLE: dict[str, Any] = json.loads((VEC / "merkle.json").read_text())
KEY = NOTE["key"]
LOG = NoteSigner(KEY["name"], Ed25519PrivateKey.from_private_bytes(bytes.fromhex(KEY["seed_hex"])))
LOG_V = NoteVerifier.from_key_string(KEY["verifier_key"])
WITNESS = NOTE["witness_key"]
WIT = NoteSigner(
    WITNESS["name"], Ed25519PrivateKey.from_private_bytes(bytes.fromhex(WITNESS["seed_hex"]))
)
ROOT = bytes.fromhex(NOTE["checkpoint"]["root_hex"])


def test_checkpoint_vector() -> None:
    c = NOTE["checkpoint"]
    cp = Checkpoint(c["origin"], c["size"], ROOT)
    assert base64.b64encode(ROOT).decode() == c["root_base64"]
    assert [r["root"] for r in MERKLE["roots"] if r["size"] == 1000] == [c["root_hex"]]
    assert cp.to_text() == NOTE["signed_checkpoint"]["text"]
    assert Checkpoint.from_text(cp.to_text()) == cp
    signed = sign_checkpoint(cp, LOG)
    assert signed.decode() == NOTE["signed_checkpoint"]["signed_note"]
    opened = open_checkpoint(signed, LOG_V, origin=c["origin"])
    assert opened.checkpoint == cp and opened.note_bytes == signed


def test_empty_checkpoint_vector() -> None:
    v = NOTE["empty_checkpoint"]
    opened = open_checkpoint(v["signed_note"].encode(), LOG_V)
    assert opened.checkpoint == Checkpoint(KEY["name"], 0, EMPTY_ROOT)
    assert sign_checkpoint(opened.checkpoint, LOG).decode() == v["signed_note"]


@pytest.mark.parametrize("order", ["log_signature_first", "log_signature_last"])
def test_cosigned_checkpoint_vectors(order: str) -> None:
    data = NOTE["cosigned_checkpoint"][order]["signed_note"].encode()
    opened = open_checkpoint(data, LOG_V)
    assert opened.checkpoint.size == 1000
    assert [s.name for s in opened.note.unverified_signatures] == [WITNESS["name"]]
    both = open_checkpoint(data, LOG_V, others=[WIT.verifier()])
    assert len(both.note.verified_signatures) == 2


@pytest.mark.parametrize("v", NOTE["invalid_notes"], ids=lambda v: v["reason"])
def test_invalid_notes_rejected(v: dict[str, Any]) -> None:
    with pytest.raises(NoteError):
        open_checkpoint(v["signed_note"].encode(), LOG_V)


def test_log_signature_required_and_origin_checked() -> None:
    cp = Checkpoint(KEY["name"], 1000, ROOT)
    only_witness = sign_checkpoint(cp, WIT)
    with pytest.raises(CheckpointError, match="not signed by the log key"):
        open_checkpoint(only_witness, LOG_V, others=[WIT.verifier()])
    with pytest.raises(CheckpointError, match="expected origin"):
        open_checkpoint(sign_checkpoint(cp, LOG), LOG_V, origin="other.example/log")
    with pytest.raises(NoteError, match="no signature from a trusted key"):
        open_checkpoint(only_witness, LOG_V)


R64 = base64.b64encode(ROOT).decode()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"o\n1\n{R64}", "end with a newline"),
        ("o\n1\n", "origin, a size and a root"),
        (f"\n1\n{R64}\n", "origin"),
        (f"o\n01\n{R64}\n", "leading zeros"),
        (f"o\n00\n{R64}\n", "leading zeros"),
        (f"o\n-1\n{R64}\n", "decimal"),
        (f"o\n+1\n{R64}\n", "decimal"),
        (f"o\n 1\n{R64}\n", "decimal"),
        (f"o\n1.0\n{R64}\n", "decimal"),
        (f"o\n\u0661\n{R64}\n", "decimal"),
        (f"o\n{'9' * 19}\n{R64}\n", "out of range"),
        (f"o\n{'1' * 20}\n{R64}\n", "decimal"),
        ("o\n1\nAAAA\n", "32 bytes"),
        (f"o\n1\n{R64[:-1]}\n", "base64"),
        (f"o\n1\n{R64}\n\n", "extension line 1"),
        (f"o\n1\n{R64}\next\n\n", "extension line 2"),
        (f"o\r\n1\n{R64}\n", "control"),
        ("o\n1\n" + R64 + "\n" + "e\n" * (MAX_EXTENSION_LINES + 1), "extension lines"),
        (b"\xffo\n1\n" + R64.encode() + b"\n", "UTF-8"),
    ],
)
def test_malformed_checkpoints(text: str | bytes, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        Checkpoint.from_text(text)


def test_constructor_validates() -> None:
    for args in [
        ("", 1, ROOT),
        ("o\n", 1, ROOT),
        ("o", -1, ROOT),
        ("o", True, ROOT),
        ("o", 1, ROOT[:31]),
        ("o", 1, ROOT, ("",)),
        ("o", 1, ROOT, ("a\nb",)),
    ]:
        with pytest.raises(CheckpointError):
            Checkpoint(*args)  # type: ignore[arg-type]


def test_extensions_round_trip_and_json() -> None:
    cp = Checkpoint("example.com/log", 20852163, ROOT, ("ext one", "— two"))
    text = cp.to_text()
    assert text.endswith("ext one\n— two\n")
    assert Checkpoint.from_text(text) == cp
    assert Checkpoint.from_json(json.loads(json.dumps(cp.to_json()))) == cp
    with pytest.raises(CheckpointError, match="missing 'size'"):
        Checkpoint.from_json({"origin": "o", "root_hash": R64})
    with pytest.raises(CheckpointError):
        Checkpoint.from_json({"origin": "o", "size": 1, "root_hash": R64, "x": 1})


lines = st.text(alphabet=st.characters(min_codepoint=0x20, blacklist_categories=["Cs"]),
                min_size=1, max_size=40).filter(lambda s: "\x7f" not in s)


@settings(max_examples=150, deadline=None)
@given(origin=lines, size=st.integers(0, 2**63 - 1), root=st.binary(min_size=32, max_size=32),
       exts=st.lists(lines, max_size=4))
def test_round_trip_property(origin: str, size: int, root: bytes, exts: list[str]) -> None:
    cp = Checkpoint(origin, size, root, tuple(exts))
    assert Checkpoint.from_text(cp.to_text()) == cp
    assert Checkpoint.from_text(cp.to_text().encode()) == cp
    assert Checkpoint.from_json(cp.to_json()) == cp


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200) | st.binary(max_size=200))
def test_parser_only_raises_checkpoint_error(text: str | bytes) -> None:
    try:
        cp = Checkpoint.from_text(text)
    except CheckpointError:
        return
    as_str = text if isinstance(text, str) else text.decode()
    assert cp.to_text() == as_str


# The limits, written out as numbers so that a changed constant is noticed.
def test_line_length_limit_is_1024_characters() -> None:
    Checkpoint("o" * 1024, 1, ROOT, ("e" * 1024,))
    Checkpoint.from_text(f"{'o' * 1024}\n1\n{R64}\n{'e' * 1024}\n")
    with pytest.raises(CheckpointError, match=r"^checkpoint origin is longer than 1024 characters"):
        Checkpoint.from_text(f"{'o' * 1025}\n1\n{R64}\n")
    with pytest.raises(CheckpointError, match="extension line 2 is longer than 1024"):
        Checkpoint("o", 1, ROOT, ("e", "e" * 1025))


def test_extension_count_limit_is_16() -> None:
    sixteen = tuple(f"e{i}" for i in range(16))
    assert Checkpoint.from_text(Checkpoint("o", 1, ROOT, sixteen).to_text()).extensions == sixteen
    with pytest.raises(CheckpointError, match="more than 16 extension lines"):
        Checkpoint("o", 1, ROOT, (*sixteen, "e16"))


def test_overall_text_limit_is_checked_before_splitting() -> None:
    limit = (3 + 16) * (1024 + 1)  # every line at its longest, newlines included
    with pytest.raises(CheckpointError, match=f"checkpoint text is longer than {limit} characters"):
        Checkpoint.from_text("o" * (limit + 1))
    with pytest.raises(CheckpointError) as exact:  # exactly at the limit: other checks decide
        Checkpoint.from_text("o" * (limit - 1) + "\n")
    assert "text is longer" not in str(exact.value)


def test_constructor_and_parser_name_the_bad_field() -> None:
    with pytest.raises(CheckpointError, match="extensions must be a tuple"):
        Checkpoint("o", 1, ROOT, ["e"])  # type: ignore[arg-type]
    with pytest.raises(CheckpointError, match=r"^checkpoint origin must be a non-empty"):
        Checkpoint.from_text(f"\n1\n{R64}\n")
    with pytest.raises(CheckpointError, match="text must be a string"):
        Checkpoint.from_text(1000)  # type: ignore[arg-type]
    with pytest.raises(CheckpointError, match=r"^checkpoint root hash is not valid base64"):
        Checkpoint.from_text("o\n1\n!!!!\n")
    with pytest.raises(CheckpointError, match="32 bytes, got 3"):
        Checkpoint.from_text("o\n1\nAAAA\n")


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"origin": "o", "size": 1, "root_hash": 1}, "root_hash must be base64"),
        ({"origin": "o", "size": 1, "root_hash": R64, "extensions": "abc"}, "extensions a list"),
        ({"origin": "o", "size": 1, "root_hash": "!!!!"}, "^checkpoint root hash is not valid"),
        ({"origin": "o", "size": 1, "root_hash": R64[:-1]}, "^checkpoint root hash is not valid"),
    ],
)
def test_bad_checkpoint_json(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        Checkpoint.from_json(obj)


def test_attack_another_key_under_the_log_s_name_is_not_the_log() -> None:
    """A key that takes the log's name but not its key ID must not pass for the log."""
    impostor = NoteSigner(KEY["name"], Ed25519PrivateKey.from_private_bytes(b"\x09" * 32))
    assert impostor.key_id != LOG.key_id
    forged = sign_checkpoint(Checkpoint(KEY["name"], 1000, ROOT), impostor)
    with pytest.raises(CheckpointError, match="not signed by the log key"):
        open_checkpoint(forged, LOG_V, others=[impostor.verifier()])
