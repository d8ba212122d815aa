"""Our cosignature/v1 bytes against vectors transcribed from transparency-dev/formats
(`tests/vectors/cosignature.json`, made by `tests/vectors/make_cosignature_vectors.py`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.tlog.checkpoint import Checkpoint, sign_checkpoint
from ledger.tlog.cosignature import (
    CosignatureError,
    CosignatureSigner,
    CosignatureVerifier,
    cosign_checkpoint,
    cosigned_message,
    verify_cosignatures,
)
from ledger.tlog.note import NoteError, NoteSigner, NoteVerifier

V: dict[str, Any] = json.loads((Path(__file__).parent / "vectors" / "cosignature.json").read_text())
LOG = NoteVerifier.from_key_string(V["log_verifier_key"])
W = V["witness"]
SEED = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(W["seed_hex"]))


def test_the_vectors_name_their_source() -> None:
    assert V["source"]["repository"] == "transparency-dev/formats"
    assert len(V["source"]["commit"]) == 40


def test_key_string_and_id_match() -> None:
    signer = CosignatureSigner(W["name"], SEED)
    assert signer.verifier_key_string() == W["verifier_key"]
    assert signer.key_id.hex() == W["key_id_hex"]
    assert CosignatureVerifier.from_key_string(W["verifier_key"]).key_id == signer.key_id


@pytest.mark.parametrize("case", V["valid"], ids=lambda c: str(c["timestamp"]))
def test_we_produce_and_accept_exactly_their_bytes(case: dict[str, Any]) -> None:
    ts = case["timestamp"]
    assert cosigned_message(V["checkpoint_text"], ts).hex() == case["message_hex"]
    signer = CosignatureSigner(W["name"], SEED, clock=lambda: ts)
    ours = cosign_checkpoint(V["log_signed_note"].encode(), LOG, signer)
    assert ours.decode() == case["cosigned_note"]
    _, cosigs = verify_cosignatures(case["cosigned_note"].encode(), LOG,
                                    [CosignatureVerifier.from_key_string(W["verifier_key"])], 1)
    assert cosigs[0].timestamp == ts


@pytest.mark.parametrize("case", V["invalid"], ids=lambda c: c["reason"][:30])
def test_we_reject_what_they_reject(case: dict[str, Any]) -> None:
    note = (V["log_signed_note"] + case["cosignature_line"]).encode()
    verifier = CosignatureVerifier.from_key_string(W["verifier_key"])
    with pytest.raises((CosignatureError, NoteError)):
        verify_cosignatures(note, LOG, [verifier], 1)


def test_extension_lines_are_signed_too() -> None:
    ext = V["extension_lines"]
    cp = Checkpoint.from_text(ext["checkpoint_text"])
    signer = CosignatureSigner(W["name"], SEED, clock=lambda: 1_700_000_000)
    log_seed = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))  # note.json's log key
    note = sign_checkpoint(cp, NoteSigner(LOG.name, log_seed))
    ours = cosign_checkpoint(note, LOG, signer)
    assert ours.decode().endswith(ext["cosignature_line"])
