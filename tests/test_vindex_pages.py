"""A key's list proven complete page by page (docs/vindex.md, "Lookup answers in pages"):
the store answers a page in O(page) rows on each backend, the pure chain check catches a page that does not
continue the list, and the client proves a list longer than a whole-list answer allows
(> 100,000 entries) while a log that skips, repeats or reorders an index in a middle
page, or serves a page elsewhere in the list, is caught with a typed error."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests
from client_fakes import IndexedMemoryLog, MemoryLog
from client_server import Ktl, running_log

from client.session import connect
from client.state import TrustedState
from client.vindex import (
    ChainMismatch,
    IncompleteAnswer,
    PageOutOfOrder,
    Paging,
    TooManyPages,
    verified_lookup,
)
from ledger.storage import LogStorage
from ledger.tlog.merkle import leaf_hash
from ledger.vindex import (
    MAX_PAGE,
    IndexKey,
    IndexProofError,
    ListChain,
    ListHashMismatch,
    ListPage,
    MemoryIndexRows,
    PageOrderError,
    PendingIndex,
    StoredIndex,
    TiledNodes,
    TooManyResults,
    entry_keys,
    extend_lists,
    open_index,
)
from ledger.vindex._sqlite import SqliteIndexRows
from tests.ledger_support import entry_bytes

N = 30
K0 = IndexKey("name", "acme/k0")  # entries 0, 3, ..., 27: ten of them


def _entries(n: int = N) -> list[bytes]:
    return [entry_bytes(i, f"acme/k{i % 3}") for i in range(n)]


def _pages(index: StoredIndex, key: IndexKey, limit: int) -> tuple[ListChain, list[int]]:
    chain, got = ListChain(limit), list[int]()
    while True:
        answer = index.lookup_page(key, chain.last, limit)
        page = ListPage(key.text(), answer.size, chain.last, answer.indices, answer.more,
                        answer.proof, "")
        chain.add(page)
        got.extend(page.indices)
        if not page.more:
            chain.finish(index.root(), key.hash, page.proof)
            return chain, got


def test_pages_on_each_backend_chain_to_the_leaf(storage: LogStorage) -> None:
    index, data = open_index(storage), _entries()
    index.commit(index.prepare(0, data))
    for key in {k for d in data for k in entry_keys(d)} | {IndexKey("name", "nobody/none")}:
        want = index.lookup(key).indices
        for limit in (1, 3, 10, MAX_PAGE):
            chain, got = _pages(index, key, limit)
            assert got == want, (key, limit)
            assert chain.pages == max(1, -(-len(want) // limit)), (key, limit)
    assert index.lookup_page(K0, 9, 2).indices == [12, 15]
    assert index.lookup_page(K0, 26, 2).indices == [27] and not index.lookup_page(K0, 26, 2).more


def test_a_page_reads_its_rows_only() -> None:
    """The rows a page reads are its own (a range of the (key, index) key), not the list."""
    rows = MemoryIndexRows()
    index = StoredIndex(rows)
    index.commit(index.prepare(0, _entries()))
    assert rows.lookup_rows(K0.hash, 2, after=9).indices == [12, 15, 18]  # limit + 1


def test_on_sqlite_a_page_is_a_range_of_the_primary_key(tmp_path: Path) -> None:
    """No OFFSET scan: the page's query searches the (key, idx) key from `after` on."""
    conn = sqlite3.connect(tmp_path / "log.db", isolation_level=None)
    index = StoredIndex(SqliteIndexRows(lambda: conn))
    index.commit(index.prepare(0, _entries()))
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    assert index.lookup_page(K0, 9, 2).indices == [12, 15]
    conn.set_trace_callback(None)
    query = next(q for q in seen if "FROM vindex_postings" in q)
    plan = " ".join(str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + query))
    assert "USING PRIMARY KEY (key=? AND idx>? AND idx<?)" in plan, plan


def _honest(indices: list[int], limit: int) -> list[ListPage]:
    rows = MemoryIndexRows()
    _commit_list(rows, K0.hash, indices, max(indices) + 1)
    index = StoredIndex(rows)
    out, after = [], None
    while True:
        a = index.lookup_page(K0, after, limit)
        out.append(ListPage(K0.text(), a.size, after, a.indices, a.more, a.proof, ""))
        if not a.more:
            return out
        after = a.indices[-1]


def _commit_list(rows: MemoryIndexRows, key: bytes, indices: list[int], size: int) -> bytes:
    nodes = TiledNodes(rows.read_tiles)
    root = extend_lists(nodes, {key: indices})
    rows.write(PendingIndex(0, size, root, nodes.changed_tiles(), [(key, i) for i in indices]))
    return root


def test_the_chain_check_refuses_a_page_that_does_not_continue() -> None:
    pages = _honest(list(range(0, 30, 3)), 3)
    root = StoredIndex(MemoryIndexRows()).root()  # any root: the order checks come first
    cases = {
        "repeats or reorders": {"indices": [9, 9, 12]},
        "goes back": {"indices": [6, 9, 12]},
        "reorders": {"indices": [12, 9, 15]},
        "starts after 3": {"after": 3},
        "not 3, that says more": {"indices": [9, 12]},
        "for size 1 after one for 28": {"size": 1},
    }
    for message, change in cases.items():
        chain = ListChain(3)
        chain.add(pages[0])
        with pytest.raises(PageOrderError, match=message):
            bad = ListPage(**{**pages[1].__dict__, **change})
            chain.add(bad)
    chain = ListChain(3)
    with pytest.raises(ValueError, match="1 to"):
        ListChain(MAX_PAGE + 1)
    for page in pages:
        chain.add(page)
    assert chain.count == 10 and chain.last == 27
    with pytest.raises(IndexProofError):
        chain.finish(root, K0.hash, pages[-1].proof)


def test_a_skipped_or_swapped_index_in_a_middle_page_fails_the_final_check() -> None:
    rows = MemoryIndexRows()
    root = _commit_list(rows, K0.hash, list(range(0, 30, 3)), 28)
    pages = _honest(list(range(0, 30, 3)), 3)
    for middle in ([9, 15, 18], [9, 13, 15]):  # 12 skipped (the next page goes on); 12 -> 13
        chain = ListChain(3)
        chain.add(pages[0])
        chain.add(ListPage(**{**pages[1].__dict__, "indices": middle}))
        rest = [i for i in range(0, 30, 3) if i > middle[-1]]
        chain.add(ListPage(**{**pages[-1].__dict__, "after": middle[-1], "indices": rest,
                              "more": False}))
        with pytest.raises(ListHashMismatch):
            chain.finish(root, K0.hash, pages[-1].proof)


class PageEditing:
    """A log API that edits the `page`-th index lookup answer (1 = the first)."""

    def __init__(self, inner: Any, page: int, edit: Any) -> None:
        self.inner, self.page, self.edit, self.calls = inner, page, edit, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def index_lookup(self, key: str, **kw: Any) -> Any:
        self.calls += 1
        answer = self.inner.index_lookup(key, **kw)
        return self.edit(answer, kw, self.inner) if self.calls == self.page else answer


def _log() -> IndexedMemoryLog:
    log = IndexedMemoryLog()
    for d in _entries():
        log.submit(d)
    return log


def test_the_client_proves_a_list_page_by_page_and_shows_progress(tmp_path: Path) -> None:
    log, seen = _log(), []
    sess = connect(log, TrustedState(tmp_path / "home"), url="http://memory.test")
    got = verified_lookup(sess, K0, Paging(page_size=3, progress=lambda p, n: seen.append((p, n))))
    assert got.indices == tuple(range(0, 30, 3)) and got.pages == 4
    assert seen == [(1, 3), (2, 6), (3, 9), (4, 10)]
    assert "read in 4 pages" in got.summary()
    with pytest.raises(TooManyPages, match="3 pages of 3") as caught:
        verified_lookup(sess, K0, Paging(page_size=3, max_pages=3))
    assert caught.value.exit_code == 4  # inconclusive, not a verification failure


def test_a_middle_page_that_skips_repeats_or_reorders_is_caught(tmp_path: Path) -> None:
    """Attack: the log serves an honest first and last page and edits the second."""

    def skip(o: dict[str, Any], kw: dict[str, Any], log: Any) -> Any:  # 12 left out
        return {**o, "indices": [9, 15, 18]}

    def skip_and_go_on(o: dict[str, Any], kw: dict[str, Any], log: Any) -> Any:
        page = log.index_lookup(K0.text(), after=12, limit=3)  # from 15: 12 left out
        return {**page, "after": kw["after"]}

    def end_early(o: dict[str, Any], kw: dict[str, Any], log: Any) -> Any:
        return {**o, "more": False}

    def repeat(o: dict[str, Any], kw: dict[str, Any], log: Any) -> Any:
        return {**o, "indices": [6, 9, 12]}

    def reorder(o: dict[str, Any], kw: dict[str, Any], log: Any) -> Any:
        return {**o, "indices": [12, 9, 15]}

    def elsewhere(o: dict[str, Any], kw: dict[str, Any], log: Any) -> Any:
        return log.index_lookup(K0.text(), after=3, limit=3)  # a page that does not continue

    def short(o: dict[str, Any], kw: dict[str, Any], log: Any) -> Any:
        return {**o, "indices": o["indices"][:2]}

    for edit, caught in ((skip, ChainMismatch), (skip_and_go_on, ChainMismatch),
                         (end_early, ChainMismatch), (repeat, PageOutOfOrder),
                         (reorder, PageOutOfOrder), (elsewhere, PageOutOfOrder),
                         (short, PageOutOfOrder)):
        sess = connect(_log(), TrustedState(tmp_path / edit.__name__), url="http://memory.test")
        sess.log = PageEditing(sess.log, 2, edit)  # type: ignore[assignment]
        with pytest.raises(caught) as err:
            verified_lookup(sess, K0, Paging(page_size=3))
        assert isinstance(err.value, IncompleteAnswer), edit.__name__


class LongListLog(MemoryLog):
    """A log of `n` entries every one of which names K0, its index built from the list
    directly (the entries' bytes do not matter to the client's check of the list)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        for i in range(n):
            self.entries.append(b"%d" % i)
            self.store.append(leaf_hash(b"%d" % i))
        self.index = StoredIndex(MemoryIndexRows())
        assert isinstance(self.index.rows, MemoryIndexRows)
        self.root = _commit_list(self.index.rows, K0.hash, list(range(n)), n)

    def note_at(self, size: int) -> bytes:
        from ledger.tlog.checkpoint import Checkpoint, sign_checkpoint
        from ledger.tlog.merkle import tree_root
        from ledger.vindex import commitment_line

        return sign_checkpoint(Checkpoint(self.origin, size, tree_root(size, self.store),
                                          (commitment_line(self.root),)), self.signer)

    def index_lookup(self, key: str, *, after: int | None = None, limit: int | None = None
                     ) -> Any:
        k = IndexKey.parse(key)
        if limit is None:
            a = self.index.lookup(k)  # the whole-list answer: refused past its limit
            return {"key": key, "size": a.size, "indices": a.indices, "proof": a.proof.to_json()}
        a = self.index.lookup_page(k, after, limit)
        return ListPage(key, a.size, after, a.indices, a.more, a.proof,
                        self.note_at(a.size).decode()).to_json()


def test_a_list_of_more_than_100000_entries_is_proven_complete(tmp_path: Path) -> None:
    """The attack the pages answer: 100,001 entries under one key made its whole-list
    answer impossible (too_many_results); page by page it is proven complete."""
    n = 100_001
    log = LongListLog(n)
    with pytest.raises(TooManyResults):
        log.index_lookup(K0.text())
    sess = connect(log, TrustedState(tmp_path / "home"), url="http://memory.test")
    seen: list[int] = []
    got = verified_lookup(sess, K0, Paging(progress=lambda p, e: seen.append(e)))
    assert got.size == n and got.indices == tuple(range(n)) and got.pages == 11
    assert seen[-1] == n and len(seen) == 11
    log.index.rows.lists[K0.hash].remove(50_000)  # type: ignore[attr-defined]
    with pytest.raises(ChainMismatch):  # one entry left out of a middle page
        verified_lookup(connect(log, TrustedState(tmp_path / "h2"), url="http://memory.test"),
                        K0, Paging())


def test_the_route_serves_pages_and_keeps_the_whole_list_answer(tmp_path: Path) -> None:
    with running_log(tmp_path / "data") as base:
        for d in _entries(12):
            r = requests.post(f"{base}/api/v1/entries", data=d,
                              headers={"Content-Type": "application/json"}, timeout=30)
            assert r.status_code == 201, r.text
        whole = requests.get(f"{base}/api/v1/index/lookup", params={"key": K0.text()},
                             timeout=30).json()
        assert set(whole) == {"key", "size", "indices", "proof", "checkpoint"}
        page = requests.get(f"{base}/api/v1/index/lookup",
                            params={"key": K0.text(), "after": 3, "limit": 2}, timeout=30).json()
        assert (page["after"], page["indices"], page["more"]) == (3, [6, 9], False)
        bad = requests.get(f"{base}/api/v1/index/lookup",
                           params={"key": K0.text(), "limit": MAX_PAGE + 1}, timeout=30)
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_parameter"
        sess = connect(base, TrustedState(tmp_path / "home"))
        got = verified_lookup(sess, K0, Paging(page_size=1))
        assert got.indices == (0, 3, 6, 9) and got.pages == 4
        sess.close()
        ktl = Ktl(tmp_path / "cli")
        res = ktl("search", "--name", "acme/k0", "--page-size", "1", "--max-pages", "4",
                  "--log", base)
        assert res.exit_code == 0 and "read in 4 pages" in " ".join(res.stdout.split())
        res = ktl("search", "--name", "acme/k0", "--page-size", "1", "--max-pages", "3",
                  "--log", base)
        assert res.exit_code == 4, res.stdout  # not read to its end: not proven complete


@pytest.mark.postgresql
def test_on_postgresql_the_client_proves_a_list_page_by_page(tmp_path: Path, pg_url: str) -> None:
    with running_log(tmp_path / "data", database=pg_url) as base:
        for d in _entries(12):
            requests.post(f"{base}/api/v1/entries", data=d,
                          headers={"Content-Type": "application/json"}, timeout=30)
        sess = connect(base, TrustedState(tmp_path / "home"))
        assert verified_lookup(sess, K0, Paging(page_size=1)).indices == (0, 3, 6, 9)
        sess.log = PageEditing(sess.log, 2, lambda o, kw, log: {**o, "indices": [0]})  # type: ignore[assignment]
        with pytest.raises(PageOutOfOrder):
            verified_lookup(sess, K0, Paging(page_size=1))
        sess.close()


def test_the_pages_benchmark_runs_as_benchmarks_md_documents_it(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_vindex.py"
    proc = subprocess.run([sys.executable, str(script), "--pages", "--tiny"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| 120,000 | start " in proc.stdout and "| 12 |" in proc.stdout, proc.stdout
