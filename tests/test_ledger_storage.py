"""Storage: the SQLite backend and the in-memory fake behave the same; records round-trip."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.storage import (
    EntryFacts,
    EntrySummary,
    IntegratedBatch,
    LogStorage,
    SearchPage,
    SqliteStorage,
    StorageError,
    StoredCheckpoint,
    StoredEntry,
    StoredHashReader,
    tile_nodes,
)
from ledger.storage._schema import SCHEMA_VERSION
from ledger.tlog.merkle import MemoryHashStore, MissingHashError, leaf_hash

HEX = st.text("0123456789abcdef", min_size=64, max_size=64)
NAME = st.from_regex(r"[a-z0-9]{1,8}/[a-z0-9]{1,8}", fullmatch=True)


@st.composite
def stored_entries(draw: st.DrawFn) -> StoredEntry:
    data = draw(st.binary(min_size=1, max_size=200))
    return StoredEntry(
        index=draw(st.integers(0, 2**62)), leaf_hash=leaf_hash(data), data=data,
        predicate_type=draw(st.text(min_size=1, max_size=40)),
        subjects=tuple(draw(st.lists(st.tuples(NAME, HEX), min_size=1, max_size=3))),
        keyids=tuple(draw(st.lists(HEX, max_size=3))),
        integrated_at=draw(st.floats(0, 2e9)),
    )


@given(stored_entries())
def test_records_round_trip(e: StoredEntry) -> None:
    assert StoredEntry.from_json(e.to_json()) == e
    assert EntrySummary.from_json(e.summary().to_json()) == e.summary()
    page = SearchPage((e.summary(),), 7)
    assert SearchPage.from_json(page.to_json(), EntrySummary.from_json) == page
    cp = StoredCheckpoint(3, e.leaf_hash, b"note\n\n\xe2\x80\x94 sig\n", 1.5)
    assert StoredCheckpoint.from_json(cp.to_json()) == cp



def _entry(i: int, name: str = "acme/k", keyids: tuple[str, ...] = ("aa" * 32,)) -> StoredEntry:
    data = f"entry {i}".encode()
    digest = hashlib.sha256(data).hexdigest()
    return StoredEntry(i, leaf_hash(data), data, f"https://p/{i % 2}", ((name, digest),), keyids, 10.0 + i)


def _batch(entries: list[StoredEntry], note: bytes = b"n") -> IntegratedBatch:
    size = entries[-1].index + 1
    return IntegratedBatch(tuple(entries), {(0, 0): b"".join(e.leaf_hash for e in entries)},
                           StoredCheckpoint(size, b"\x00" * 32, note, 1.0))


def test_commit_and_read(storage: LogStorage) -> None:
    assert storage.latest_checkpoint() is None and storage.entry_count() == 0
    first = [_entry(i, "acme/a" if i < 3 else "acme/b") for i in range(5)]
    storage.commit_batch(_batch(first))
    assert storage.entry_count() == 5
    assert storage.get_entry(3) == first[3]
    assert storage.get_entry(5) is None
    assert storage.get_entries(1, 4) == first[1:4]
    assert storage.find_leaf(first[2].leaf_hash) == 2
    assert storage.find_leaves([first[0].leaf_hash, b"x" * 32]) == {first[0].leaf_hash: 0}
    latest = storage.latest_checkpoint()
    assert latest is not None and latest.size == 5
    assert storage.read_tile(0, 0) == b"".join(e.leaf_hash for e in first)
    assert storage.read_tile(0, 1) == b""
    assert [s.index for s in storage.recent_entries(2)] == [4, 3]
    assert [s.index for s in storage.recent_entries(2, before=3)] == [2, 1]
    # Search with cursor pagination, each field.
    page = storage.search("name", "acme/a", 0, 2)
    assert [r.index for r in page.results] == [0, 1] and page.next_cursor == 2
    page = storage.search("name", "acme/a", 2, 2)
    assert [r.index for r in page.results] == [2] and page.next_cursor is None
    assert [r.index for r in storage.search("digest", first[4].subjects[0][1]).results] == [4]
    assert len(storage.search("keyid", "aa" * 32).results) == 5
    assert [r.index for r in storage.search("predicate_type", "https://p/1").results] == [1, 3]
    assert storage.search("name", "nobody/none").results == ()
    for field in ("name", "digest", "keyid", "predicate_type"):  # a hostile query string
        assert storage.search(field, "acme/a\x00' OR 1=1 --").results == ()
    with pytest.raises(StorageError, match="unknown search field"):
        storage.search("color", "red")
    with pytest.raises(StorageError, match="too large"):
        storage.get_entries(0, 5000)


def test_commit_refuses_gaps_rewinds_and_duplicates(storage: LogStorage) -> None:
    storage.commit_batch(_batch([_entry(0), _entry(1)]))
    with pytest.raises(StorageError, match="starts at 3"):
        storage.commit_batch(_batch([_entry(3)]))
    with pytest.raises(StorageError, match="consecutive"):
        storage.commit_batch(_batch([_entry(2), _entry(4)]))
    dup = StoredEntry(3, _entry(2).leaf_hash, b"entry 2", "p", (("a/b", "00" * 32),), (), 1.0)
    with pytest.raises(StorageError, match="duplicate"):
        storage.commit_batch(_batch([_entry(2), dup]))
    # Nothing of the failed batches is visible.
    assert storage.entry_count() == 2
    latest = storage.latest_checkpoint()
    assert latest is not None and latest.size == 2
    storage.commit_batch(_batch([_entry(2)]))
    assert [c.size for c in storage.checkpoints(10)] == [3, 2]
    assert [c.size for c in storage.checkpoints(10, before_size=3)] == [2]


def test_blobs_and_files(storage: LogStorage) -> None:
    assert storage.put_blob("ab" * 32, b"hello") is True
    assert storage.put_blob("ab" * 32, b"hello") is False
    assert storage.get_blob("ab" * 32) == b"hello" and storage.blob_info("ab" * 32) == 5
    assert storage.get_blob("cd" * 32) is None and storage.blob_info("cd" * 32) is None
    storage.write_files({"tile/0/000.p/3": b"a" * 96, "checkpoint": b"cp"})
    assert storage.read_file("tile/0/000.p/3") == b"a" * 96
    storage.write_files({"tile/0/000": b"b" * 8192})
    assert storage.read_file("tile/0/000.p/3") is None, "partials of a full tile are dropped"
    assert sorted(storage.list_files()) == ["checkpoint", "tile/0/000"]
    for bad in ["../x", "tile/0/../../etc", "/etc/passwd", "tile/0/000/", "tiles/0/000", "log.db"]:
        with pytest.raises(StorageError):
            storage.read_file(bad)
        with pytest.raises(StorageError):
            storage.write_files({bad: b""})


def test_blob_collection_listing_pages_and_deletes(storage: LogStorage) -> None:
    """What the blob collector relies on, on every backend: keyset pages in (created, digest)
    order below a cutoff, bounded limits, and deletion that reports what it removed."""
    digests = [f"{i:02x}" * 32 for i in range(5)]
    for d in digests:
        assert storage.put_blob(d, d.encode())
    future = time.time() + 3600
    first = storage.blobs_before(future, None, 2)
    assert len(first) == 2
    rest = storage.blobs_before(future, first[-1], 10)
    listed = first + rest
    assert sorted(d for _, d in listed) == digests and listed == sorted(listed)
    assert storage.blobs_before(0.0, None, 10) == [], "nothing was created before the epoch"
    for bad in (0, 100_000_000):
        with pytest.raises(StorageError):
            storage.blobs_before(future, None, bad)
    assert storage.delete_blob(digests[0]) is True
    assert storage.delete_blob(digests[0]) is False
    assert storage.get_blob(digests[0]) is None
    assert [d for _, d in storage.blobs_before(future, None, 10)] == sorted(digests[1:])


def test_schema_version_recorded_and_newer_refused(tmp_path: Path) -> None:
    s = SqliteStorage(tmp_path)
    s.close()
    conn = sqlite3.connect(tmp_path / "log.db")
    assert conn.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(StorageError, match="newer than this ktl"):
        SqliteStorage(tmp_path)


def test_migration_from_version_1(tmp_path: Path) -> None:
    from ledger.storage._schema import MIGRATIONS

    conn = sqlite3.connect(tmp_path / "log.db")
    for statement in MIGRATIONS[0].split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version VALUES (1)")
    conn.execute("INSERT INTO tiles (level, idx, hashes) VALUES (0, 0, X'00')")
    conn.commit()
    conn.close()
    s = SqliteStorage(tmp_path)
    assert s.read_tile(0, 0) == b"\x00" and s.read_tile_nodes(0, 0) == b""
    s.close()
    conn = sqlite3.connect(tmp_path / "log.db")
    assert conn.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,)
    assert SCHEMA_VERSION == 4


def test_digest_summaries_are_kept_at_integration(storage: LogStorage) -> None:
    # Issue 26 row 3: a page about a digest reads its counts, not its entries.
    digest, other = "ab" * 32, "cd" * 32
    entries = []
    for i in range(7):
        data = f"entry {i}".encode() + b"x" * i
        subjects = (("acme/k", digest),) if i != 3 else (("acme/k", digest), ("b/k", digest))
        if i == 6:
            subjects = (("o/k", other),)
        entries.append(StoredEntry(i, leaf_hash(data), data, f"https://p/{i % 2}", subjects,
                                   (), 1.0))
    storage.commit_batch(_batch(entries[:4]))
    storage.commit_batch(_batch(entries[4:]))
    got = storage.digest_summary(digest)
    assert got.entries == 6, "an entry naming the digest twice counts once"
    by_type = {k.predicate_type: k for k in got.kinds}
    even = [e for e in entries[:6] if e.index % 2 == 0]
    assert by_type["https://p/0"].entries == 3 and by_type["https://p/0"].last_index == 4
    assert by_type["https://p/0"].bytes == sum(len(e.data) for e in even)
    assert by_type["https://p/1"].last_index == 5 and got.count("https://p/1") == 3
    assert storage.digest_summary(other).entries == 1
    assert storage.digest_summary("ee" * 32).kinds == ()
    assert storage.digest_summary("x\x00' OR 1=1 --").kinds == ()


def test_search_signed_finds_a_keys_entries_about_a_digest(
        storage: LogStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 26 row 4: reproduce asks for exactly its publisher's entries; strangers' entries
    # about the digest are not rows of that search, and one call reads a bounded scan.
    import ledger.storage._memory
    import ledger.storage._sqlite
    import ledger.storage._types

    for module in (ledger.storage._types, ledger.storage._memory, ledger.storage._sqlite):
        monkeypatch.setattr(module, "SIGNED_SCAN", 4)
    if type(storage).__name__ == "PostgresStorage":
        import ledger.storage._postgres

        monkeypatch.setattr(ledger.storage._postgres, "SIGNED_SCAN", 4)
    me, stranger = "aa" * 32, "bb" * 32
    digest, other = "ab" * 32, "cd" * 32
    entries = []
    for i in range(20):
        data = f"entry {i}".encode()
        mine = i % 3 == 0
        about = digest if i % 2 == 0 else other
        subjects = (("x/k", other), ("acme/k", about)) if i == 6 else (("acme/k", about),)
        entries.append(StoredEntry(i, leaf_hash(data), data, "https://p", subjects,
                                   (me,) if mine else (stranger,), 1.0))
    storage.commit_batch(_batch(entries))
    want = [e.index for e in entries if me in e.keyids and any(d == digest for _, d in e.subjects)]
    assert want == [0, 6, 12, 18]
    got: list[int] = []
    cursor: int | None = 0
    calls = 0
    while cursor is not None:
        page = storage.search_signed(digest, me, cursor, 1)
        assert len(page.results) <= 1
        got.extend(r.index for r in page.results)
        assert page.next_cursor is None or page.next_cursor > cursor
        cursor = page.next_cursor
        calls += 1
    assert got == want and calls <= 8
    assert [r.index for r in storage.search_signed(digest, me, 0, 50).results] == [0, 6]
    assert storage.search_signed(digest, "cc" * 32).results == ()
    assert storage.search_signed("x\x00' OR 1=1 --", me).results == ()


@given(st.lists(st.booleans(), max_size=30), st.integers(1, 5), st.integers(1, 6))
def test_signed_pages_cover_every_match_once(matches: list[bool], limit: int, scan: int) -> None:
    import ledger.storage._types as types

    old, types.SIGNED_SCAN = types.SIGNED_SCAN, scan
    try:
        rows = [(3 * i, m) for i, m in enumerate(matches)]
        got: list[int] = []
        cursor: int | None = 0
        while cursor is not None:
            rest = [r for r in rows if r[0] >= cursor][: scan + 1]
            ids, nxt = types.signed_page(rest, limit)
            assert len(ids) <= limit and (nxt is None or nxt > cursor)
            got.extend(ids)
            cursor = nxt
        assert got == [i for i, m in rows if m]
    finally:
        types.SIGNED_SCAN = old


def test_migration_to_version_4_summarizes_the_stored_entries(tmp_path: Path) -> None:
    from ledger.storage._schema import MIGRATIONS

    s = SqliteStorage(tmp_path)
    s.commit_batch(_batch([_entry(i) for i in range(5)]))
    s.close()
    conn = sqlite3.connect(tmp_path / "log.db")
    conn.execute("DROP TABLE digest_summaries")
    conn.execute("UPDATE schema_version SET version = 3")
    conn.commit()
    conn.close()
    assert len(MIGRATIONS) == 4
    s = SqliteStorage(tmp_path)
    try:
        first = _entry(0)
        got = s.digest_summary(first.subjects[0][1])
        assert [(k.predicate_type, k.entries, k.bytes, k.last_index) for k in got.kinds] == [
            ("https://p/0", 1, len(first.data), 0)]
    finally:
        s.close()


def test_entry_facts_need_a_subject() -> None:
    with pytest.raises(StorageError):
        EntryFacts("p", (), ())


class _Tiles:
    """Tile rows built from a MemoryHashStore, as the sequencer would store them."""

    def __init__(self, store: MemoryHashStore, with_nodes: bool) -> None:
        self.store = store
        self.with_nodes = with_nodes

    def read_tile(self, level: int, index: int) -> bytes:
        size = self.store.size
        n = size >> (8 * level)
        lo, hi = index * 256, min(n, (index + 1) * 256)
        return b"".join(self.store.read_hashes([(8 * level, i) for i in range(lo, hi)]))

    def read_tile_nodes(self, level: int, index: int) -> bytes:
        data = self.read_tile(level, index)
        return tile_nodes(data) if self.with_nodes and len(data) == 8192 else b""


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 70_000 // 64), st.data())
def test_stored_hash_reader_agrees_with_every_stored_hash(size: int, data: st.DataObject) -> None:
    size *= data.draw(st.sampled_from([1, 3, 64]))
    store = MemoryHashStore()
    for i in range(size):
        store.append(leaf_hash(i.to_bytes(4, "big")))
    reader = StoredHashReader(_Tiles(store, data.draw(st.booleans())), size)
    for _ in range(30):
        level = data.draw(st.integers(0, size.bit_length() - 1))
        count = size >> level
        if not count:
            continue
        index = data.draw(st.integers(0, count - 1))
        assert reader.read_hashes([(level, index)]) == store.read_hashes([(level, index)])
    with pytest.raises(MissingHashError):
        reader.read_hashes([(0, size)])


def test_the_signed_scan_is_the_one_the_contract_names() -> None:
    from ledger.storage import SIGNED_SCAN

    contracts = (Path(__file__).resolve().parent.parent / "docs" / "CONTRACTS.md").read_text()
    assert SIGNED_SCAN == 2000
    assert "no more than 2,000 of the key's entries" in " ".join(contracts.split())
