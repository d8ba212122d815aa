"""Trusted-state store and rollback/fork detection (client.state, client.trust)."""

from __future__ import annotations

from pathlib import Path

import pytest
from client_fakes import MemoryLog
from hypothesis import given, settings
from hypothesis import strategies as st

from attest.keys import generate_private_key
from client import InputError, LogMisbehaviour, VerificationFailed
from client.state import Pin, TrustedState, atomic_write, origin_slug
from client.trust import (
    Accepted,
    Announced,
    Refused,
    choose_log_key,
    extend_trust,
    judge,
    load_verifier,
    open_signed,
)
from ledger.note import NoteSigner


def _grow(log: MemoryLog, n: int, tag: str) -> None:
    for i in range(n):
        log._append(f"{tag}-{i}".encode())


def test_state_round_trip_and_origin_isolation(tmp_path: Path) -> None:
    st = TrustedState(tmp_path)
    assert st.checkpoint("a.example/log") is None
    st.store_checkpoint("a.example/log", b"note-a")
    assert st.checkpoint("a.example/log") == b"note-a"
    assert st.checkpoint("b.example/log") is None
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
    assert extend_trust(st, v, log.origin, cp, log.consistency_proof).outcome == "first"
    assert extend_trust(st, v, log.origin, cp, log.consistency_proof).outcome == "same"
    _grow(log, 5, "y")
    cp2 = open_signed(log.checkpoint(), v, log.origin)
    r = extend_trust(st, v, log.origin, cp2, log.consistency_proof)
    assert (r.outcome, r.trusted_size, r.new_size) == ("grew", 3, 8)
    assert st.checkpoint(log.origin) == log.checkpoint()


def test_rollback_is_reported_with_both_checkpoints(tmp_path: Path) -> None:
    log = MemoryLog()
    st = TrustedState(tmp_path)
    v = load_verifier(log.verifier_key)
    _grow(log, 6, "x")
    extend_trust(st, v, log.origin, open_signed(log.checkpoint(), v), log.consistency_proof)
    old = log.note_at(4)
    with pytest.raises(LogMisbehaviour, match="ROLLBACK") as ei:
        extend_trust(st, v, log.origin, open_signed(old, v), log.consistency_proof)
    assert ei.value.evidence_path is not None
    text = ei.value.evidence_path.read_bytes()
    assert log.checkpoint() in text and old in text
    assert st.checkpoint(log.origin) == log.checkpoint()  # nothing stored lost


def test_fork_is_reported(tmp_path: Path) -> None:
    log = MemoryLog()
    _grow(log, 5, "x")
    twin = log.fork()
    _grow(log, 3, "honest")
    _grow(twin, 3, "evil")
    st = TrustedState(tmp_path)
    v = load_verifier(log.verifier_key)
    extend_trust(st, v, log.origin, open_signed(log.checkpoint(), v), log.consistency_proof)
    with pytest.raises(LogMisbehaviour, match="FORK") as ei:
        extend_trust(st, v, log.origin, open_signed(twin.checkpoint(), v), twin.consistency_proof)
    assert ei.value.evidence_path is not None and ei.value.evidence_path.exists()
    # A larger forked tree is caught by its consistency proof too.
    _grow(twin, 4, "more")
    with pytest.raises(LogMisbehaviour, match="FORK"):
        extend_trust(st, v, log.origin, open_signed(twin.checkpoint(), v), twin.consistency_proof)


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
    extend_trust(st, va, a.origin, open_signed(a.checkpoint(), va), a.consistency_proof)
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
    st.store_checkpoint(log.origin, imposter.checkpoint())
    v = load_verifier(log.verifier_key)
    with pytest.raises(VerificationFailed, match="does not verify under the log key in use"):
        extend_trust(st, v, log.origin, open_signed(log.checkpoint(), v), log.consistency_proof)
    assert st.checkpoint(log.origin) == imposter.checkpoint()  # nothing replaced


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
        extend_trust(st, v, log.origin, open_signed(log.checkpoint(), v), log.consistency_proof,
                     quorum=no_witnesses)
    assert st.checkpoint(log.origin) is None


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
        r = extend_trust(st_, v, log.origin, open_signed(log.checkpoint(), v), log.consistency_proof)
        assert r.new_size == len(log.entries)
    # a twin with the same key that shares only the first `fork_at` entries
    twin = MemoryLog(log.origin, log.signer)
    for e in log.entries[: min(fork_at, len(log.entries) - 1)]:
        twin._append(e)
    _grow(twin, len(log.entries) - len(twin.entries) + extra, "fork")
    assert twin.entries[: len(log.entries)] != log.entries
    with pytest.raises(LogMisbehaviour):
        extend_trust(st_, v, log.origin, open_signed(twin.checkpoint(), v), twin.consistency_proof)
