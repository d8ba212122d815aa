"""Complete search end to end: the server's index answers verify in the client, and a log
that trims an answer, lists less than its index, or commits to a root its entries do not
give is caught (`client.vindex`, `ktl search`, `ktl monitor`)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import requests
from client_fakes import MemoryLog
from client_server import Ktl, running_log

from attest.entry import decode_entry, verify_entry
from client import LogMisbehaviour
from client.api import LogClient
from client.models import SearchPage
from client.monitor import run_monitor
from client.session import connect
from client.state import TrustedState
from client.trust import load_verifier
from client.vindex import (
    CompleteList,
    IncompleteAnswer,
    IndexMismatch,
    IndexNotCommitted,
    SearchOmitted,
    check_listing,
    verified_lookup,
)
from ledger.checkpoint import Checkpoint, sign_checkpoint
from ledger.merkle import tree_root
from ledger.vindex import IndexKey, VerifiableIndex, commitment_line, entry_keys
from tests.ledger_support import entry_bytes

N = 12


def _entries() -> list[bytes]:
    return [entry_bytes(i, f"acme/k{i % 3}") for i in range(N)]


def _seed(base: str) -> list[bytes]:
    data = _entries()
    for d in data:
        r = requests.post(f"{base}/api/v1/entries", data=d,
                          headers={"Content-Type": "application/json"}, timeout=30)
        assert r.status_code == 201, r.text
    return data


def _expected(data: list[bytes], key: IndexKey) -> tuple[int, ...]:
    return tuple(i for i, d in enumerate(data) if key in entry_keys(d))


class Trimming:
    """A log API that passes everything through but edits the index answers."""

    def __init__(self, inner: LogClient, edit: Any) -> None:
        self.inner, self.edit = inner, edit

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def index_lookup(self, key: str) -> Any:
        return self.edit(self.inner.index_lookup(key))


def test_server_answers_verify_for_present_and_absent_keys(tmp_path: Path) -> None:
    with running_log(tmp_path / "data") as base:
        data = _seed(base)
        sess = connect(base, TrustedState(tmp_path / "home"))
        for key in (IndexKey("name", "acme/k1"), *entry_keys(data[4]),
                    IndexKey("name", "nobody/none"), IndexKey("digest", "0" * 64)):
            got = verified_lookup(sess, key)
            assert (got.size, got.indices) == (N, _expected(data, key)), key
        sess.close()


def test_an_answer_with_one_entry_left_out_is_refused(tmp_path: Path) -> None:
    """Attack: the log drops the refutation from the list (and keeps the proof)."""
    key = IndexKey("name", "acme/k1")
    with running_log(tmp_path / "data") as base:
        _seed(base)

        def drop_one(obj: dict[str, Any]) -> dict[str, Any]:
            return {**obj, "indices": obj["indices"][:-1]}

        def claim_absent(obj: dict[str, Any]) -> dict[str, Any]:
            return {**obj, "indices": []}

        for edit in (drop_one, claim_absent):
            sess = connect(base, TrustedState(tmp_path / "home"))
            sess.log = Trimming(sess.log, edit)  # type: ignore[assignment]
            with pytest.raises(IncompleteAnswer, match="not the one its index"):
                verified_lookup(sess, key)
            sess.close()


def test_a_proof_for_another_size_or_a_reshaped_answer_is_refused(tmp_path: Path) -> None:
    key = IndexKey("name", "acme/k2")
    with running_log(tmp_path / "data") as base:
        _seed(base)
        edits = {
            "is for size": lambda o: {**o, "size": o["size"] - 1},
            "asked about": lambda o: {**o, "key": "name:acme/k0"},
            "at most": lambda o: {**o, "indices": "all of them"},
            "an object with key": lambda o: {k: v for k, v in o.items() if k != "proof"},
            "past the size": lambda o: {**o, "indices": [*o["indices"], 10**6]},
        }
        for message, edit in edits.items():
            sess = connect(base, TrustedState(tmp_path / "home"))
            sess.log = Trimming(sess.log, edit)  # type: ignore[assignment]
            with pytest.raises(IncompleteAnswer, match=message):
                verified_lookup(sess, key)
            sess.close()


def test_a_listing_that_omits_or_adds_an_entry_is_caught() -> None:
    proved = CompleteList(IndexKey("name", "a/b"), 10, (1, 4, 8), None)  # type: ignore[arg-type]
    check_listing(proved, [1, 4, 8, 11])  # entries past the proven size are not judged
    check_listing(proved, [1, 4], up_to=5)  # read only up to 5
    with pytest.raises(SearchOmitted, match="left out entries 4") as caught:
        check_listing(proved, [1, 8])
    assert caught.value.missing == (4,)
    with pytest.raises(SearchOmitted, match="that do not name it") as extra:
        check_listing(proved, [1, 2, 4, 8])
    assert extra.value.extra == (2,)


def test_ktl_search_says_complete_and_catches_a_trimmed_listing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack: the search listing leaves out an entry the committed index holds."""
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "data") as base:
        data = _seed(base)
        got = ktl.json("search", "--name", "acme/k0", "--log", base)
        want = _expected(data, IndexKey("name", "acme/k0"))
        assert [r["index"] for r in got["results"]] == list(want)
        assert got["complete"] == {"key": "name:acme/k0", "size": N, "indices": list(want)}
        text = ktl("search", "--name", "acme/k0", "--log", base)
        assert "complete up to index 12" in text.stdout

        real = LogClient.search

        def trimmed(self: LogClient, **kw: Any) -> SearchPage:
            page = real(self, **kw)
            return SearchPage(tuple(h for h in page.results if h.index != want[1]),
                              page.next_cursor)

        monkeypatch.setattr(LogClient, "search", trimmed)
        res = ktl("search", "--name", "acme/k0", "--log", base, "--json")
        assert res.exit_code != 0
        assert f"left out entries {want[1]}" in res.stdout + res.stderr


class IndexedLog(MemoryLog):
    """The in-memory log, with checkpoints committing to an index; `lie_skip` leaves
    entries out of the committed index (a log whose commitment disagrees with its entries)."""

    def __init__(self) -> None:
        super().__init__()
        self.lie_skip: set[int] = set()

    def note_at(self, size: int) -> bytes:
        index = VerifiableIndex()
        index.extend(0, [b"{}" if i in self.lie_skip else e
                         for i, e in enumerate(self.entries[:size])])
        root = tree_root(size, self.store)
        return sign_checkpoint(Checkpoint(self.origin, size, root,
                                          (commitment_line(index.root),)), self.signer)


def _monitor(log: MemoryLog, tmp: Path) -> Any:
    return run_monitor(log, load_verifier(log.verifier_key), log.origin,
                       TrustedState(tmp / "home"), tmp / "state.json")


def test_monitor_recomputes_the_index_and_catches_a_wrong_commitment(tmp_path: Path) -> None:
    log = IndexedLog()
    data = _entries()
    for d in data[:7]:
        verify_entry(decode_entry(d))
        log.submit(d)
    first = _monitor(log, tmp_path)
    assert first.index_checked and not first.violations
    for d in data[7:]:
        log.submit(d)
    assert _monitor(log, tmp_path).index_checked  # resumed from 7: the index file is reused
    log.submit(entry_bytes(50, "acme/k9"))
    log.lie_skip = {3}  # the committed index leaves entry 3 out
    with pytest.raises(IndexMismatch, match="INDEX MISMATCH") as caught:
        _monitor(log, tmp_path)
    assert isinstance(caught.value, LogMisbehaviour)
    evidence = caught.value.evidence_path
    assert evidence is not None and "commits to index root" in evidence.read_text()


def test_a_log_that_commits_to_no_index_is_not_called_complete(tmp_path: Path) -> None:
    log = MemoryLog()
    log.submit(_entries()[0])
    report = _monitor(log, tmp_path)
    assert not report.index_checked

    class Answering(MemoryLog):
        def index_lookup(self, key: str) -> Any:
            return {"key": key, "size": 1, "indices": [0],
                    "proof": {"siblings": [], "leaf": None},
                    "checkpoint": self.note_at(1).decode()}

    other = Answering()
    other.submit(_entries()[0])
    sess = connect(other, TrustedState(tmp_path / "home2"), url="http://x.test")
    with pytest.raises(IndexNotCommitted, match="commits to no index"):
        verified_lookup(sess, IndexKey("name", "acme/k0"))


def test_the_commitment_line_is_covered_by_the_log_signature(tmp_path: Path) -> None:
    """Attack: a checkpoint whose commitment line was swapped no longer verifies."""
    with running_log(tmp_path / "data") as base:
        _seed(base)
        sess = connect(base, TrustedState(tmp_path / "home"))
        swapped = "ktl/vindex/v1 " + hashlib.sha256(b"x").hexdigest()

        def swap(obj: dict[str, Any]) -> dict[str, Any]:
            lines = obj["checkpoint"].split("\n")
            lines[3] = swapped
            return {**obj, "checkpoint": "\n".join(lines)}

        sess.log = Trimming(sess.log, swap)  # type: ignore[assignment]
        with pytest.raises(Exception, match="not validly signed"):
            verified_lookup(sess, IndexKey("name", "acme/k0"))
        sess.close()
