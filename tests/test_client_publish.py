"""publish_claims against an in-memory log that lies: nothing is trusted or written unless verified."""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from client_fakes import MemoryLog, session_of
from hypothesis import given
from hypothesis import strategies as st

from attest import examples
from attest.keys import generate_private_key
from attest.predicates import BENCHMARK_V1, KERNEL_V1, VERIFICATION_V1
from client import InputError, LogMisbehaviour, VerificationFailed
from client.monitor import MonitorState
from client.publish import JOURNAL, Claim, KernelRelease, Results, publish_claims, read_journal
from client.receipts import verify_receipt
from client.state import TrustedState
from client.trust import load_verifier
from ledger.tlog.checkpoint import Checkpoint, sign_checkpoint
from ledger.tlog.note import NoteSigner

ARCHIVE = b"pretend canonical archive"


def _claims() -> list[Claim]:
    kernel = examples.kernel()
    return [Claim.parse("kernel", KERNEL_V1, kernel),
            Claim.parse("verification", VERIFICATION_V1, examples.verification()),
            Claim.parse("benchmark", BENCHMARK_V1, examples.benchmark())]


def _publish(log: MemoryLog, tmp: Path, key_string: str | None = None) -> list[Any]:
    trusted = TrustedState(tmp / "home")
    return publish_claims(session_of(log, trusted, key_string), generate_private_key(),
                          KernelRelease(examples.KERNEL_NAME, ARCHIVE, tuple(_claims()), b"[]"),
                          tmp / "receipts")


def test_publish_writes_verifiable_receipts(tmp_path: Path) -> None:
    log = MemoryLog()
    done = _publish(log, tmp_path)
    assert [p.kind for p in done] == ["kernel", "verification", "benchmark"]
    assert [p.index for p in done] == [0, 1, 2]
    assert hashlib.sha256(ARCHIVE).hexdigest() in log.blobs and b"[]" in log.blobs.values()
    for p in done:
        report, _ = verify_receipt(Path(p.proof_path).read_bytes(), Path(p.entry_path).read_bytes(),
                                   load_verifier(log.verifier_key))
        assert report.index == p.index


def test_checkpoint_signed_by_wrong_key_is_refused(tmp_path: Path) -> None:
    log = MemoryLog()
    log._append(b"seed")
    imposter = NoteSigner(log.origin, generate_private_key())
    log.lie_checkpoint = sign_checkpoint(Checkpoint(log.origin, 1, log.store.root()), imposter)
    with pytest.raises(VerificationFailed, match="checkpoint signature"):
        _publish(log, tmp_path)
    assert not (tmp_path / "receipts").exists()


def test_inclusion_proof_for_another_size_is_refused(tmp_path: Path) -> None:
    log = MemoryLog()
    for i in range(5):
        log._append(f"seed-{i}".encode())
    log.lie_grow_after_proof = True  # proof for size 6, checkpoint for size 7
    with pytest.raises(VerificationFailed, match="inclusion proof"):
        _publish(log, tmp_path)
    assert not (tmp_path / "receipts").exists()


def test_forked_log_is_refused_on_publish(tmp_path: Path) -> None:
    log = MemoryLog()
    _publish(log, tmp_path)
    twin = log.fork()
    twin.entries.clear()
    twin.store = type(log.store)()
    for i in range(3):
        twin._append(f"other-{i}".encode())
    with pytest.raises(LogMisbehaviour, match="FORK"):
        _publish(twin, tmp_path)


@given(value=st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
        st.sampled_from(["origin", "next_index", "checkpoint", "releases", "verification",
                         "benchmark", "samples", "x"]), kids, max_size=5),
    max_leaves=12))
def test_local_state_and_results_parsers_reject_cleanly(value: Any) -> None:
    with contextlib.suppress(InputError):
        MonitorState.from_json(value) if isinstance(value, dict) else None
    with contextlib.suppress(InputError):
        Results.from_json(value)


@pytest.mark.parametrize("doc", [
    {"subject_sha256": "d", "signer": "s"},                                  # no entries
    {"subject_sha256": "d", "signer": "s", "name": "n", "kinds": ["kernel"], "entries": [],
     "samples": None},                                                       # kinds != entries
    {"subject_sha256": "d", "signer": "s", "name": "n", "kinds": ["kernel"],
     "entries": ["!!not base64"], "samples": None},
    {"subject_sha256": "d", "signer": "s", "name": "n", "kinds": [1], "entries": ["AAAA"],
     "samples": None},
])
def test_a_damaged_publish_journal_is_refused_by_name(tmp_path: Path, doc: dict[str, Any]) -> None:
    """The journal is parsed once, into a type: a damaged one is a clear InputError, never a
    KeyError or a resumed publish of whatever it holds."""
    folder = tmp_path / ".ktl" / "receipts"
    folder.parent.mkdir(parents=True)
    (folder.parent / JOURNAL).write_text(json.dumps(doc))
    with pytest.raises(InputError, match="is not a publish journal"):
        read_journal(folder, "d", "s")
    assert read_journal(folder, "other digest", "s") is None  # another publish's: not ours


def test_publish_runs_sets_the_benchmark_measured_now(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    """`ktl publish --runs N` measures N runs and, while they disagree, N more at a time up
    to PUBLISH_MAX_RUNS (or N, if more); its help says the same numbers; it is refused with
    results given (they were measured already) and out of range."""
    from types import SimpleNamespace

    from click.testing import CliRunner

    import client.publish as publish
    from client.cli import main as cli
    from client.publish import PublishOptions, measure
    from verifier import DEFAULT_RUNS, PUBLISH_MAX_RUNS

    asked: list[tuple[int, int]] = []

    def fake_bench(kernel_dir: Path, runs: int, settings: Any, progress: Any) -> Any:
        asked.append((runs, settings.until_agree))
        return SimpleNamespace(to_predicate=lambda: "bench", samples_blob=lambda: b"{}")

    check = SimpleNamespace(to_predicate=lambda: "verification")
    monkeypatch.setattr(publish, "run_check", lambda *a, **k: check)
    monkeypatch.setattr(publish, "not_timed_here", lambda d: None)
    monkeypatch.setattr(publish, "bench_runs", fake_bench)
    said: list[str] = []
    measure(tmp_path, "quick", said.append)
    measure(tmp_path, "quick", said.append, runs=8)
    measure(tmp_path, "quick", said.append, runs=20)
    assert asked == [(DEFAULT_RUNS, PUBLISH_MAX_RUNS), (8, PUBLISH_MAX_RUNS), (20, 20)]
    assert "8 independent runs; more while they disagree, up to 15" in said[3]
    with pytest.raises(InputError, match="--runs applies to a benchmark measured now"):
        PublishOptions(tmp_path, tmp_path / "k", runs=3,
                       results_path=tmp_path / "r.json").results()
    runner = CliRunner()
    help_text = " ".join(runner.invoke(cli, ["publish", "--help"]).output.split())
    assert f"up to {PUBLISH_MAX_RUNS} in all" in help_text
    assert f"[default: {DEFAULT_RUNS}]" in help_text
    bad = runner.invoke(cli, ["publish", str(tmp_path), "--key", str(tmp_path / "k"),
                              "--runs", "0"])
    assert bad.exit_code == 2 and "--runs" in bad.output
