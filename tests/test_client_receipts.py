"""Receipts and report objects: round trips, and offline verification against arbitrary damage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from client_fakes import MemoryLog
from hypothesis import given, settings
from hypothesis import strategies as st

from attest import examples
from attest.entry import encode_entry, make_entry
from attest.keys import generate_private_key
from attest.predicates import VerificationPredicate, parse_predicate
from attest.statement import make_statement
from client import VerificationFailed
from client.monitor import Finding, MonitorReport, MonitorState, Release
from client.publish import Published, Results
from client.receipts import (
    ReceiptChecks,
    ReceiptReport,
    entry_path_for,
    verify_receipt,
    write_receipt,
)
from client.trust import load_verifier
from ledger.tlog.proof_bundle import TlogProof

H = "ab" * 32


@pytest.mark.parametrize("obj", [
    ReceiptReport("o", 1, 2, H, H, "acme/k", H, "t", (H,), "ok", None, 5, ("n",)),
    Published("kernel", 0, H, 1, False, "a.entry.json", "a.tlog-proof"),
    Release("acme/k", "1.0", 3, H, (H,)),
    Finding("violation", 3, "acme/k", "policy: no rule"),
    MonitorState("o", 7, b"o\n7\nAAAA\n\n", (Release("acme/k", "1.0", 3, H, (H,)),)),
    MonitorReport("o", 0, 7, 7, (Finding("release", 1, "acme/k", "x"),)),
    Results(VerificationPredicate.from_json(examples.verification()), None, b"[1,2]"),
], ids=lambda o: type(o).__name__)
def test_round_trip(obj: Any) -> None:
    assert type(obj).from_json(json.loads(json.dumps(obj.to_json()))) == obj


def _logged(n: int = 5) -> tuple[MemoryLog, bytes, bytes]:
    log = MemoryLog()
    key = generate_private_key()
    data = b""
    for i in range(n):
        stmt = make_statement(examples.KERNEL_NAME, examples.digest(f"src{i}"),
                              parse_predicate("https://kerneltransparency.dev/attestation/"
                                              "verification/v1", examples.verification()))
        data = encode_entry(make_entry(stmt, [key]))
        res = log.submit(data)
    proof = TlogProof(res.index, res.inclusion_proof, res.checkpoint).to_text().encode()
    return log, proof, data


def test_receipt_files_round_trip(tmp_path: Path) -> None:
    log, proof, entry = _logged()
    paths = write_receipt(tmp_path, "verification", entry, TlogProof.from_text(proof))
    assert entry_path_for(paths.proof) == paths.entry
    report, cp = verify_receipt(paths.proof.read_bytes(), paths.entry.read_bytes(),
                                load_verifier(log.verifier_key))
    assert (report.index, report.tree_size, cp.checkpoint.size) == (4, 5, 5)


def test_receipts_are_never_overwritten(tmp_path: Path) -> None:
    from client import InputError

    _, proof, entry = _logged()
    parsed = TlogProof.from_text(proof)  # index 4
    # a plain `verification.*` pair left by an older ktl is renamed, not replaced
    (tmp_path / "verification.entry.json").write_bytes(entry)
    (tmp_path / "verification.tlog-proof").write_bytes(proof)
    later = TlogProof(7, parsed.hashes, parsed.checkpoint)
    paths = write_receipt(tmp_path, "verification", b"other entry", later)
    assert paths.proof.name == "verification-7.tlog-proof"
    assert (tmp_path / "verification-4.entry.json").read_bytes() == entry
    assert (tmp_path / "verification-4.tlog-proof").read_bytes() == proof
    assert (tmp_path / "verification.entry.json").read_bytes() == b"other entry"  # the latest
    # the same index with other bytes (another log's receipt): refused, both files kept
    with pytest.raises(InputError, match="already holds another entry"):
        write_receipt(tmp_path, "verification", b"third entry", later)
    assert paths.entry.read_bytes() == b"other entry"
    # the same entry again (a duplicate submission) keeps its first receipt
    assert write_receipt(tmp_path, "verification", entry, parsed).proof.read_bytes() == proof
    assert (tmp_path / "verification.tlog-proof").read_bytes() == proof


_LOG, _PROOF, _ENTRY = _logged()
_V = load_verifier(_LOG.verifier_key)


@settings(max_examples=150, deadline=None)
@given(which=st.sampled_from(["proof", "entry"]), pos=st.integers(min_value=0),
       bit=st.integers(min_value=0, max_value=7))
def test_any_single_bit_flip_is_rejected(which: str, pos: int, bit: int) -> None:
    proof, entry = bytearray(_PROOF), bytearray(_ENTRY)
    target = proof if which == "proof" else entry
    target[pos % len(target)] ^= 1 << bit
    try:
        verify_receipt(bytes(proof), bytes(entry), _V)
    except VerificationFailed:
        return
    # Only a flip the formats ignore may pass: the verified facts must be unchanged.
    report, _ = verify_receipt(bytes(proof), bytes(entry), _V)
    good, _ = verify_receipt(_PROOF, _ENTRY, _V)
    assert report == good


@settings(max_examples=100, deadline=None)
@given(junk=st.binary(max_size=300))
def test_garbage_receipts_are_rejected_cleanly(junk: bytes) -> None:
    with pytest.raises(VerificationFailed):
        verify_receipt(junk, _ENTRY, _V)
    with pytest.raises(VerificationFailed):
        verify_receipt(_PROOF, junk, _V)


def test_witness_cosignatures_are_required_when_asked() -> None:
    from client.receipts import load_witnesses
    from ledger.tlog.checkpoint import Checkpoint, sign_checkpoint
    from ledger.tlog.cosignature import CosignatureSigner

    w1 = CosignatureSigner("witness.example/w1", generate_private_key())
    w2 = CosignatureSigner("witness.example/w2", generate_private_key())
    proof = TlogProof.from_text(_PROOF)
    size = len(_LOG.entries)
    cosigned = sign_checkpoint(Checkpoint(_LOG.origin, size, _LOG.store.root()), _LOG.signer, w1)
    receipt = TlogProof(proof.index, proof.hashes, cosigned).to_text().encode()
    ws = load_witnesses([w1.verifier_key_string(), w2.verifier_key_string()])
    report, _ = verify_receipt(receipt, _ENTRY, _V, ReceiptChecks(witnesses=ws, witness_threshold=1))
    assert report.notes == ("1 of 2 witnesses cosigned (threshold 1): witness.example/w1",)
    with pytest.raises(VerificationFailed, match="witness cosignatures"):
        verify_receipt(receipt, _ENTRY, _V, ReceiptChecks(witnesses=ws, witness_threshold=2))
    with pytest.raises(VerificationFailed, match="witness cosignatures"):
        verify_receipt(_PROOF, _ENTRY, _V, ReceiptChecks(witnesses=ws[:1], witness_threshold=1))
