"""The witness's pure core (`ledger.tlog.witness`): every framing error of an add-checkpoint
request with its own message, the spec's limits at their exact boundaries, and every
reason `decide` refuses to cosign, without a server in between (which answers 400 for
any `RequestError`, so a check deleted there would go unnoticed)."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from witness_support import FakeLog

from ledger.tlog.checkpoint import Checkpoint, sign_checkpoint
from ledger.tlog.merkle import EMPTY_ROOT
from ledger.tlog.note import NoteSigner
from ledger.tlog.witness import (
    MAX_PROOF_LINES,
    MAX_REQUEST_BYTES,
    AddCheckpoint,
    Cosign,
    Reject,
    RequestError,
    decide,
    encode_add_checkpoint,
    parse_size,
)

HASH_LINE = base64.b64encode(b"\x00" * 32)


def test_the_limits_are_the_specs() -> None:
    # C2SP tlog-witness: at most 63 proof lines; our body cap is 64 KiB
    assert (MAX_PROOF_LINES, MAX_REQUEST_BYTES) == (63, 65536)


def test_sizes_are_decimal_below_two_to_the_63() -> None:
    assert parse_size("0", "old size") == 0
    assert parse_size(str(2**63 - 1), "old size") == 2**63 - 1
    with pytest.raises(RequestError, match=r"^old size 9223372036854775808 is too large$"):
        parse_size(str(2**63), "old size")
    with pytest.raises(RequestError, match=r"^tree size '012' is not a decimal size"):
        parse_size("012", "tree size")


@pytest.mark.parametrize(("body", "message"), [
    (b"old 0\n", "request has no blank line between the proof and the checkpoint"),
    (b"old 0\n\xff\n\nx", "the old size and proof lines must be ASCII"),
    (b"new 0\n\nx", "the first line must be 'old <size>'"),
    (b"old 01\n\nx", "old size '01' is not a decimal size without leading zeros"),
    (b"old 0\n" + HASH_LINE + b"\nAAAA\n\nx", "consistency proof line 2 is not a 32-byte hash"),
    (b"old 0\n" + HASH_LINE + b"\n!!\n\nx", "consistency proof line 2"),
    (b"old 0\n\nnot a note", "the checkpoint is not a signed checkpoint note"),
])
def test_each_framing_error_says_what_is_wrong(body: bytes, message: str) -> None:
    with pytest.raises(RequestError) as info:
        AddCheckpoint.parse(body)
    assert str(info.value).startswith(message), str(info.value)


def test_a_body_that_is_not_bytes_is_refused() -> None:
    with pytest.raises(RequestError, match=r"^request body must be bytes$"):
        AddCheckpoint.parse("old 0\n\n")  # type: ignore[arg-type]


def test_an_old_size_above_two_to_the_63_is_refused_as_too_large() -> None:
    log = FakeLog().grow(1)
    with pytest.raises(RequestError, match=r"^old size 9223372036854775808 is too large$"):
        AddCheckpoint.parse(b"old 9223372036854775808\n\n" + log.note())


def test_the_body_limit_is_exact() -> None:
    """A body of exactly 64 KiB gets past the size check (and fails later, on its content);
    one byte more is refused before anything is parsed."""
    at_limit = b"old 0\n" + b"A" * (65536 - 6)
    with pytest.raises(RequestError, match="no blank line"):
        AddCheckpoint.parse(at_limit)
    with pytest.raises(RequestError, match=r"^request body is larger than 65536 bytes$"):
        AddCheckpoint.parse(at_limit + b"A")


def test_sixty_three_proof_lines_are_read_and_sixty_four_refused() -> None:
    log = FakeLog().grow(3)
    ok = AddCheckpoint.parse(b"old 1\n" + (HASH_LINE + b"\n") * 63 + b"\n" + log.note())
    assert len(ok.proof) == 63 and ok.old_size == 1
    with pytest.raises(RequestError, match=r"^more than 63 consistency proof lines$"):
        AddCheckpoint.parse(b"old 1\n" + (HASH_LINE + b"\n") * 64 + b"\n" + log.note())


def test_the_first_bad_proof_line_is_named_by_its_number() -> None:
    body = b"old 0\nAAAA\n" + HASH_LINE + b"\n\nx"
    with pytest.raises(RequestError, match=r"^consistency proof line 1 is not a 32-byte hash$"):
        AddCheckpoint.parse(body)


def test_an_old_size_beyond_the_checkpoint_is_refused() -> None:
    log = FakeLog().grow(3)
    with pytest.raises(RequestError,
                       match=r"^old size 4 is larger than the checkpoint size 3$"):
        AddCheckpoint.parse(b"old 4\n\n" + log.note())


def test_encoding_refuses_what_no_witness_could_parse() -> None:
    note = FakeLog().grow(1).note()
    for bad in (-1, True, 1.0, "1"):
        with pytest.raises(RequestError, match=r"^old size must be a non-negative integer$"):
            encode_add_checkpoint(bad, [], note)  # type: ignore[arg-type]
    assert encode_add_checkpoint(0, [b"\x00" * 32] * 63, note).count(b"\n") >= 64
    with pytest.raises(RequestError, match=r"^more than 63 consistency proof lines$"):
        encode_add_checkpoint(0, [b"\x00" * 32] * 64, note)


def _decide(log: FakeLog, body: bytes, held: Checkpoint | None) -> Cosign | Reject:
    return decide(AddCheckpoint.parse(body), [log.signer.verifier()], held)


def test_every_refusal_has_its_status_and_reason() -> None:
    log = FakeLog().grow(4)
    held = log.checkpoint()
    origin = repr(log.origin)
    assert decide(AddCheckpoint.parse(log.request(0)), [], None) == Reject(
        404, f"unknown log origin {origin}")
    impostor = NoteSigner(log.origin, Ed25519PrivateKey.from_private_bytes(b"\x55" * 32))
    got = _decide(log, log.request(0, signer=impostor), None)
    assert isinstance(got, Reject) and got.status == 403
    assert got.message.startswith(f"the checkpoint is not validly signed by a key trusted for "
                                  f"{origin}: ")
    assert _decide(log, log.request(0), held) == Reject(
        409, f"old size 0 is not the size 4 this witness holds for {origin}", 4)
    empty_wrong = sign_checkpoint(Checkpoint(log.origin, 0, b"\x01" * 32), log.signer)
    assert _decide(log, encode_add_checkpoint(0, [], empty_wrong), None) == Reject(
        422, "a checkpoint of size 0 must have the empty tree's root")
    assert _decide(log, encode_add_checkpoint(0, [EMPTY_ROOT], log.note()), None) == Reject(
        422, "old size 0 needs an empty consistency proof")
    fork = FakeLog(tag=b"x").grow(4)
    assert _decide(log, encode_add_checkpoint(4, [], fork.note()), held) == Reject(
        422, "checkpoint of size 4 differs from the one held (same size, different root or a "
             "non-empty proof)")
    same_with_proof = encode_add_checkpoint(4, [b"\x00" * 32], log.note())
    assert _decide(log, same_with_proof, held).status == 422  # type: ignore[union-attr]
    log.grow(3)
    got = _decide(log, encode_add_checkpoint(4, [], log.note()), held)
    assert isinstance(got, Reject) and got.status == 422
    assert got.message.startswith("consistency proof from size 4 to 7 does not verify: ")


def test_what_may_be_cosigned_is() -> None:
    log = FakeLog()
    assert isinstance(_decide(log, log.request(0), None), Cosign)  # the empty tree
    log.grow(4)
    first = _decide(log, log.request(0), None)
    assert isinstance(first, Cosign) and first.signed.checkpoint == log.checkpoint()
    held = log.checkpoint()
    assert isinstance(_decide(log, log.request(4), held), Cosign)  # the same one again
    log.grow(5)
    assert isinstance(_decide(log, log.request(4), held), Cosign)
