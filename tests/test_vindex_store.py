"""The verifiable index in the log's storage: tiles of 8 levels, the integrator's hook,
catching up after a crash, lookups that read O(depth / 8 + results) rows, on each backend."""

from __future__ import annotations

import hashlib
import random
import sqlite3
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.sequencer import Sequencer, Submission
from ledger.storage import EntryFacts, LogStorage
from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.note import NoteSigner
from ledger.vindex import (
    EMPTY,
    IndexKey,
    IndexProofError,
    IndexStoreError,
    MemoryIndexRows,
    MemoryNodes,
    PendingIndex,
    StoredIndex,
    TiledNodes,
    TooManyResults,
    VerifiableIndex,
    WriteBack,
    committed_root,
    decode_tile,
    encode_tile,
    entry_keys,
    open_index,
    update,
    verify_lookup,
)
from ledger.vindex._map import inner_node, leaf_node
from ledger.vindex._sqlite import SqliteIndexRows
from ledger.vindex._tiles import Tile, TileKey, TilePath, tile_of
from tests.ledger_support import entry_bytes

SIGNER = NoteSigner("example.com/log", Ed25519PrivateKey.from_private_bytes(b"\x07" * 32))
FACTS = EntryFacts("https://p/kernel/v1", (("acme/k", "ab" * 32),), ("cd" * 32,))


def sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def entries(n: int, start: int = 0) -> list[bytes]:
    return [entry_bytes(i, f"acme/k{i % 3}") for i in range(start, start + n)]


def add_batch(index: StoredIndex, reference: VerifiableIndex, data: list[bytes], lo: int,
              n: int) -> None:
    """Add data[lo:lo+n] to the stored index and the reference, the roots compared."""
    pending = index.prepare(lo, data[lo: lo + n])
    assert pending.root == reference.extend(lo, data[lo: lo + n])
    index.commit(pending)


def test_tiled_updates_give_the_roots_of_the_plain_map() -> None:
    rng = random.Random(5)
    plain, rows = MemoryNodes(), MemoryIndexRows()
    for _ in range(20):
        values = {sha(b"%d" % rng.randrange(400)): sha(b"v%d" % rng.random()) for _ in range(15)}
        tiled = TiledNodes(rows.read_tiles)
        assert update(tiled, values) == update(plain, values)
        rows.tiles.update(tiled.changed_tiles())
    # the tiles hold exactly the plain map's nodes
    again = TiledNodes(rows.read_tiles)
    assert all(again.get_node(d, p) == node for (d, p), node in plain.nodes.items())


def test_tiles_reencoded_from_kept_records_hold_exactly_the_plain_maps_nodes() -> None:
    """Batch after batch through the decoded tiles a StoredIndex keeps (each tile's bytes
    rebuilt from the records of the nodes it did not write), with keys sharing 7 to 17
    bits so leaves are pushed down across tile boundaries: every stored tile decodes
    to the plain map's nodes in it, no more, and the roots agree."""
    rng = random.Random(11)
    plain, rows = MemoryNodes(), MemoryIndexRows()
    kept: dict[TilePath, Tile] = {}
    for _ in range(30):
        values = {}
        for _ in range(rng.randrange(1, 40)):
            shared = rng.choice([b"", b"\xab", b"\xab\xcd"])
            key = shared + sha(b"%d" % rng.randrange(300))[len(shared):]
            values[key] = sha(b"v%d" % rng.random())
        tiled = TiledNodes(rows.read_tiles, kept)
        assert update(tiled, values) == update(plain, values)
        rows.tiles.update(tiled.changed_tiles())
        kept = {**kept, **tiled.loaded_tiles()}
    by_tile: dict[TileKey, dict[tuple[int, bytes], object]] = {}
    for (depth, path), node in plain.nodes.items():
        by_tile.setdefault(tile_of(depth, path), {})[(depth, path)] = node
    assert set(rows.tiles) == set(by_tile)
    for (top, path), data in rows.tiles.items():
        assert decode_tile(top, path, data) == by_tile[(top, path)]


def test_an_update_writes_a_tile_per_8_levels_per_key() -> None:
    rows, rng = MemoryIndexRows(), random.Random(1)
    tiled = TiledNodes(rows.read_tiles)
    update(tiled, {sha(b"%d" % i): sha(b"v") for i in range(5000)})
    rows.tiles.update(tiled.changed_tiles())
    for _ in range(10):
        key = sha(b"new%d" % rng.random())
        tiled = TiledNodes(rows.read_tiles)
        update(tiled, {key: sha(b"w")})
        # 5000 keys: depth about 13..20, so 2 or 3 tiles, never one per level
        assert 1 <= len(tiled.changed_tiles()) <= 4


def test_tile_bytes_round_trip_in_any_order_and_a_damaged_tile_is_refused() -> None:
    nodes = {(8, b"\x01"): inner_node(sha(b"l"), sha(b"r")),
             (9, b"\x01\x80"): leaf_node(sha(b"k"), sha(b"v"))}
    data = encode_tile(nodes)
    assert decode_tile(8, b"\x01", data) == nodes
    assert decode_tile(8, b"\x01", encode_tile(dict(reversed(list(nodes.items()))))) == nodes
    with pytest.raises(IndexProofError, match="not a multiple"):
        decode_tile(8, b"\x01", data[:-1])
    bad = bytearray(data)
    bad[0] = 9  # a depth below the tile's 8 levels
    with pytest.raises(IndexProofError, match="malformed node"):
        decode_tile(8, b"\x01", bytes(bad))
    bad = bytearray(data)
    bad[67 + 1] = 0x81  # path bits beyond the node's depth
    with pytest.raises(IndexProofError, match="malformed node"):
        decode_tile(8, b"\x01", bytes(bad))


def test_stored_index_matches_the_in_memory_index(storage: LogStorage) -> None:
    index, reference = open_index(storage), VerifiableIndex()
    data = entries(40)
    for lo in range(0, 40, 7):
        add_batch(index, reference, data, lo, 7)
    assert index.size == 40 and index.root() == reference.root
    for key in {k for d in data for k in entry_keys(d)} | {IndexKey("name", "nobody/none")}:
        answer = index.lookup(key)
        assert answer.size == 40
        assert answer.indices == reference.lookup(key).indices
        verify_lookup(index.root(), key.hash, answer.indices or None, answer.proof)


def test_an_index_written_with_a_heads_table_opens_without_it(tmp_path: Path) -> None:
    """Earlier code kept each key's list hash in vindex_heads as well as in its leaf; the
    table is dropped when the index is opened, and the index goes on from its rows."""
    conn = sqlite3.connect(tmp_path / "log.db", isolation_level=None)
    index = StoredIndex(SqliteIndexRows(lambda: conn))
    index.commit(index.prepare(0, entries(5)))
    conn.execute("CREATE TABLE vindex_heads (key BLOB PRIMARY KEY, head BLOB NOT NULL)")
    again = StoredIndex(SqliteIndexRows(lambda: conn))
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'vindex_heads'"
                        ).fetchone() is None
    again.commit(again.prepare(5, entries(5, start=5)))
    reference = VerifiableIndex()
    reference.extend(0, entries(10))
    assert again.root() == reference.root


def test_tiles_kept_in_a_without_rowid_table_are_moved_over_when_opened(tmp_path: Path) -> None:
    """Earlier code kept tiles in a WITHOUT ROWID table (dense tiles cost twice the CPU to
    rewrite there); opening moves every row over as it is, and the index goes on."""
    made = sqlite3.connect(tmp_path / "made.db", isolation_level=None)
    index = StoredIndex(SqliteIndexRows(lambda: made))
    data = entries(60)
    index.commit(index.prepare(0, data[:30]))
    made.close()
    conn = sqlite3.connect(tmp_path / "log.db", isolation_level=None)
    conn.execute(f"ATTACH DATABASE '{tmp_path / 'made.db'}' AS made")
    conn.execute("CREATE TABLE vindex_tiles (depth INTEGER NOT NULL, path BLOB NOT NULL, "
                 "data BLOB NOT NULL, PRIMARY KEY (depth, path)) WITHOUT ROWID")
    conn.execute("INSERT INTO vindex_tiles SELECT depth, path, data FROM made.vindex_tiles")
    for table in ("vindex_postings", "vindex_size"):
        conn.execute(f"CREATE TABLE {table} AS SELECT * FROM made.{table}")
    conn.execute("DETACH DATABASE made")
    assert conn.execute("SELECT count(*) FROM vindex_tiles").fetchone()[0] > 3
    before = sorted(conn.execute("SELECT depth, path, data FROM vindex_tiles").fetchall())
    again = StoredIndex(SqliteIndexRows(lambda: conn))
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'vindex_tiles'").fetchone()[0]
    assert "WITHOUT ROWID" not in sql.upper()
    assert conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'vindex_tiles_%'"
                        ).fetchone() is None
    assert sorted(conn.execute("SELECT depth, path, data FROM vindex_tiles").fetchall()) == before
    again.commit(again.prepare(30, data[30:]))
    reference = VerifiableIndex()
    reference.extend(0, data)
    assert again.root() == reference.root
    # a tile rewritten keeps its row (an upsert, not a delete and insert)
    rowids = dict(((d, p), r) for r, d, p in conn.execute(
        "SELECT rowid, depth, path FROM vindex_tiles"))
    third = StoredIndex(SqliteIndexRows(lambda: conn))
    third.commit(third.prepare(60, entries(5, start=60)))
    top = conn.execute("SELECT rowid FROM vindex_tiles WHERE depth = 0").fetchone()[0]
    assert rowids[(0, b"")] == top


def test_stored_index_refuses_rows_that_do_not_extend_it(storage: LogStorage) -> None:
    index = open_index(storage)
    pending = index.prepare(0, entries(3))
    index.commit(pending)
    with pytest.raises(ValueError, match="cannot add from 0"):
        index.commit(pending)
    with pytest.raises(ValueError, match="cannot add from 5"):
        index.prepare(5, entries(1))


def test_a_lookup_answers_at_most_the_limit() -> None:
    index = StoredIndex(MemoryIndexRows())
    index.commit(index.prepare(0, entries(6)))
    key = next(k for k in entry_keys(entries(1)[0]) if k.kind == "type")
    assert len(index.lookup(key, limit=6).indices) == 6
    with pytest.raises(TooManyResults):
        index.lookup(key, limit=5)


def _sequencer(storage: LogStorage) -> Sequencer:
    return Sequencer(storage, SIGNER, SIGNER.name, index=open_index(storage))


def _root_in(storage: LogStorage) -> tuple[int, bytes | None]:
    cp = storage.latest_checkpoint()
    assert cp is not None
    opened = open_checkpoint(cp.note, SIGNER.verifier(), SIGNER.name).checkpoint
    return opened.size, committed_root(opened)


def test_every_checkpoint_commits_to_the_index_of_its_size(storage: LogStorage) -> None:
    seq = _sequencer(storage)
    seq.ensure_checkpoint()
    assert _root_in(storage) == (0, EMPTY)
    data = entries(30)
    reference = VerifiableIndex()
    for lo, hi in ((0, 1), (1, 11), (11, 30)):
        seq.integrate([Submission(d, FACTS) for d in data[lo:hi]])
        assert _root_in(storage) == (hi, reference.extend(lo, data[lo:hi]))
    assert seq.index is not None and seq.index.size == 30


def test_a_crash_before_the_index_rows_is_caught_up_with_the_same_root(
        storage: LogStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    seq = _sequencer(storage)
    data = entries(12)
    seq.integrate([Submission(d, FACTS) for d in data[:5]])
    assert seq.index is not None

    def crash(pending: PendingIndex) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(seq.index, "commit", crash)
    seq.integrate([Submission(d, FACTS) for d in data[5:9]])  # the batch is durable anyway
    monkeypatch.undo()
    assert seq.index.size == 5
    fresh = _sequencer(storage)  # a restarted integrator
    fresh.integrate([Submission(d, FACTS) for d in data[9:]])
    reference = VerifiableIndex()
    reference.extend(0, data)
    assert _root_in(storage) == (12, reference.root)
    assert fresh.index is not None and fresh.index.size == 12


def test_the_kernel_page_says_whether_its_listing_is_proven_complete(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack: search tables that leave an entry out make the page say 'not proven'."""
    from test_pages_helpers import close_app, make_app, populate

    from ledger.storage import SearchPage

    app = make_app()
    try:
        client = app.test_client()
        log = populate(client)
        body = client.get(f"/kernels/{log.subject}").get_data(as_text=True)
        assert "This listing is proven complete" in body
        assert f"/api/v1/index/lookup?key=digest:{log.subject}" in body
        storage = app.extensions["ktl"].storage
        real = storage.search

        def hiding(field: str, value: str, cursor: int = 0, limit: int = 50) -> SearchPage:
            page = real(field, value, cursor, limit)
            return SearchPage(tuple(r for r in page.results if r.index != log.benchmark),
                              page.next_cursor)

        monkeypatch.setattr(storage, "search", hiding)
        body = client.get(f"/kernels/{log.subject}").get_data(as_text=True)
        assert "This listing is not proven complete" in body
        assert "leaves out 1 and adds 0 entries" in body
    finally:
        close_app(app)


def test_a_log_that_had_no_index_is_indexed_at_start(storage: LogStorage) -> None:
    data = entries(9)
    plain = Sequencer(storage, SIGNER, SIGNER.name)  # an older log: no index
    plain.integrate([Submission(d, FACTS) for d in data])
    assert _root_in(storage) == (9, None)
    seq = _sequencer(storage)
    assert seq.catch_up_index() == 9 and seq.catch_up_index() == 0
    reference = VerifiableIndex()
    reference.extend(0, data)
    assert seq.index is not None and seq.index.root() == reference.root


@pytest.mark.parametrize("write_back", [None, WriteBack(entries=8, seconds=1e9)])
def test_integrators_taking_turns_and_a_failed_write_keep_the_roots_right(
        write_back: WriteBack | None) -> None:
    """Each `StoredIndex` keeps decoded tiles between batches (and, writing back, rows it
    has not written); one that another process moved past, or whose write failed, must
    not build on stale tiles."""
    rows = MemoryIndexRows()
    first, second = StoredIndex(rows, write_back), StoredIndex(rows, write_back)
    reference = VerifiableIndex()
    data = entries(30)
    turns = [first, first, second, first, second, second, first]
    lo = 0
    for i, who in enumerate(turns):
        hi = lo + 4
        pending = who.prepare(lo, data[lo:hi])
        if i == 2:  # a write that fails: nothing of it may leak into the next batch
            pending = who.prepare(lo, data[lo:hi][::-1])
            who = second
            pending = who.prepare(lo, data[lo:hi])
        assert pending.root == reference.extend(lo, data[lo:hi])
        who.commit(pending)
        who.flush()  # the next turn is another integrator's: what this one holds is written
        lo = hi
    assert first.root() == second.root() == reference.root


def test_the_kernel_page_checks_a_bounded_list_and_says_when_it_did_not() -> None:
    """Attack: pad a digest past what a page checks per view. The page reads at most
    STATUS_LIMIT + 1 of the index's rows for it, and says the listing is not proven here
    (rather than reading the whole list on every view)."""
    from test_pages_helpers import close_app, make_app, populate

    from ledger.web import _index_status

    app = make_app()
    try:
        client = app.test_client()
        log = populate(client)
        index = app.extensions["ktl"].index
        seen: list[int] = []
        real = index.rows.lookup_rows

        def counting(key: bytes, limit: int, after: int = -1):  # type: ignore[no-untyped-def]
            got = real(key, limit, after)
            seen.append(len(got.indices))
            return got

        index.rows.lookup_rows = counting
        body = client.get(f"/kernels/{log.subject}").get_data(as_text=True)
        assert "This listing is proven complete" in body and max(seen) > 3
        seen.clear()
        old = _index_status.STATUS_LIMIT
        _index_status.STATUS_LIMIT = 2  # the digest's list is now "too long"
        try:
            body = client.get(f"/kernels/{log.subject}").get_data(as_text=True)
        finally:
            _index_status.STATUS_LIMIT = old
        assert "This listing is not proven complete" in body
        assert "ktl search --digest proves them page by page" in body
        assert seen == [3]  # STATUS_LIMIT + 1 rows read, not the whole list
    finally:
        close_app(app)


def _held_index(storage: LogStorage) -> StoredIndex:
    return open_index(storage, WriteBack(entries=20, seconds=1e9))


def test_a_write_back_index_holds_batches_and_lookups_answer_at_the_written_size(
        storage: LogStorage) -> None:
    index, reference = _held_index(storage), VerifiableIndex()
    data = entries(30)
    key = next(k for k in entry_keys(data[0]) if k.kind == "type")
    for lo in (0, 7):
        add_batch(index, reference, data, lo, 7)
    assert (index.size, index.written_size, index.holding) == (14, 0, True)
    assert index.root() == reference.root  # the held root, from the cached top tile
    answer = index.lookup(key)  # lookups read the rows: the size they hold, nothing held
    assert (answer.size, answer.indices) == (0, [])
    verify_lookup(EMPTY, key.hash, None, answer.proof)
    index.commit(index.prepare(14, data[14:21]))  # 21 entries held: past 20, all written
    reference.extend(14, data[14:21])
    assert (index.size, index.written_size, index.holding) == (21, 21, False)
    answer = index.lookup(key)
    assert answer.indices == reference.lookup(key).indices
    verify_lookup(reference.root, key.hash, answer.indices, answer.proof)
    index.commit(index.prepare(21, data[21:]))
    assert index.flush() == 9 and index.flush() == 0
    reference.extend(21, data[21:])
    assert StoredIndex(index.rows).root() == reference.root


def test_held_rows_lost_in_a_crash_are_caught_up_and_a_stale_holder_gives_way(
        storage: LogStorage) -> None:
    """Attack on the write-back: the integrator dies holding rows, another takes over;
    the checkpoints commit the right roots throughout, the new integrator recomputes
    what was lost, and the old one, writing what it held afterwards, is refused and goes
    on from the rows instead of building on its stale tiles."""
    seq = Sequencer(storage, SIGNER, SIGNER.name, index=_held_index(storage))
    data, reference = entries(15), VerifiableIndex()

    def commit(batch, receipts):  # type: ignore[no-untyped-def]
        if batch is not None:
            storage.commit_batch(batch)

    with storage.integration_lock():
        seq.integrate_held([Submission(d, FACTS) for d in data[:4]], commit)
        seq.integrate_held([Submission(d, FACTS) for d in data[4:9]], commit)
    assert _root_in(storage) == (9, reference.extend(0, data[:9]))
    assert seq.index is not None and seq.index.holding and seq.index.written_size == 0
    fresh = _sequencer(storage)  # the next integrator: the held rows never reached it
    fresh.integrate([Submission(d, FACTS) for d in data[9:12]])
    assert _root_in(storage) == (12, reference.extend(9, data[9:12]))
    assert fresh.index is not None and fresh.index.written_size == 12
    with pytest.raises(IndexStoreError, match="cannot add from 0"):
        seq.index.flush()
    assert not seq.index.holding and seq.index.size == 12
    seq.integrate([Submission(d, FACTS) for d in data[12:]])
    assert _root_in(storage) == (15, reference.extend(12, data[12:]))
    assert seq.index.root() == reference.root and seq.index.written_size == 15


def test_an_integrator_taking_turns_writes_what_it_holds_before_each_receipt(
        storage: LogStorage) -> None:
    """On SQLite every frontend's integrator takes the lock in turn, batch by batch (the
    next would recompute what this one held): however long its write-back may hold
    rows, each batch's are written before the lock is let go and the receipts given,
    so a publish is found by the next search."""
    seq = Sequencer(storage, SIGNER, SIGNER.name,
                    index=open_index(storage, WriteBack(entries=10**6, seconds=1e9)))
    seq.ensure_checkpoint()
    seq.start()
    try:
        got = seq.submit([Submission(d, FACTS) for d in entries(5)])
        assert all(not isinstance(r, BaseException) for r in got)
        assert seq.index is not None and seq.index.written_size == 5
        key = next(k for k in entry_keys(entries(1)[0]) if k.kind == "type")
        assert seq.index.lookup(key).indices == [0, 1, 2, 3, 4]
    finally:
        seq.close()


def test_a_write_back_needs_a_bound() -> None:
    with pytest.raises(ValueError, match="at least 1 entry"):
        WriteBack(entries=0)
    with pytest.raises(ValueError, match="at least 1 entry"):
        WriteBack(seconds=float("nan"))


def test_the_stored_benchmark_runs_with_a_write_back_as_benchmarks_md_documents_it(
        tmp_path: Path) -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_vindex.py"
    proc = subprocess.run([sys.executable, str(script), "--stored", "--tiny", "--batch", "100",
                           "--write-back", "500"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "batches of 100, rows written every 500 entries" in proc.stdout, proc.stdout
    assert "| 1,000 |" in proc.stdout and "| 2,000 |" in proc.stdout, proc.stdout


@pytest.mark.parametrize("write_back", [None, WriteBack(entries=300, seconds=1e9)])
def test_a_trimmed_tile_cache_keeps_the_roots_right(
        write_back: WriteBack | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `_CACHED_TILES` the cache keeps only the top two levels (after a write, so
    no held tile is dropped); the tiles read again below them give the same roots."""
    import ledger.vindex._stored as stored

    monkeypatch.setattr(stored, "_CACHED_TILES", 1)
    rows = MemoryIndexRows()
    index, reference = StoredIndex(rows, write_back), VerifiableIndex()
    data = entries(2000)
    trimmed = 0
    for lo in range(0, 2000, 100):
        add_batch(index, reference, data, lo, 100)
        if not index.holding:
            assert all(len(path) < 2 for path in index._cache)
            trimmed += any(depth >= 16 for depth, _ in rows.tiles)
    assert trimmed > 0, "the map never grew tiles below the top two levels"
    index.flush()
    assert index.root() == reference.root == StoredIndex(rows).root()


def test_tiles_an_update_writes_without_having_read_them_are_read_in_one_call() -> None:
    """A leaf pushed down beside a new key can land in a tile that no changed key's path
    crosses (they part within its top levels). Such tiles must be read together, once a
    batch, not one query each (a round trip each on PostgreSQL), and the roots stay right."""
    from ledger.vindex import entry_key_hashes
    from ledger.vindex._map import prefix

    rows = MemoryIndexRows()
    index, reference = StoredIndex(rows), VerifiableIndex()
    data = entries(6000)
    index.commit(index.prepare(0, data[:5000]))
    reference.extend(0, data[:5000])
    calls: list[list[TileKey]] = []
    real = rows.read_tiles

    def counted(keys: object) -> dict[TileKey, bytes]:
        calls.append(list(keys))  # type: ignore[call-overload]
        return real(calls[-1])

    rows.read_tiles = counted  # type: ignore[method-assign]
    index._cache.clear()  # every tile is read from the rows again
    batch = data[5000:]
    pending = index.prepare(5000, batch)
    assert pending.root == reference.extend(5000, batch)
    changed = {k for e in batch for k in entry_key_hashes(e)}
    off_path = {(d, p) for call in calls for d, p in call
                if not any(prefix(k, d) == p for k in changed)}
    assert off_path, "no tile off the changed keys' paths was read: the case is not exercised"
    assert len(calls) <= 2, f"{len(calls)} reads for one batch (the prefetch, then the rest)"
    index.commit(pending)
    assert index.root() == reference.root


def test_tile_upserts_are_cut_in_runs_of_bounded_bytes() -> None:
    from ledger.vindex._postgres import _chunks

    tiles = {(16, bytes([i])): b"x" * n for i, n in enumerate([5, 5, 5, 12, 1, 1])}
    runs = list(_chunks(tiles, 10))
    assert [[len(t) for _, t in run] for run in runs] == [[5, 5], [5], [12], [1, 1]]
    assert [kv for run in runs for kv in run] == list(tiles.items()), "every tile, in order"
    assert list(_chunks({}, 10)) == []


@pytest.mark.postgresql
def test_on_postgresql_tiles_upserted_a_statement_each_give_the_same_index(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import ledger.vindex._postgres as pg_rows
    from ledger.storage._postgres import PostgresStorage

    monkeypatch.setattr(pg_rows, "MAX_UPSERT_BYTES", 1)  # every tile in a statement of its own
    storage = PostgresStorage(pg_url, pool_size=2)
    try:
        index, reference = open_index(storage), VerifiableIndex()
        data = entries(600)
        for lo in range(0, 600, 200):
            add_batch(index, reference, data, lo, 200)
        again = StoredIndex(pg_rows.PgIndexRows(storage))  # read back from the rows alone
        assert again.size == 600 and again.root() == reference.root
        answer = again.lookup(IndexKey("name", "acme/k1"))
        assert answer.indices == list(range(1, 600, 3))
    finally:
        storage.close()
