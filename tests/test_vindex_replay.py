"""A `StoredIndex` whose rows another writer moved replays that writer's entries over the
tiles it holds instead of reading the dense top tiles again (`StoredIndex._replay`).

The replay must leave exactly the tiles the rows hold, or give way to reading the rows:
checked against the naive reference and the rows themselves, batch after batch, with
caches cut back at random, and with a planted stale tile and a tile it cannot get."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from ledger.vindex import MemoryIndexRows, StoredIndex, VerifiableIndex, entry_keys
from ledger.vindex._sqlite import SqliteIndexRows
from ledger.vindex._stored import IndexRows
from ledger.vindex._tiles import TiledNodes, compiled, parse_tile
from tests.test_vindex_store import add_batch, entries

pytestmark = pytest.mark.skipif(not compiled(), reason="the replay runs in the compiled walk")


def _rows(kind: str, tmp_path: Path) -> IndexRows:
    if kind == "memory":
        return MemoryIndexRows()
    conn = sqlite3.connect(tmp_path / "log.db", isolation_level=None)
    return SqliteIndexRows(lambda: conn)


def _held_as_written(index: StoredIndex, rows: IndexRows) -> None:
    """Every tile the index holds is the tile the rows hold (record order aside)."""
    got = rows.read_tiles([(8 * len(path), path) for path in index._cache])
    for path, tile in index._cache.items():
        data = got.get((8 * len(path), path))
        assert tile == ({} if data is None else parse_tile(8 * len(path), path, data)), path.hex()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_writers_taking_turns_replay_each_others_batches(kind: str, tmp_path: Path) -> None:
    rows = _rows(kind, tmp_path)
    data = entries(1500)
    a, b = StoredIndex(rows), StoredIndex(rows)
    reference = VerifiableIndex()
    rng = random.Random(11)
    lo, last = 0, None
    expected = {id(a): 0, id(b): 0}  # one replay per turn after the other's, once it read
    started: set[int] = set()
    while lo < len(data):
        who = rng.choice((a, b))
        if last is not None and who is not last and id(who) in started:
            expected[id(who)] += 1
        started.add(id(who))
        last = who
        who.catch_up(lambda start, end: data[start:end], lo)
        if rng.random() < 0.3:  # hold only the top tiles: the replay reads the rest as written
            keep = rng.choice((1, 2))
            for index in (a, b):
                index._cache = {p: t for p, t in index._cache.items() if len(p) < keep}
        n = rng.randint(1, 120)
        add_batch(who, reference, data, lo, min(n, len(data) - lo))
        lo += n
        _held_as_written(who, rows)
    for index in (a, b):
        if index is not last:
            expected[id(index)] += 1
        index.catch_up(lambda start, end: data[start:end], len(data))
        assert index.root() == reference.root
        _held_as_written(index, rows)
    assert (a.replays, b.replays) == (expected[id(a)], expected[id(b)])
    assert min(a.replays, b.replays) >= 5
    assert a.reloads == b.reloads == 0


def _two_writers(rows: IndexRows) -> tuple[StoredIndex, StoredIndex, list[bytes], VerifiableIndex]:
    data = entries(400)
    a, b, reference = StoredIndex(rows), StoredIndex(rows), VerifiableIndex()
    add_batch(a, reference, data, 0, 200)
    b.catch_up(lambda start, end: data[start:end], 200)  # b reads the rows: holds nothing yet
    add_batch(b, reference, data, 200, 50)
    a.catch_up(lambda start, end: data[start:end], 250)
    assert a.replays == 1
    add_batch(a, reference, data, 250, 50)  # b's turn comes next, over the tiles it holds
    return a, b, data, reference


def test_a_long_run_of_the_other_writers_entries_is_read_in_bounded_ranges() -> None:
    """The log answers at most 1,000 entries a read (as `LogStorage.get_entries`)."""
    rows = MemoryIndexRows()
    data = entries(2700)
    a, b, reference = StoredIndex(rows), StoredIndex(rows), VerifiableIndex()
    reads: list[tuple[int, int]] = []

    def log(start: int, end: int) -> list[bytes]:
        if end - start > 1000:
            raise ValueError("entry range too large: at most 1000 entries at once")
        reads.append((start, end))
        return data[start:end]

    add_batch(a, reference, data, 0, 100)
    b.catch_up(log, 100)
    add_batch(b, reference, data, 100, 100)
    a.catch_up(log, 200)
    add_batch(a, reference, data, 200, 2500)
    reads.clear()
    b.catch_up(log, 2700)
    assert b.replays == 1 and b.reloads == 0
    assert reads == [(200, 1200), (1200, 2200), (2200, 2700)]
    assert b.root() == reference.root
    _held_as_written(b, rows)


def test_a_stale_tile_held_is_caught_by_the_root_and_the_rows_read_again(tmp_path: Path) -> None:
    """A held tile the rows no longer match where the replay builds on it (a bug, or
    memory gone bad): the leaf of a kernel name the other writer's entries name again,
    its list hash changed. The replay's root differs from the rows'; nothing of it is
    kept, and the rows are read again."""
    rows = MemoryIndexRows()
    _, b, data, reference = _two_writers(rows)
    name = next(k.hash for k in entry_keys(data[300]) if k.kind == "name")
    planted = 0
    for tile in b._cache.values():
        for at, record in tile.items():
            if record[2] == 0 and record[3:35] == name:  # its leaf: kind 0, key, value
                tile[at] = record[:-1] + bytes((record[-1] ^ 1,))
                planted += 1
    assert planted == 1
    b.catch_up(lambda start, end: data[start:end], 300)
    assert b.replays == 0 and b.reloads == 1
    add_batch(b, reference, data, 300, 50)
    assert b.root() == reference.root
    _held_as_written(b, rows)


def test_tiles_the_prefetch_missed_are_read_by_the_walk_as_written(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A leaf pushed down off the keys' paths lands in a tile no key's path names, which
    the one-call prefetch cannot know of: the walk reads such a tile as written when it
    reaches it. With nothing prefetched at all, every tile comes that way: the same."""
    rows = MemoryIndexRows()
    _, b, data, reference = _two_writers(rows)
    monkeypatch.setattr(StoredIndex, "_settled_tiles", lambda self, added: {})
    b.catch_up(lambda start, end: data[start:end], 300)
    assert b.replays == 1 and b.reloads == 0
    _held_as_written(b, rows)
    add_batch(b, reference, data, 300, 50)
    assert b.root() == reference.root


def test_entries_that_do_not_match_the_rows_are_not_replayed(tmp_path: Path) -> None:
    """A log that returns other entries than the ones indexed (or too few): the replay's
    root is not the rows', or it has nothing to replay; the rows are read again."""
    rows = MemoryIndexRows()
    _, b, data, reference = _two_writers(rows)
    other = entries(100, start=5000)
    b.catch_up(lambda start, end: other[: end - start], 300)
    assert b.replays == 0 and b.reloads == 1
    assert b.root() == reference.root
    _, c, data, _ = _two_writers(MemoryIndexRows())
    c.catch_up(lambda start, end: data[start: end - 1], 300)  # one entry short
    assert c.replays == 0 and c.reloads == 1
    assert c.root() == reference.root


def test_the_compiled_replay_refuses_settled_tiles_that_are_not_a_dict() -> None:
    from ledger.vindex._ctrie import update_tiles

    key = bytes(32)
    with pytest.raises(TypeError, match="settled"):
        update_tiles([key], [[1]], {}, {b"": {}}, lambda p: {}, {}, {}, [])  # type: ignore[arg-type]
    nodes = TiledNodes(lambda keys: {}, {})
    with pytest.raises(ValueError, match="nothing to replay"):
        nodes.replay_lists({}, {})
