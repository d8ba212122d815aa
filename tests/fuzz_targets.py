"""Fuzz targets for every parser that reads bytes a log or a stranger sends.

Each target takes arbitrary bytes and either rejects them with its package's typed error
(`LedgerError`, `AttestError`, `VerifierError`, `ClientError`) or parses them, in which case serializing
the result must give the input back (or, where the input is not canonical JSON/TOML, a
value that parses to the same thing). Any other exception is a bug. The same targets run
under hypothesis in `tests/test_fuzz_parsers.py` (every `make test`) and under atheris in
`tests/fuzz_atheris.py` (long runs; see docs/development.md, "Fuzzing"). Seeds are in
``tests/fuzz_corpus/<target>/``.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

from attest import AttestError
from attest.entry import LogEntry, decode_entry, encode_entry
from attest.policy import TrustPolicy
from attest.predicates import SuitePredicate
from client.errors import ClientError
from client.suite import read_suite
from ledger import LedgerError
from ledger.tlog.checkpoint import Checkpoint
from ledger.tlog.cosignature import cosignature_timestamp
from ledger.tlog.note import split_note
from ledger.tlog.proof_bundle import TlogProof
from ledger.tlog.tiles import (
    TILE_WIDTH,
    decode_bundle,
    encode_bundle,
    entries_path,
    parse_tile_path,
    split_tile,
    tile_path,
)
from ledger.tlog.witness import AddCheckpoint
from ledger.tlog.witness_policy import WitnessPolicy
from verifier import VerifierError
from verifier.kernel import KernelSpec

CORPUS = Path(__file__).resolve().parent / "fuzz_corpus"
TYPED = (LedgerError, AttestError, VerifierError, ClientError)
_EMPTY_DIR = tempfile.mkdtemp(prefix="ktl-fuzz-")  # policies' key_files resolve here: nothing


def _note(data: bytes) -> None:
    text, sigs = split_note(data)
    assert (text + "\n" + "".join(s.line() for s in sigs)).encode() == data


def _cosignature(data: bytes) -> None:
    _text, sigs = split_note(data)
    for sig in sigs:
        try:
            ts = cosignature_timestamp(sig)
        except LedgerError:
            continue
        assert ts.to_bytes(8, "big") == sig.signature[:8] and 0 <= ts < 1 << 64


def _checkpoint(data: bytes) -> None:
    cp = Checkpoint.from_text(data)
    assert cp.to_text().encode() == data
    assert Checkpoint.from_json(json.loads(json.dumps(cp.to_json()))) == cp


def _tlog_proof(data: bytes) -> None:
    proof = TlogProof.from_text(data)
    assert proof.to_text().encode() == data
    assert TlogProof.from_json(json.loads(json.dumps(proof.to_json()))) == proof


def _entry_bytes(data: bytes) -> None:
    entry = decode_entry(data)
    assert encode_entry(entry) == data


def _entry_json(data: bytes) -> None:
    """Any JSON a client sends: parsed strictly, its canonical bytes parse back the same."""
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return  # not JSON: the server's strict reader answers malformed_json
    entry = LogEntry.from_json(obj)
    canonical = encode_entry(entry)
    assert decode_entry(canonical) == entry
    assert encode_entry(decode_entry(canonical)) == canonical


def _tile_path(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return  # URL paths reach the parser as str
    ref = parse_tile_path(text)
    again = (entries_path(ref.index, ref.width) if ref.entries
             else tile_path(ref.level, ref.index, ref.width))
    assert again == text


def _tile_body(data: bytes) -> None:
    if not data:
        return
    count, body = data[0] % TILE_WIDTH + 1, data[1:]
    try:
        entries = decode_bundle(body, count)
    except LedgerError:
        pass
    else:
        assert len(entries) == count and encode_bundle(entries) == body
    try:
        hashes = split_tile(body, count)
    except LedgerError:
        return
    assert b"".join(hashes) == body


def _kernel_toml(data: bytes) -> None:
    spec = KernelSpec.parse(data)
    assert KernelSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec


def _trust_policy(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return  # policies are read as text
    policy = TrustPolicy.from_toml(text, base_dir=_EMPTY_DIR)
    assert len(policy.rules) >= 0


def _add_checkpoint(data: bytes) -> None:
    """A tlog-witness add-checkpoint body, as a log (or anyone) POSTs it to a witness."""
    req = AddCheckpoint.parse(data)
    assert req.encode() == data
    assert AddCheckpoint.parse(req.encode()) == req


def _witness_policy(data: bytes) -> None:
    """A witness policy file (Sigsum grammar): parsed, its canonical text parses the same."""
    policy = WitnessPolicy.parse(data)
    assert WitnessPolicy.parse(policy.to_text()) == policy
    assert WitnessPolicy.from_json(json.loads(json.dumps(policy.to_json()))) == policy


def _suite_entry(data: bytes) -> None:
    """A logged suite statement, as `ktl suite verify` reads it: signature verified, summary
    recomputed from the rows; its predicate round-trips."""
    claim = read_suite(data)
    assert SuitePredicate.from_json(claim.predicate.to_json()) == claim.predicate


TARGETS: dict[str, Callable[[bytes], None]] = {
    "note": _note,
    "cosignature": _cosignature,
    "checkpoint": _checkpoint,
    "tlog_proof": _tlog_proof,
    "entry_bytes": _entry_bytes,
    "entry_json": _entry_json,
    "tile_path": _tile_path,
    "tile_body": _tile_body,
    "kernel_toml": _kernel_toml,
    "trust_policy": _trust_policy,
    "add_checkpoint": _add_checkpoint,
    "witness_policy": _witness_policy,
    "suite_entry": _suite_entry,
}


def run_one(name: str, data: bytes) -> None:
    """Run target ``name``; our typed errors are the accepted way to reject input."""
    with contextlib.suppress(*TYPED):
        TARGETS[name](data)


def corpus(name: str) -> list[bytes]:
    """The checked-in seeds of a target."""
    folder = CORPUS / name
    return [p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()]
