"""Trusted-state store and rollback/fork detection (client.state, client.trust)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from client_fakes import MemoryLog
from hypothesis import given, settings
from hypothesis import strategies as st

from attest.keys import generate_private_key
from client import InputError, LogMisbehaviour, VerificationFailed
from client.state import LogRef, Pin, TrustedState, atomic_write, origin_slug
from client.trust import (
    Accepted,
    Announced,
    KeyChoice,
    LogTrust,
    Refused,
    choose_log_key,
    extend_trust,
    judge,
    load_verifier,
    open_signed,
    proof_needed,
    refuse,
    verifier_name,
)
from ledger import LedgerError
from ledger.tlog.checkpoint import SignedCheckpoint
from ledger.tlog.note import NoteSigner


def _grow(log: MemoryLog, n: int, tag: str) -> None:
    for i in range(n):
        log._append(f"{tag}-{i}".encode())


def _cp(st: TrustedState, log: MemoryLog) -> bytes | None:
    return st.checkpoint(LogRef(log.origin, load_verifier(log.verifier_key).key_string()))


def test_state_round_trip_and_origin_isolation(tmp_path: Path) -> None:
    st = TrustedState(tmp_path)
    a, b = LogRef("a.example/log", "k"), LogRef("b.example/log", "k")
    assert st.checkpoint(a) is None
    st.store_checkpoint(a, b"note-a")
    assert st.checkpoint(a) == b"note-a"
    assert st.checkpoint(b) is None
    # (origin, key): another key is another log's state
    assert st.checkpoint(LogRef("a.example/log", "k2")) is None
    assert origin_slug("a/b") != origin_slug("a_b")


def test_pins_round_trip_list_and_forget(tmp_path: Path) -> None:
    st = TrustedState(tmp_path)
    pin = Pin("https://a.example/log", "a.example/log", "a.example/log+01020304+AQ==", "tofu",
              "2026-01-01T00:00:00Z")
    assert Pin.from_json(pin.to_json()) == pin
    st.set_pin(pin)
    assert st.pin("HTTPS://A.example/log/") == pin  # scheme, host and trailing slash normalized
    assert st.pin("https://a.example/other") is None
    assert st.pins() == [pin]
    assert st.forget("https://a.example/log") == pin
    assert st.pin("https://a.example/log") is None and st.pins() == []
    assert st.forget("https://a.example/log") is None
    with pytest.raises(InputError, match="http:// or https://"):
        st.pin("ftp://a.example/log")
    with pytest.raises(InputError):
        Pin.from_json({**pin.to_json(), "how": "guessed"})


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    p = tmp_path / "sub" / "f"
    atomic_write(p, b"one")
    atomic_write(p, b"two-longer")
    assert p.read_bytes() == b"two-longer"
    assert [x.name for x in p.parent.iterdir()] == ["f"]


def test_reconcile_first_same_grew(tmp_path: Path) -> None:
    log = MemoryLog()
    st = TrustedState(tmp_path)
    v = load_verifier(log.verifier_key)
    _grow(log, 3, "x")
    cp = open_signed(log.checkpoint(), v, log.origin)
    assert extend_trust(LogTrust(st, v, log.origin), cp, log.consistency_proof).outcome == "first"
    assert extend_trust(LogTrust(st, v, log.origin), cp, log.consistency_proof).outcome == "same"
    _grow(log, 5, "y")
    cp2 = open_signed(log.checkpoint(), v, log.origin)
    r = extend_trust(LogTrust(st, v, log.origin), cp2, log.consistency_proof)
    assert (r.outcome, r.trusted_size, r.new_size) == ("grew", 3, 8)
    assert _cp(st, log) == log.checkpoint()


def test_rollback_is_reported_with_both_checkpoints(tmp_path: Path) -> None:
    log = MemoryLog()
    st = TrustedState(tmp_path)
    v = load_verifier(log.verifier_key)
    _grow(log, 6, "x")
    extend_trust(LogTrust(st, v, log.origin), open_signed(log.checkpoint(), v), log.consistency_proof)
    old = log.note_at(4)
    with pytest.raises(LogMisbehaviour, match="ROLLBACK") as ei:
        extend_trust(LogTrust(st, v, log.origin), open_signed(old, v), log.consistency_proof)
    assert ei.value.evidence_path is not None
    text = ei.value.evidence_path.read_bytes()
    assert log.checkpoint() in text and old in text
    assert _cp(st, log) == log.checkpoint()  # nothing stored lost


def test_fork_is_reported(tmp_path: Path) -> None:
    log = MemoryLog()
    _grow(log, 5, "x")
    twin = log.fork()
    _grow(log, 3, "honest")
    _grow(twin, 3, "evil")
    st = TrustedState(tmp_path)
    v = load_verifier(log.verifier_key)
    extend_trust(LogTrust(st, v, log.origin), open_signed(log.checkpoint(), v), log.consistency_proof)
    with pytest.raises(LogMisbehaviour, match="FORK") as ei:
        extend_trust(LogTrust(st, v, log.origin), open_signed(twin.checkpoint(), v), twin.consistency_proof)
    assert ei.value.evidence_path is not None and ei.value.evidence_path.exists()
    # A larger forked tree is caught by its consistency proof too.
    _grow(twin, 4, "more")
    with pytest.raises(LogMisbehaviour, match="FORK"):
        extend_trust(LogTrust(st, v, log.origin), open_signed(twin.checkpoint(), v), twin.consistency_proof)


def test_wrong_key_checkpoint_rejected() -> None:
    log = MemoryLog()
    _grow(log, 2, "x")
    imposter = NoteSigner(log.origin, generate_private_key())
    v = load_verifier(imposter.verifier_key_string())
    with pytest.raises(VerificationFailed, match="checkpoint signature"):
        open_signed(log.checkpoint(), v, log.origin)


URL = "http://log.example:8080"


def test_key_choice_tofu_then_pinned(tmp_path: Path) -> None:
    st = TrustedState(tmp_path)
    log = MemoryLog()
    c = choose_log_key(st, URL, Announced(log.origin, log.verifier_key, None), None)
    assert c.how == "tofu" and "FIRST USE" in c.describe()
    pin = st.pin(URL)
    assert pin is not None and (pin.origin, pin.log_key, pin.how) == (
        log.origin, log.verifier_key, "tofu")
    again = choose_log_key(st, URL + "/", Announced(log.origin, log.verifier_key, None), None)
    assert (again.key, again.how) == (log.verifier_key, "pinned")
    with pytest.raises(InputError, match="pass --log-key"):
        choose_log_key(st, "http://other.example", Announced("o", None, None), None)
    with pytest.raises(InputError, match="not a valid verifier key"):
        load_verifier("garbage")


def test_given_key_is_pinned_when_nothing_was(tmp_path: Path) -> None:
    """Attack (mutant): --log-key on a fresh URL that never pins, so the next run trusts TOFU."""
    st = TrustedState(tmp_path)
    log, evil = MemoryLog(), MemoryLog()
    c = choose_log_key(st, URL, Announced(log.origin, evil.verifier_key, None), log.verifier_key)
    assert (c.key, c.how) == (log.verifier_key, "given")
    pin = st.pin(URL)
    assert pin is not None and (pin.log_key, pin.how) == (log.verifier_key, "given")
    # the next run without --log-key must use the given key, not the (evil) advertised one
    with pytest.raises(LogMisbehaviour, match="PIN MISMATCH"):
        choose_log_key(st, URL, Announced(log.origin, evil.verifier_key, None), None)


def test_given_key_never_overwrites_a_pin(tmp_path: Path) -> None:
    """Attack (mutant): --log-key with another key replaces the pinned one."""
    st = TrustedState(tmp_path)
    log, other = MemoryLog(), MemoryLog()
    choose_log_key(st, URL, Announced(log.origin, log.verifier_key, None), None)
    before = st.pin(URL)
    with pytest.raises(VerificationFailed, match="not the key pinned") as ei:
        choose_log_key(st, URL, Announced(log.origin, log.verifier_key, None), other.verifier_key)
    assert "ktl trust forget" in str(ei.value) and ei.value.exit_code == 1
    pin = st.pin(URL)
    assert pin is not None and pin.log_key == log.verifier_key
    same = choose_log_key(st, URL, Announced(log.origin, log.verifier_key, None), log.verifier_key)
    assert same.how == "given"
    assert st.pin(URL) == before  # the pin file is never rewritten by --log-key


def test_new_origin_or_key_at_a_pinned_url_is_refused_with_evidence(tmp_path: Path) -> None:
    """Attack 1: the URL that served log A now serves log B (new origin and key)."""
    st = TrustedState(tmp_path)
    a = MemoryLog("example.org/kernels")
    b = MemoryLog("example.org/kernels/v2")
    _grow(a, 2, "a")
    _grow(b, 3, "b")
    choose_log_key(st, URL, Announced(a.origin, a.verifier_key, a.checkpoint()), None)
    va = load_verifier(a.verifier_key)
    extend_trust(LogTrust(st, va, a.origin), open_signed(a.checkpoint(), va), a.consistency_proof)
    with pytest.raises(LogMisbehaviour, match=r"PIN MISMATCH.*origin 'example.org/kernels/v2'") as ei:
        choose_log_key(st, URL, Announced(b.origin, b.verifier_key, b.checkpoint()), None)
    assert ei.value.evidence_path is not None
    text = ei.value.evidence_path.read_bytes()
    assert a.checkpoint() in text and b.checkpoint() in text and b"pin-mismatch" in text
    # same origin, new key
    b2 = MemoryLog(a.origin)
    with pytest.raises(LogMisbehaviour, match=r"PIN MISMATCH.*announces key"):
        choose_log_key(st, URL, Announced(b2.origin, b2.verifier_key, None), None)
    pin = st.pin(URL)
    assert pin is not None and (pin.origin, pin.log_key) == (a.origin, a.verifier_key)


def test_stored_checkpoint_under_another_key_is_refused(tmp_path: Path) -> None:
    """Attack (mutant): a trusted checkpoint that does not verify under the key in use."""
    st = TrustedState(tmp_path)
    log = MemoryLog()
    _grow(log, 3, "x")
    imposter = MemoryLog(log.origin)
    _grow(imposter, 5, "y")
    st.store_checkpoint(LogRef(log.origin, load_verifier(log.verifier_key).key_string()),
                        imposter.checkpoint())
    v = load_verifier(log.verifier_key)
    with pytest.raises(VerificationFailed, match="does not verify under that key"):
        extend_trust(LogTrust(st, v, log.origin), open_signed(log.checkpoint(), v), log.consistency_proof)
    assert _cp(st, log) == imposter.checkpoint()  # nothing replaced


def test_judge_is_pure_and_typed() -> None:
    log = MemoryLog()
    v = load_verifier(log.verifier_key)
    _grow(log, 4, "x")
    small = open_signed(log.checkpoint(), v)
    _grow(log, 3, "y")
    big = open_signed(log.checkpoint(), v)
    proof = log.consistency_proof(4, 7)
    assert judge(None, big, None) == Accepted("first", 0, 7)
    assert judge(small, small, None) == Accepted("same", 4, 4)
    assert judge(small, big, proof) == Accepted("grew", 4, 7)
    assert isinstance(judge(big, small, None), Refused)
    assert judge(big, small, None).kind == "rollback"  # type: ignore[union-attr]
    assert judge(small, big, None) == Refused("fork", "consistency: no proof that tree 7 extends "
                                                      "tree 4")
    bad = judge(small, big, [bytes(32)] * len(proof))
    assert isinstance(bad, Refused) and bad.kind == "fork"
    gone = judge(big, None, None)
    assert isinstance(gone, Refused) and gone.kind == "rollback"


def test_a_quorum_check_runs_before_anything_is_stored(tmp_path: Path) -> None:
    st = TrustedState(tmp_path)
    log = MemoryLog()
    v = load_verifier(log.verifier_key)
    _grow(log, 2, "x")

    def no_witnesses(cp: object) -> None:
        raise VerificationFailed("witnesses: 0 of 1 required cosignatures")

    with pytest.raises(VerificationFailed, match="witnesses"):
        extend_trust(LogTrust(st, v, log.origin, no_witnesses),
                     open_signed(log.checkpoint(), v), log.consistency_proof)
    assert _cp(st, log) is None


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=5),
       fork_at=st.integers(min_value=0, max_value=60), extra=st.integers(min_value=1, max_value=40))
def test_honest_growth_always_accepted_and_any_fork_refused(
    tmp_path_factory: pytest.TempPathFactory, steps: list[int], fork_at: int, extra: int
) -> None:
    st_ = TrustedState(tmp_path_factory.mktemp("home"))
    log = MemoryLog()
    v = load_verifier(log.verifier_key)
    for n, grow in enumerate(steps):
        _grow(log, grow, f"s{n}")
        r = extend_trust(LogTrust(st_, v, log.origin), open_signed(log.checkpoint(), v), log.consistency_proof)
        assert r.new_size == len(log.entries)
    # a twin with the same key that shares only the first `fork_at` entries
    twin = MemoryLog(log.origin, log.signer)
    for e in log.entries[: min(fork_at, len(log.entries) - 1)]:
        twin._append(e)
    _grow(twin, len(log.entries) - len(twin.entries) + extra, "fork")
    assert twin.entries[: len(log.entries)] != log.entries
    with pytest.raises(LogMisbehaviour):
        extend_trust(LogTrust(st_, v, log.origin), open_signed(twin.checkpoint(), v), twin.consistency_proof)


def _cps(log: MemoryLog, *sizes: int) -> list[SignedCheckpoint]:
    v = load_verifier(log.verifier_key)
    return [open_signed(log.note_at(n), v, log.origin) for n in sizes]


def test_key_choice_words_the_cli_prints(tmp_path: Path) -> None:
    """`ktl` prints describe(); each way a key came to be trusted has its own words."""
    assert KeyChoice("k", "given").describe() == "log key given with --log-key"
    assert KeyChoice("k", "pinned").describe() == (
        "log key pinned earlier for this URL in the trusted-state store")
    assert KeyChoice("k", "tofu").describe() == (
        "log key trusted on FIRST USE (TOFU) and pinned for this URL; pass --log-key to pin it "
        "yourself")


def test_tofu_never_pins_an_unusable_announced_key(tmp_path: Path) -> None:
    """Attack: a log announces a garbage key on first use; it must not become the pin."""
    st_ = TrustedState(tmp_path)
    with pytest.raises(InputError, match="not a valid verifier key"):
        choose_log_key(st_, URL, Announced("o.example/log", "o.example/log+garbage", None), None)
    assert st_.pin(URL) is None
    with pytest.raises(InputError, match="not a valid verifier key"):
        choose_log_key(st_, URL, Announced("o.example/log", None, None), "garbage")
    assert st_.pin(URL) is None


def test_pin_records_when_it_was_made_and_a_silent_log_keeps_the_pin(tmp_path: Path) -> None:
    st_ = TrustedState(tmp_path)
    log = MemoryLog()
    choose_log_key(st_, URL, Announced(log.origin, log.verifier_key, None), None)
    pin = st_.pin(URL)
    assert pin is not None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", pin.pinned_at), pin.pinned_at
    # a log that announces no key at a pinned URL is checked against the pin, not refused
    c = choose_log_key(st_, URL, Announced(log.origin, None, None), None)
    assert (c.key, c.how) == (log.verifier_key, "pinned")


def test_proof_needed_boundaries() -> None:
    log = MemoryLog()
    _grow(log, 7, "x")
    empty, one, four, seven = _cps(log, 0, 1, 4, 7)
    assert proof_needed(None, seven) is None and proof_needed(four, None) is None
    assert proof_needed(empty, seven) is None  # nothing to be consistent with
    assert proof_needed(one, seven) == (1, 7)
    assert proof_needed(four, seven) == (4, 7)
    assert proof_needed(seven, seven) is None and proof_needed(seven, four) is None


def test_judge_every_edge_exactly() -> None:
    """`judge` of the empty tree, of the same checkpoint, of a vanished log, word for word."""
    log = MemoryLog()
    _grow(log, 7, "x")
    empty, one, four, seven = _cps(log, 0, 1, 4, 7)
    assert judge(None, None, None) == Accepted("first", 0, 0)
    assert judge(None, seven, None) == Accepted("first", 0, 7)
    assert judge(empty, None, None) == Accepted("same", 0, 0)
    assert judge(one, None, None) == Refused(
        "rollback", "the log now shows no checkpoint at all, but size 1 was verified earlier")
    assert judge(seven, seven, None) == Accepted("same", 7, 7)
    assert judge(empty, seven, None) == Accepted("grew", 0, 7)  # no proof needed from 0
    assert judge(seven, four, None) == Refused(
        "rollback", "the log now shows tree size 4, but size 7 was verified earlier")
    assert judge(seven, four, None, "the receipt's size") == Refused(
        "rollback", "the log now shows tree size 4, but the receipt's size 7 was verified earlier")
    assert judge(one, seven, None) == Refused(
        "fork", "consistency: no proof that tree 7 extends tree 1")
    assert judge(one, seven, log.consistency_proof(1, 7)) == Accepted("grew", 1, 7)


def _refusal(exc: pytest.ExceptionInfo[LogMisbehaviour]) -> tuple[str, bytes]:
    assert exc.value.evidence_path is not None
    return str(exc.value), exc.value.evidence_path.read_bytes()


def test_refusal_message_and_evidence_file_exactly(tmp_path: Path) -> None:
    """The evidence file holds both notes in their sections; a missing one is an empty section."""
    st_ = TrustedState(tmp_path)
    log = MemoryLog()
    v = load_verifier(log.verifier_key)
    _grow(log, 3, "x")
    extend_trust(LogTrust(st_, v, log.origin), open_signed(log.checkpoint(), v), log.consistency_proof)
    with pytest.raises(LogMisbehaviour) as ei:
        extend_trust(LogTrust(st_, v, log.origin), None, log.consistency_proof)
    msg, text = _refusal(ei)
    detail = "the log now shows no checkpoint at all, but size 3 was verified earlier"
    assert msg.startswith(f"ROLLBACK of log {log.origin!r}: {detail}. Evidence: ")
    assert text.startswith(f"ktl evidence: rollback\norigin: {log.origin}\n".encode())
    assert text.endswith(
        b"-----BEGIN TRUSTED CHECKPOINT-----\n" + log.note_at(3) + b"-----END TRUSTED CHECKPOINT-----\n"
        b"-----BEGIN CONFLICTING CHECKPOINT-----\n-----END CONFLICTING CHECKPOINT-----\n")
    # refuse() with nothing stored for the origin: an empty trusted section
    err = refuse(TrustedState(tmp_path / "fresh"), log.origin, "pin-mismatch", None, "why")
    assert str(err).startswith(f"PIN MISMATCH of log {log.origin!r}: why. Evidence: ")
    assert err.evidence_path is not None
    assert err.evidence_path.read_bytes().endswith(
        b"-----BEGIN TRUSTED CHECKPOINT-----\n-----END TRUSTED CHECKPOINT-----\n"
        b"-----BEGIN CONFLICTING CHECKPOINT-----\n-----END CONFLICTING CHECKPOINT-----\n")


def test_fork_label_and_a_log_that_cannot_prove_growth(tmp_path: Path) -> None:
    """Attack: a log that grew but fails to serve a consistency proof is refused as a fork."""
    st_ = TrustedState(tmp_path)
    log = MemoryLog()
    v = load_verifier(log.verifier_key)
    _grow(log, 3, "x")
    extend_trust(LogTrust(st_, v, log.origin), open_signed(log.checkpoint(), v), log.consistency_proof)
    _grow(log, 2, "y")

    def no_proof(old: int, new: int) -> Sequence[bytes]:
        raise LedgerError(f"no proof {old}->{new} here")

    with pytest.raises(LogMisbehaviour) as ei:
        extend_trust(LogTrust(st_, v, log.origin), open_signed(log.checkpoint(), v), no_proof)
    msg, text = _refusal(ei)
    assert msg.startswith(f"FORK of log {log.origin!r}: consistency: no valid proof that tree 5 "
                          "extends tree 3: no proof 3->5 here. Evidence: ")
    assert text.startswith(b"ktl evidence: fork\n")
    assert _cp(st_, log) == log.note_at(3)


def test_rollback_below_a_receipt_is_refused_and_never_stored(tmp_path: Path) -> None:
    """Attack: a receipt showed size 6; the log now serves size 4 (still above the stored 3).

    With the check against `also` skipped, size 4 would be stored as trusted.
    """
    st_ = TrustedState(tmp_path)
    log = MemoryLog()
    v = load_verifier(log.verifier_key)
    _grow(log, 6, "x")
    three, four, six = _cps(log, 3, 4, 6)
    extend_trust(LogTrust(st_, v, log.origin), three, log.consistency_proof)
    with pytest.raises(LogMisbehaviour) as ei:
        extend_trust(LogTrust(st_, v, log.origin), four, log.consistency_proof,
                     also=[(six, "the receipt's size")])
    msg, text = _refusal(ei)
    assert msg.startswith(f"ROLLBACK of log {log.origin!r}: the log now shows tree size 4, but "
                          "the receipt's size 6 was verified earlier. Evidence: ")
    # the evidence holds the receipt's checkpoint it contradicts, not the stored one
    assert (b"-----BEGIN TRUSTED CHECKPOINT-----\n" + log.note_at(6)) in text
    assert (b"-----BEGIN CONFLICTING CHECKPOINT-----\n" + log.note_at(4)) in text
    assert _cp(st_, log) == log.note_at(3)


def test_rollback_message_names_the_stored_size(tmp_path: Path) -> None:
    st_ = TrustedState(tmp_path)
    log = MemoryLog()
    v = load_verifier(log.verifier_key)
    _grow(log, 6, "x")
    four, six = _cps(log, 4, 6)
    extend_trust(LogTrust(st_, v, log.origin), six, log.consistency_proof)
    with pytest.raises(LogMisbehaviour) as ei:
        extend_trust(LogTrust(st_, v, log.origin), four, log.consistency_proof)
    assert str(ei.value).startswith(
        f"ROLLBACK of log {log.origin!r}: the log now shows tree size 4, but size 6 was "
        "verified earlier. Evidence: ")


def test_store_false_checks_but_stores_nothing(tmp_path: Path) -> None:
    st_ = TrustedState(tmp_path)
    log = MemoryLog()
    v = load_verifier(log.verifier_key)
    _grow(log, 5, "x")
    three, five = _cps(log, 3, 5)
    assert extend_trust(LogTrust(st_, v, log.origin), three, log.consistency_proof, store=False) == (
        Accepted("first", 0, 3))
    assert _cp(st_, log) is None
    extend_trust(LogTrust(st_, v, log.origin), three, log.consistency_proof)
    assert extend_trust(LogTrust(st_, v, log.origin), five, log.consistency_proof, store=False) == (
        Accepted("grew", 3, 5))
    assert _cp(st_, log) == log.note_at(3)


def test_open_signed_names_the_key_it_expected() -> None:
    log = MemoryLog()
    _grow(log, 2, "x")
    imposter = NoteSigner("imposter.example/key", generate_private_key())
    v = load_verifier(imposter.verifier_key_string())
    assert verifier_name(v) == "imposter.example/key"
    with pytest.raises(VerificationFailed, match=r"by the log key 'imposter\.example/key'"):
        open_signed(log.checkpoint(), v)


def _legacy(home: Path, origin: str, note: bytes) -> None:
    """The state an older ktl left: one trusted checkpoint per origin."""
    from client.state import origin_slug

    folder = home / "logs" / origin_slug(origin)
    folder.mkdir(parents=True)
    (folder / "origin").write_text(origin)
    (folder / "checkpoint").write_bytes(note)


def test_a_legacy_per_origin_checkpoint_is_taken_over_only_when_it_verifies(
        tmp_path: Path) -> None:
    log = MemoryLog()
    _grow(log, 5, "x")
    v = load_verifier(log.verifier_key)
    st_ = TrustedState(tmp_path / "a")
    _legacy(st_.home, log.origin, log.note_at(5))
    # The legacy checkpoint still protects against a rollback...
    with pytest.raises(LogMisbehaviour, match="ROLLBACK"):
        extend_trust(LogTrust(st_, v, log.origin), open_signed(log.note_at(3), v), log.consistency_proof)
    assert _cp(st_, log) == log.note_at(5)  # ... and is now this log's own
    assert extend_trust(LogTrust(st_, v, log.origin), open_signed(log.checkpoint(), v),
                        log.consistency_proof).outcome == "same"
    # An impostor's checkpoint under the same origin (another key) is not this log's state.
    imposter = MemoryLog(log.origin)
    _grow(imposter, 9, "y")
    st2 = TrustedState(tmp_path / "b")
    _legacy(st2.home, log.origin, imposter.checkpoint())
    assert extend_trust(LogTrust(st2, v, log.origin), open_signed(log.checkpoint(), v),
                        log.consistency_proof).outcome == "first"
    assert _cp(st2, log) == log.checkpoint()
