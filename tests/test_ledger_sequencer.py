"""The sequencer: batches, duplicates, tiles and checkpoints, several integrators, start-up checks."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.sequencer import Batching, Receipt, Sequencer, SequencerClosed, Submission
from ledger.storage import (
    EntryFacts,
    LogStorage,
    MemoryStorage,
    SqliteStorage,
    StorageError,
    StoredEntry,
    check_log,
    tile_nodes,
)
from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.merkle import MemoryHashStore, leaf_hash, root_of, verify_consistency
from ledger.tlog.note import NoteSigner
from ledger.tlog.tiles import (
    decode_bundle,
    entries_path,
    entry_bundles_for_size,
    tile_bytes,
    tile_path,
    tiles_for_size,
)

SIGNER = NoteSigner("example.com/log", Ed25519PrivateKey.from_private_bytes(b"\x07" * 32))
FACTS = EntryFacts("https://p/kernel/v1", (("acme/k", "ab" * 32),), ("cd" * 32,))


def sub(i: int) -> Submission:
    return Submission(f"entry number {i}".encode(), FACTS)


def check_files_match(storage: LogStorage, datas: list[bytes]) -> None:
    """Every tile and bundle for the final size equals one computed independently."""
    size = len(datas)
    store = MemoryHashStore.from_entries(datas)
    for ref in tiles_for_size(size):
        want = tile_bytes(ref, store)
        assert storage.read_file(tile_path(ref.level, ref.index, ref.width)) == want, ref
        assert storage.read_tile(ref.level, ref.index)[: len(want)] == want
        if ref.width == 256:
            assert storage.read_tile_nodes(ref.level, ref.index) == tile_nodes(want)
    for ref in entry_bundles_for_size(size):
        got = storage.read_file(entries_path(ref.index, ref.width))
        assert got is not None
        assert decode_bundle(got, ref.width) == datas[ref.index * 256 : ref.index * 256 + ref.width]


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=8))
def test_batches_build_the_same_tree_as_the_reference(batches: list[int]) -> None:
    storage = MemoryStorage()
    seq = Sequencer(storage, SIGNER, SIGNER.name)
    datas: list[bytes] = []
    roots: dict[int, bytes] = {}
    for n in batches:
        subs = [sub(len(datas) + k) for k in range(n)]
        receipts = seq.integrate(subs)
        assert [r.index for r in receipts] == list(range(len(datas), len(datas) + n))
        datas.extend(s.data for s in subs)
        cp = open_checkpoint(receipts[0].checkpoint.note, SIGNER.verifier(), SIGNER.name).checkpoint
        assert cp.size == len(datas)
        assert cp.root_hash == root_of([leaf_hash(d) for d in datas])
        roots[cp.size] = cp.root_hash
    check_files_match(storage, datas)
    assert storage.read_file("checkpoint") == storage.latest_checkpoint().note  # type: ignore[union-attr]
    # A fresh sequencer (another process) resumes from storage and keeps extending.
    again = Sequencer(storage, SIGNER, SIGNER.name)
    extra = [sub(len(datas) + k) for k in range(3)]
    again.integrate(extra)
    datas.extend(s.data for s in extra)
    check_files_match(storage, datas)
    store = MemoryHashStore.from_entries(datas)
    from ledger.tlog.merkle import consistency_proof

    for size, root in roots.items():
        verify_consistency(size, len(datas), root, store.root(), consistency_proof(size, len(datas), store))


def test_duplicates_answer_the_existing_index() -> None:
    storage = MemoryStorage()
    seq = Sequencer(storage, SIGNER, SIGNER.name)
    first = seq.integrate([sub(0), sub(1), sub(0)])
    assert [(r.index, r.duplicate) for r in first] == [(0, False), (1, False), (0, True)]
    again = seq.integrate([sub(1)])
    assert again[0].index == 1 and again[0].duplicate
    assert again[0].checkpoint.size == 2, "all-duplicate batch signs nothing new"
    assert len(storage.checkpoints(10)) == 1
    mixed = seq.integrate([sub(2), sub(1)])
    assert [(r.index, r.duplicate) for r in mixed] == [(2, False), (1, True)]
    assert all(r.checkpoint.size == 3 for r in mixed)


def test_threads_and_two_integrators_share_one_tree(tmp_path: Path) -> None:
    """Two sequencers on one data folder stand for two gunicorn workers."""
    a = Sequencer(SqliteStorage(tmp_path), SIGNER, SIGNER.name, batching=Batching(max_delay=0.002))
    b = Sequencer(SqliteStorage(tmp_path), SIGNER, SIGNER.name, batching=Batching(max_delay=0.002))
    a.start()
    b.start()
    receipts: list[Receipt] = []
    lock = threading.Lock()

    def client(t: int) -> None:
        seq = a if t % 2 else b
        for i in range(25):
            (r,) = seq.submit([sub(t * 1000 + i)])
            assert isinstance(r, Receipt)
            with lock:
                receipts.append(r)

    threads = [threading.Thread(target=client, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    a.close()
    b.close()
    assert sorted(r.index for r in receipts) == list(range(150))
    storage = SqliteStorage(tmp_path)
    datas = [e.data for e in storage.get_entries(0, 150)]
    check_files_match(storage, datas)
    sizes = [c.size for c in reversed(storage.checkpoints(500))]
    assert sizes == sorted(set(sizes)), "checkpoint sizes strictly increase"
    store = MemoryHashStore.from_entries(datas)
    for c in storage.checkpoints(500):
        assert root_of([leaf_hash(d) for d in datas[: c.size]]) == c.root_hash
    assert check_log(storage, SIGNER.verifier(), SIGNER.name).size == 150
    assert store.size == 150
    storage.close()


def test_close_drains_the_queue_and_refuses_more() -> None:
    storage = MemoryStorage()
    seq = Sequencer(storage, SIGNER, SIGNER.name, batching=Batching(max_delay=0.05))
    seq.start()
    out: list[object] = []
    with storage.integration_lock():  # hold the integrator back until both are queued
        t = threading.Thread(target=lambda: out.extend(seq.submit([sub(0), sub(1)])))
        t.start()
        deadline = time.monotonic() + 10
        while storage.entry_count() == 0 and time.monotonic() < deadline and not seq._queue:
            time.sleep(0.001)
        seq_closer = threading.Thread(target=seq.close)
        seq_closer.start()
    seq_closer.join()
    t.join()
    assert [r.index for r in out if isinstance(r, Receipt)] == [0, 1]
    with pytest.raises(SequencerClosed):
        seq.submit([sub(2)])


def _filled(tmp_path: Path, n: int = 300) -> SqliteStorage:
    storage = SqliteStorage(tmp_path)
    seq = Sequencer(storage, SIGNER, SIGNER.name)
    seq.integrate([sub(i) for i in range(n // 2)])
    seq.integrate([sub(i) for i in range(n // 2, n)])
    return storage


def test_check_log_accepts_and_repairs_missing_files(tmp_path: Path) -> None:
    storage = _filled(tmp_path)
    assert check_log(storage, SIGNER.verifier(), SIGNER.name, deep=True).rewritten == ()
    (tmp_path / "tiles" / "tile" / "0" / "000").unlink()
    (tmp_path / "tiles" / "tile" / "entries" / "001.p" / "44").unlink()
    (tmp_path / "tiles" / "checkpoint").unlink()
    (tmp_path / "tiles" / "tile" / "1" / "000.p" / "1").write_bytes(b"")  # a torn write
    result = check_log(storage, SIGNER.verifier(), SIGNER.name)
    assert sorted(result.rewritten) == [
        "checkpoint", "tile/0/000", "tile/1/000.p/1", "tile/entries/001.p/44"
    ]
    check_files_match(storage, [e.data for e in storage.get_entries(0, 300)])
    with pytest.raises(StorageError, match="missing"):
        (tmp_path / "tiles" / "tile" / "0" / "000").unlink()
        check_log(storage, SIGNER.verifier(), SIGNER.name, repair=False)


@pytest.mark.parametrize(
    "damage", ["tile_file", "tile_row", "tile_nodes", "entry_data", "extra_entry", "key", "origin"]
)
def test_check_log_refuses_a_damaged_log(tmp_path: Path, damage: str) -> None:
    storage = _filled(tmp_path)
    verifier = SIGNER.verifier()
    origin = SIGNER.name
    db = sqlite3.connect(tmp_path / "log.db")
    if damage == "tile_file":
        (tmp_path / "tiles" / "tile" / "0" / "000").write_bytes(b"\x00" * 8192)
    elif damage == "tile_row":
        db.execute("UPDATE tiles SET hashes = zeroblob(length(hashes)) WHERE level = 0 AND idx = 1")
    elif damage == "tile_nodes":
        db.execute("UPDATE tiles SET nodes = zeroblob(length(nodes)) WHERE level = 0 AND idx = 0")
    elif damage == "entry_data":
        db.execute("UPDATE entries SET data = X'00' WHERE idx = 299")
    elif damage == "extra_entry":
        db.execute("INSERT INTO entries VALUES (300, 1, X'01', X'02', 'p', 'a/b', 'cd', '', 1.0)")
    elif damage == "key":
        verifier = NoteSigner(origin, Ed25519PrivateKey.generate()).verifier()
    else:
        origin = "other.example/log"
    db.commit()
    db.close()
    with pytest.raises(StorageError, match="refusing to serve"):
        check_log(storage, verifier, origin)


def test_a_failed_file_write_does_not_fail_a_durable_batch(caplog: pytest.LogCaptureFixture) -> None:
    class FullDisk(MemoryStorage):
        def write_files(self, files: object) -> None:
            raise OSError(28, "No space left on device")

    storage = FullDisk()
    receipts = Sequencer(storage, SIGNER, SIGNER.name).integrate([sub(0), sub(1)])
    assert [r.index for r in receipts] == [0, 1]
    assert storage.entry_count() == 2 and storage.read_file("checkpoint") is None
    assert "could not write tile files" in caplog.text


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 300)), min_size=2, max_size=12))
def test_integrators_taking_turns_catch_up_without_reloading(turns: list[tuple[bool, int]]) -> None:
    """Two processes' sequencers alternate on one log: each reads only what the other added."""
    storage = MemoryStorage()
    seqs = (Sequencer(storage, SIGNER, SIGNER.name), Sequencer(storage, SIGNER, SIGNER.name))
    done = 0
    for which, n in turns:
        seqs[which].integrate([Submission(f"e{i}".encode(), FACTS) for i in range(done, done + n)])
        done += n
    assert [s.reloads for s in seqs] == [1 if any(w == k for w, _ in turns) else 0 for k in (0, 1)]
    assert check_log(storage, SIGNER.verifier(), SIGNER.name, deep=True, repair=False).size == done
    hashes = MemoryHashStore()
    for i in range(done):
        hashes.append(leaf_hash(f"e{i}".encode()))
    for ref in tiles_for_size(done):
        assert storage.read_file(tile_path(ref.level, ref.index, ref.width)) == tile_bytes(ref, hashes)


def test_catch_up_that_disagrees_with_the_checkpoint_reloads() -> None:
    storage = MemoryStorage()
    a, b = Sequencer(storage, SIGNER, SIGNER.name), Sequencer(storage, SIGNER, SIGNER.name)
    a.integrate([Submission(b"first", FACTS)])
    b.integrate([Submission(b"second", FACTS)])
    # The stored leaf hash of b's entry is damaged: a's catch-up would get another root.
    good = storage._entries[1]
    storage._entries[1] = StoredEntry(1, leaf_hash(b"forged"), good.data, good.predicate_type,
                                      good.subjects, good.keyids, good.integrated_at)
    (r,) = a.integrate([Submission(b"third", FACTS)])
    assert a.reloads == 2, "the catch-up was refused and the right edge reloaded from tiles"
    assert r.index == 2 and r.checkpoint.root_hash == root_of(
        [leaf_hash(x) for x in (b"first", b"second", b"third")])


class _NoTileReads:
    """A tile source that fails the test if a proof has to read a tile from storage."""

    def read_tile(self, level: int, index: int) -> bytes:
        raise AssertionError(f"tile {level}/{index} was read from storage")

    def read_tile_nodes(self, level: int, index: int) -> bytes:
        raise AssertionError(f"tile nodes {level}/{index} were read from storage")


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=6))
def test_receipt_proofs_come_from_the_tiles_the_batch_cached(batches: list[int]) -> None:
    """After a batch, every receipt's inclusion proof is built from the cache alone, and
    the cached tiles are the stored ones (a proof from the cache verifies)."""
    from ledger.storage import StoredHashReader, TileCache, expand_tile
    from ledger.tlog.merkle import inclusion_proof, verify_inclusion

    storage = MemoryStorage()
    cache = TileCache(4096)
    seq = Sequencer(storage, SIGNER, SIGNER.name, cache=cache)
    done = 0
    for n in batches:
        receipts = seq.integrate([sub(done + k) for k in range(n)])
        done += n
        cp = receipts[-1].checkpoint
        for r in receipts:
            proof = inclusion_proof(r.index, cp.size, StoredHashReader(_NoTileReads(), cp.size, cache))
            verify_inclusion(r.leaf_hash, r.index, cp.size, proof, cp.root_hash)
    for (tl, ti, width), levels in list(cache._items.items()):
        want = expand_tile(storage.read_tile(tl, ti)[: width * 32])
        # A full tile keeps sub-levels 0..7 (its root is a hash of the tile above).
        assert levels == want[: max(len(levels), min(len(want), 8))], (tl, ti, width)


def test_put_tile_refuses_what_is_not_a_tile() -> None:
    from ledger.storage import TileCache
    from ledger.tlog.merkle import MissingHashError

    cache = TileCache()
    for bad in (b"", b"\x00" * 31, b"\x00" * 33, b"\x00" * (257 * 32)):
        with pytest.raises(MissingHashError, match="is not 1 to 256 hashes"):
            cache.put_tile(0, 0, bad)
    assert cache.get((0, 0, 1)) is None
