"""Trusted-state store and rollback/fork detection (client.state, client.trust)."""

from __future__ import annotations

from pathlib import Path

import pytest
from client_fakes import MemoryLog
from hypothesis import given, settings
from hypothesis import strategies as st

from attest.keys import generate_private_key
from client import InputError, LogMisbehaviour, VerificationFailed
from client.state import TrustedState, atomic_write, origin_slug
from client.trust import choose_log_key, load_verifier, open_signed, reconcile
from ledger.note import NoteSigner


def _grow(log: MemoryLog, n: int, tag: str) -> None:
    for i in range(n):
        log._append(f"{tag}-{i}".encode())


def test_state_round_trip_and_origin_isolation(tmp_path: Path) -> None:
    st = TrustedState(tmp_path)
    assert st.checkpoint("a.example/log") is None
    st.store_checkpoint("a.example/log", b"note-a")
    st.pin_log_key("a.example/log", "a.example/log+01020304+AQ==")
    assert st.checkpoint("a.example/log") == b"note-a"
    assert st.log_key("a.example/log") == "a.example/log+01020304+AQ=="
    assert st.checkpoint("b.example/log") is None
    assert origin_slug("a/b") != origin_slug("a_b")


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
    assert reconcile(st, v, cp, log.consistency_proof).outcome == "first"
    assert reconcile(st, v, cp, log.consistency_proof).outcome == "same"
    _grow(log, 5, "y")
    cp2 = open_signed(log.checkpoint(), v, log.origin)
    r = reconcile(st, v, cp2, log.consistency_proof)
    assert (r.outcome, r.trusted_size, r.new_size) == ("grew", 3, 8)
    assert st.checkpoint(log.origin) == log.checkpoint()


def test_rollback_is_reported_with_both_checkpoints(tmp_path: Path) -> None:
    log = MemoryLog()
    st = TrustedState(tmp_path)
    v = load_verifier(log.verifier_key)
    _grow(log, 6, "x")
    reconcile(st, v, open_signed(log.checkpoint(), v), log.consistency_proof)
    old = log.note_at(4)
    with pytest.raises(LogMisbehaviour, match="ROLLBACK") as ei:
        reconcile(st, v, open_signed(old, v), log.consistency_proof)
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
    reconcile(st, v, open_signed(log.checkpoint(), v), log.consistency_proof)
    with pytest.raises(LogMisbehaviour, match="FORK") as ei:
        reconcile(st, v, open_signed(twin.checkpoint(), v), twin.consistency_proof)
    assert ei.value.evidence_path is not None and ei.value.evidence_path.exists()
    # A larger forked tree is caught by its consistency proof too.
    _grow(twin, 4, "more")
    with pytest.raises(LogMisbehaviour, match="FORK"):
        reconcile(st, v, open_signed(twin.checkpoint(), v), twin.consistency_proof)


def test_wrong_key_checkpoint_rejected() -> None:
    log = MemoryLog()
    _grow(log, 2, "x")
    imposter = NoteSigner(log.origin, generate_private_key())
    v = load_verifier(imposter.verifier_key_string())
    with pytest.raises(VerificationFailed, match="checkpoint signature"):
        open_signed(log.checkpoint(), v, log.origin)


def test_key_choice_given_pinned_tofu(tmp_path: Path) -> None:
    st = TrustedState(tmp_path)
    c = choose_log_key(st, "o", None, "o+00000000+AQ==")
    assert c.how == "tofu" and "FIRST USE" in c.describe()
    assert choose_log_key(st, "o", None, "o+11111111+AQ==") .key == "o+00000000+AQ=="
    assert choose_log_key(st, "o", "o+22222222+AQ==", None).how == "given"
    with pytest.raises(InputError):
        choose_log_key(st, "other", None, None)
    with pytest.raises(InputError, match="not a valid verifier key"):
        load_verifier("garbage")


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
        r = reconcile(st_, v, open_signed(log.checkpoint(), v), log.consistency_proof)
        assert r.new_size == len(log.entries)
    # a twin with the same key that shares only the first `fork_at` entries
    twin = MemoryLog(log.origin, log.signer)
    for e in log.entries[: min(fork_at, len(log.entries) - 1)]:
        twin._append(e)
    _grow(twin, len(log.entries) - len(twin.entries) + extra, "fork")
    assert twin.entries[: len(log.entries)] != log.entries
    with pytest.raises(LogMisbehaviour):
        reconcile(st_, v, open_signed(twin.checkpoint(), v), twin.consistency_proof)
