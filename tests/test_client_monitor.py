"""client.monitor over an in-memory log that serves real tiles (ledger.tlog.tiles): releases,
resume after interruption, tampered bundles and tiles, invalid entries."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from client_fakes import MemoryLog, session_of

from attest import examples
from attest.entry import encode_entry, make_entry
from attest.keys import generate_private_key, keyid
from attest.policy import TrustPolicy
from attest.predicates import KERNEL_V1, parse_predicate
from attest.statement import make_statement
from client import LogMisbehaviour, VerificationFailed
from client.monitor import MonitorReport, load_monitor_state, run_monitor
from client.state import TrustedState
from client.trust import load_verifier

KEY = generate_private_key()


def _kernel_entry(name: str, version: str) -> bytes:
    body = examples.kernel()
    body.update(name=name, version=version)
    stmt = make_statement(name, examples.digest(name + version), parse_predicate(KERNEL_V1, body))
    return encode_entry(make_entry(stmt, [KEY]))


def _fill(log: MemoryLog, start: int, stop: int) -> None:
    for i in range(start, stop):
        log.submit(_kernel_entry(f"acme/k{i % 3}", f"1.{i}.0"))


def _run(log: MemoryLog, tmp: Path,
         on_progress: Callable[[int, int], None] | None = None) -> MonitorReport:
    return run_monitor(session_of(log, TrustedState(tmp / "home")), tmp / "state.json",
                       on_progress=on_progress)


def test_releases_per_name_and_resume_across_partial_bundles(tmp_path: Path) -> None:
    log = MemoryLog()
    _fill(log, 0, 300)
    first = _run(log, tmp_path)
    assert first.entries_checked == 300 and not first.violations
    st = load_monitor_state(tmp_path / "state.json", log.origin)
    assert st.next_index == 300
    assert {r.name: r.version for r in st.releases} == {
        "acme/k0": "1.297.0", "acme/k1": "1.298.0", "acme/k2": "1.299.0"}
    _fill(log, 300, 600)  # bundle 1 was partial (44 entries), is now full
    second = _run(log, tmp_path)
    assert (second.start_index, second.entries_checked) == (300, 300)
    assert [f.index for f in second.findings][:2] == [300, 301]


def test_interrupted_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    log = MemoryLog()
    _fill(log, 0, 600)

    def stop_after_first_bundle(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(log, tmp_path, on_progress=stop_after_first_bundle)
    assert load_monitor_state(tmp_path / "state.json", log.origin).next_index == 256
    rest = _run(log, tmp_path)
    assert (rest.start_index, rest.entries_checked) == (256, 344)


def test_swapped_entry_in_bundle_is_caught(tmp_path: Path) -> None:
    log = MemoryLog()
    _fill(log, 0, 10)
    other = _kernel_entry("acme/evil", "6.6.6")

    def swap(path: str, data: bytes) -> bytes:
        if path.startswith("tile/entries/"):
            first_len = int.from_bytes(data[:2], "big")
            return len(other).to_bytes(2, "big") + other + data[2 + first_len:]
        return data

    log.tamper_tile = swap
    with pytest.raises(VerificationFailed, match="does not hash to the leaf"):
        _run(log, tmp_path)


def test_tampered_hash_tile_is_caught(tmp_path: Path) -> None:
    log = MemoryLog()
    _fill(log, 0, 300)
    log.tamper_tile = lambda path, data: (
        data[:32] + bytes(32) + data[64:] if path == "tile/0/000" else data)
    with pytest.raises(VerificationFailed, match="tile"):
        _run(log, tmp_path)


def test_invalid_entry_is_a_violation_not_a_crash(tmp_path: Path) -> None:
    log = MemoryLog()
    _fill(log, 0, 2)
    log._append(b'{"not":"an entry"}')
    report = _run(log, tmp_path)
    assert [(v.index, v.detail.split(":")[0]) for v in report.violations] == [
        (2, "entry")]


def test_monitor_detects_fork_with_proof_from_tiles(tmp_path: Path) -> None:
    log = MemoryLog()
    _fill(log, 0, 5)
    twin = log.fork()
    _fill(log, 5, 8)
    _run(log, tmp_path)
    twin.submit(_kernel_entry("acme/evil", "9.9.9"))
    _fill(twin, 100, 104)
    with pytest.raises(LogMisbehaviour, match="FORK"):
        _run(twin, tmp_path)


@pytest.mark.slow
def test_worker_processes_give_the_same_report(tmp_path: Path) -> None:
    log = MemoryLog()
    _fill(log, 0, 300)
    log._append(b'{"not":"an entry"}')
    verifier = load_verifier(log.verifier_key)
    reports = [run_monitor(session_of(log, TrustedState(tmp_path / f"h{jobs}"), verifier.key_string()),
                           tmp_path / f"s{jobs}.json", jobs=jobs) for jobs in (1, 2)]
    assert reports[0] == reports[1]
    assert [v.index for v in reports[1].violations] == [300]


def test_a_log_smaller_than_where_the_monitor_stopped_is_a_rollback_with_evidence(
        tmp_path: Path) -> None:
    from client.monitor import MonitorState, save_monitor_state

    log = MemoryLog()
    _fill(log, 0, 5)
    save_monitor_state(tmp_path / "state.json", MonitorState(log.origin, 9, log.note_at(3)))
    with pytest.raises(LogMisbehaviour, match=r"ROLLBACK.*read up to index 9") as ei:
        _run(log, tmp_path)
    assert ei.value.evidence_path is not None
    assert log.checkpoint() in ei.value.evidence_path.read_bytes()


def test_an_emptied_log_is_a_rollback_with_evidence(tmp_path: Path) -> None:
    log = MemoryLog()
    _fill(log, 0, 4)
    _run(log, tmp_path)
    empty = MemoryLog(log.origin, log.signer)

    def no_checkpoint() -> bytes:
        from client import ServerError

        raise ServerError("the log has no entries yet", 404, "empty_log")

    empty.checkpoint = no_checkpoint  # type: ignore[method-assign]
    with pytest.raises(LogMisbehaviour, match=r"ROLLBACK.*no checkpoint at all") as ei:
        _run(empty, tmp_path)
    assert ei.value.evidence_path is not None
    assert log.checkpoint() in ei.value.evidence_path.read_bytes()


def _policy(keyid: str, comment: str = "") -> TrustPolicy:
    return TrustPolicy.from_toml(f"""version = 1{comment}
[[rule]]
name = "acme"
kernel = "acme/*"
predicate_types = ["kernel"]
keys = ["{keyid}"]
threshold = 1
""")


def test_a_changed_policy_re_judges_what_was_read_from_the_start(tmp_path: Path) -> None:
    """Issue 42: the monitor keeps the digest of the policy it judged by; another policy
    (not another spelling of the same one) reads and judges every entry again from index 0,
    with progress, and says so."""
    log = MemoryLog()
    _fill(log, 0, 40)
    ours = keyid(KEY.public_key())
    path = tmp_path / "state.json"

    def run(policy: TrustPolicy, seen: list[tuple[int, int]] | None = None) -> MonitorReport:
        return run_monitor(session_of(log, TrustedState(tmp_path / "home")), path, policy=policy,
                           on_progress=None if seen is None else
                           (lambda done, total: seen.append((done, total))))

    first = run(_policy(ours))
    assert first.entries_checked == 40 and not first.violations and not first.rejudged
    assert load_monitor_state(path, log.origin).policy_sha256 == _policy(ours).digest()
    same = run(_policy(ours, "  # only a comment and spacing\n"))
    assert (same.entries_checked, same.rejudged) == (0, False)
    progress: list[tuple[int, int]] = []
    stricter = run(_policy("ab" * 32), progress)  # another key: every entry now a violation
    assert stricter.rejudged and stricter.start_index == 0 and stricter.entries_checked == 40
    assert len(stricter.violations) == 40 and progress and progress[-1][0] == 40
    assert stricter.to_json()["rejudged"] is True
    again = run(_policy("ab" * 32))
    assert (again.entries_checked, again.rejudged) == (0, False)
