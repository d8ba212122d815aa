"""Complete search end to end: the server's index answers verify in the client, and a log
that trims an answer, lists less than its index, or commits to a root its entries do not
give is caught (`client.vindex`, `ktl search`, `ktl monitor`)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from client_fakes import IndexedMemoryLog, MemoryLog, session_of
from client_server import Ktl, kernel_folder, running_log

from attest import examples, make_entry, parse_predicate
from attest.entry import decode_entry, encode_entry, verify_entry
from attest.keys import generate_private_key
from attest.predicates import VERIFICATION_V1
from attest.statement import Statement, Subject
from client import LogMisbehaviour
from client.api import LogClient
from client.models import SearchPage
from client.monitor import run_monitor
from client.publish import Claim, KernelRelease, kernel_claim, publish_claims
from client.reproduce import gather
from client.session import connect
from client.state import TrustedState
from client.vindex import (
    CompleteList,
    IncompleteAnswer,
    IndexMismatch,
    IndexNotCommitted,
    SearchOmitted,
    check_listing,
    verified_lookup,
)
from ledger.vindex import IndexKey, LookupProof, entry_keys, verify_lookup
from tests.ledger_support import entry_bytes
from verifier.kernel import pack_kernel

N = 12
NAME = "acme/matmul-blocked"


def _entries() -> list[bytes]:
    return [entry_bytes(i, f"acme/k{i % 3}") for i in range(N)]


def _seed(base: str) -> list[bytes]:
    data = _entries()
    for d in data:
        r = requests.post(f"{base}/api/v1/entries", data=d,
                          headers={"Content-Type": "application/json"}, timeout=30)
        assert r.status_code == 201, r.text
    return data


def _until_published(base: str, size: int, deadline_s: float = 60.0) -> None:
    """Wait until the log's checkpoint covers `size` entries (on PostgreSQL an accepted entry
    is sequenced at once and covered by the integrator's next checkpoint, a moment later)."""
    end = time.monotonic() + deadline_s
    while True:
        body = requests.get(f"{base}/checkpoint", timeout=30).text.splitlines()
        if len(body) > 1 and body[1].isdigit() and int(body[1]) >= size:
            return
        assert time.monotonic() < end, f"the checkpoint stayed at {body[1:2]} (< {size})"
        time.sleep(0.2)


def _expected(data: list[bytes], key: IndexKey) -> tuple[int, ...]:
    return tuple(i for i, d in enumerate(data) if key in entry_keys(d))


class Trimming:
    """A log API that passes everything through but edits the index answers."""

    def __init__(self, inner: LogClient, edit: Any) -> None:
        self.inner, self.edit = inner, edit

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def index_lookup(self, key: str, **page: Any) -> Any:
        return self.edit(self.inner.index_lookup(key, **page))


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
            "past the page's size 11": lambda o: {**o, "size": o["size"] - 1},
            "asked about": lambda o: {**o, "key": "name:acme/k0"},
            "at most": lambda o: {**o, "indices": "all of them"},
            "an object with key": lambda o: {k: v for k, v in o.items() if k != "proof"},
            "past the page's size 12": lambda o: {**o, "indices": [*o["indices"], 10**6]},
            "is for size 13": lambda o: {**o, "size": o["size"] + 1},
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


def _monitor(log: MemoryLog, tmp: Path) -> Any:
    return run_monitor(session_of(log, TrustedState(tmp / "home")), tmp / "state.json")


def test_monitor_recomputes_the_index_and_catches_a_wrong_commitment(tmp_path: Path) -> None:
    log = IndexedMemoryLog()
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
        def index_lookup(self, key: str, **page: Any) -> Any:
            return {"key": key, "size": 1, "after": None, "indices": [0], "more": False,
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


def _claim_entry(name: str, digest: str, key: Any) -> bytes:
    stmt = Statement(subjects=(Subject(name, digest),), predicate_type=VERIFICATION_V1,
                     predicate=parse_predicate(VERIFICATION_V1, examples.verification()))
    return encode_entry(make_entry(Statement.from_json(stmt.to_json()), [key]))


def test_reproduce_catches_a_search_that_hides_an_entry_about_the_digest(tmp_path: Path) -> None:
    """Attack: the log's search leaves out one entry about the kernel's digest (a
    refutation, say); `ktl reproduce`'s claim search holds it against the index."""
    log = IndexedMemoryLog()
    trusted = TrustedState(tmp_path / "home")
    archive = pack_kernel(kernel_folder(tmp_path))
    digest = hashlib.sha256(archive).hexdigest()
    vendor = generate_private_key()
    publish_claims(session_of(log, trusted), vendor,
                   KernelRelease(NAME, archive, (kernel_claim(kernel_folder(tmp_path / "k"))[2],
                                 Claim.parse("verification", VERIFICATION_V1, examples.verification()))),
                   tmp_path / "r")
    hidden = log.submit(_claim_entry(NAME, digest, generate_private_key())).index
    sess = connect(log, trusted, url="http://memory.test")
    honest = gather(sess, 0, tmp_path / "w1")
    assert honest.search.proven_up_to == len(log.entries)
    assert "proven complete up to index" in honest.search.summary()
    honest_search = log.search

    def hiding(**kw: Any) -> SearchPage:
        page = honest_search(**kw)
        return SearchPage(tuple(h for h in page.results if h.index != hidden), page.next_cursor)

    log.search = hiding  # type: ignore[method-assign]
    with pytest.raises(SearchOmitted, match=f"left out entries {hidden}"):
        gather(connect(log, trusted, url="http://memory.test"), 0, tmp_path / "w2")


def test_padding_under_the_digest_cannot_make_the_reproduction_read_it_all(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack: strangers log more entries about the kernel's digest than a reproduction
    proves (9 in all, the limit here 4). The proof stops at the limit, in pages of 2 (2
    index lookups, whatever the padding), and the search says it is not proven complete
    and why; the publisher's claims are still found (asked for by digest and key)."""
    import client.reproduce as reproduce

    monkeypatch.setattr(reproduce, "PROOF_MAX_ENTRIES", 4)
    monkeypatch.setattr(reproduce, "PROOF_PAGE", 2)
    log = IndexedMemoryLog()
    trusted = TrustedState(tmp_path / "home")
    archive = pack_kernel(kernel_folder(tmp_path))
    digest = hashlib.sha256(archive).hexdigest()
    publish_claims(session_of(log, trusted), generate_private_key(),
                   KernelRelease(NAME, archive, (kernel_claim(kernel_folder(tmp_path / "k"))[2],
                                 Claim.parse("verification", VERIFICATION_V1, examples.verification()))),
                   tmp_path / "r")
    for _ in range(7):
        log.submit(_claim_entry(NAME, digest, generate_private_key()))
    asked: list[int] = []
    lookup = log.index_lookup

    def counted(*args: Any, **kw: Any) -> Any:
        asked.append(1)
        return lookup(*args, **kw)

    log.index_lookup = counted  # type: ignore[method-assign]
    got = gather(connect(log, trusted, url="http://memory.test"), 0, tmp_path / "w")
    assert len(asked) == 2 and got.search.proof_too_long and got.search.proven_up_to is None
    assert "more than 4 entries about this digest" in got.search.summary()
    assert [e.verified.statement.predicate_type for e in got.claims] == [VERIFICATION_V1]
    again = type(got.search).from_json(json.loads(json.dumps(got.search.to_json())))
    assert again == got.search


def test_the_docs_state_the_reproduction_proof_bound() -> None:
    import client.reproduce as reproduce

    readme = " ".join((Path(__file__).resolve().parent.parent / "docs" / "auditing.md").read_text()
                      .split())
    assert reproduce.PROOF_MAX_ENTRIES == reproduce.MAX_ROWS_READ
    assert (f"it proves at most {reproduce.PROOF_MAX_ENTRIES:,} of the digest's entries "
            "(the rows its search reads)") in readme


def test_reproduce_against_a_log_without_an_index_says_not_proven(tmp_path: Path) -> None:
    log = MemoryLog()
    trusted = TrustedState(tmp_path / "home")
    archive = pack_kernel(kernel_folder(tmp_path))
    publish_claims(session_of(log, trusted), generate_private_key(),
                   KernelRelease(NAME, archive, (kernel_claim(kernel_folder(tmp_path / "k"))[2],)),
                   tmp_path / "r")
    got = gather(connect(log, trusted, url="http://memory.test"), 0, tmp_path / "w")
    assert got.search.proven_up_to is None
    assert "not proven complete" in got.search.summary()


def test_the_docs_complete_search_example_is_what_ktl_prints(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parent.parent / "docs" / "auditing.md").read_text()
    start = readme.index("\n## Complete search\n")
    section = readme[start:readme.index("\n## ", start + 1)]
    command, printed = section.split("```console\n")[1].split("```")[0].splitlines()
    assert command == '$ ktl search --name acme/k0 --log "$KTL_LOG"'
    assert "ktl/vindex/v1 <index root, 64 hex>" in section
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "data") as base:
        _seed(base)
        res = ktl("search", "--name", "acme/k0", "--log", base)
        lookup = requests.get(f"{base}/api/v1/index/lookup",
                              params={"key": "name:acme/matmul-blocked"}, timeout=30).json()
        flat = " ".join(section.split())
        paged = re.search(r"`GET (/api/v1/index/lookup\?[^`]*limit=[^`]*)` answers `([^`]+)`",
                          flat)
        assert paged is not None, "the page example of docs/auditing.md"
        page = requests.get(base + paged.group(1), timeout=30).json()
        assert json.loads("{" + paged.group(2) + "}").items() <= page.items(), page
        for option in ("--max-pages", "TooManyPages", "PageOutOfOrder", "ChainMismatch"):
            assert option in section, option
    assert res.exit_code == 0, res.stdout
    assert printed in " ".join(res.stdout.split()), res.stdout
    line = lookup["checkpoint"].splitlines()[3]
    assert line.startswith("ktl/vindex/v1 ") and lookup["indices"] == []
    verify_lookup(bytes.fromhex(line.split()[1]), IndexKey("name", "acme/matmul-blocked").hash,
                  None, LookupProof.from_json(lookup["proof"]))  # a proof of absence


@pytest.mark.postgresql
def test_on_postgresql_answers_verify_and_a_trimmed_one_is_refused(tmp_path: Path,
                                                                   pg_url: str) -> None:
    """The same on a PostgreSQL log (several frontends, the shared queue's integrator)."""
    key = IndexKey("name", "acme/k1")
    with running_log(tmp_path / "data", database=pg_url) as base:
        data = _seed(base)
        _until_published(base, N)
        sess = connect(base, TrustedState(tmp_path / "home"))
        got = verified_lookup(sess, key)
        assert (got.size, got.indices) == (N, _expected(data, key))
        sess.log = Trimming(sess.log, lambda o: {**o, "indices": o["indices"][1:]})  # type: ignore[assignment]
        with pytest.raises(IncompleteAnswer):
            verified_lookup(sess, key)
        sess.close()
        ktl = Ktl(tmp_path / "home2")
        assert ktl.json("search", "--name", "acme/k1", "--log", base)["complete"]["size"] == N


def test_two_index_roots_for_one_size_are_a_fork_with_evidence(tmp_path: Path) -> None:
    """Attack: the log shows one client an index root and, for the same size, another."""
    log = IndexedMemoryLog()
    for d in _entries()[:5]:
        log.submit(d)
    trusted = TrustedState(tmp_path / "home")
    key = IndexKey("name", "acme/k0")
    assert verified_lookup(connect(log, trusted, url="http://memory.test"), key).indices
    log.lie_skip = {0}  # the same tree, a second index root for size 5
    with pytest.raises(LogMisbehaviour, match="different index roots") as caught:
        verified_lookup(connect(log, trusted, url="http://memory.test"), key)
    evidence = caught.value.evidence_path
    assert evidence is not None and evidence.read_text().count("ktl/vindex/v1 ") == 2
