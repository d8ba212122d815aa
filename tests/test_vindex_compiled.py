"""The index map's compiled batch update (ledger/vindex/_ctrie.c) against the Python walk
it replaces (`ledger.vindex._map.extend_lists`, the reference) and the naive root: the
same root and the same records written, batch after batch, for keys that share long
prefixes (leaves pushed down within and across tiles); and its refusals."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger.vindex._tiles as tiles_module
from ledger.vindex import IndexProofError, MemoryIndexRows, TiledNodes, list_hash
from ledger.vindex._map import extend_lists
from ledger.vindex._tiles import Tile, TilePath, compiled, parse_tile
from tests.test_vindex import naive_root


def test_the_compiled_walk_is_built_here() -> None:
    """`make test` installs the package with a C compiler and OpenSSL's headers: the
    index must run the compiled walk there (the Python one is the fallback)."""
    assert compiled(), "ledger/vindex/_ctrie.c was not built (see setup.py)"


def sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


keys32 = st.binary(min_size=32, max_size=32)
# keys sharing 7 to 25 bits: splits inside a tile, on a tile's top, and deep
clustered = st.builds(lambda head, tail: head + tail,
                      st.sampled_from([b"\xab", b"\xab\xcd", b"\xab\xcd\x80", b"\x00\x00\x00"]),
                      st.binary(min_size=32, max_size=32)).map(lambda k: k[:32])


def python_walk(nodes: TiledNodes, added: dict[bytes, list[int]]) -> bytes:
    return extend_lists(nodes, added)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.dictionaries(st.one_of(keys32, clustered),
                                st.lists(st.integers(0, 2**63), min_size=1, max_size=3),
                                max_size=14), min_size=1, max_size=5))
def test_the_compiled_walk_writes_what_the_python_walk_writes(
        batches: list[dict[bytes, list[int]]]) -> None:
    rows_c, rows_py = MemoryIndexRows(), MemoryIndexRows()
    known: dict[TilePath, Tile] = {}
    lists: dict[bytes, list[int]] = {}
    for batch in batches:
        for key, more in batch.items():
            lists.setdefault(key, []).extend(more)
        fast = TiledNodes(rows_c.read_tiles, known)
        slow = TiledNodes(rows_py.read_tiles)
        root = fast.extend_lists(batch)
        assert root == python_walk(slow, batch)
        assert root == naive_root({k: list_hash(v) for k, v in lists.items()})
        assert fast.changes() == slow.changes()
        # the same records in each tile (their order in a tile's bytes is not significant)
        assert {k: parse_tile(*k, v) for k, v in fast.changed_tiles().items()} == {
            k: parse_tile(*k, v) for k, v in slow.changed_tiles().items()}
        rows_c.tiles.update(fast.changed_tiles())
        rows_py.tiles.update(slow.changed_tiles())
        known = {**known, **fast.loaded_tiles()}  # half the tiles from memory, half read
        if len(known) > 4:
            known = dict(list(known.items())[::2])


def test_a_second_update_on_one_tiled_store_reads_the_first_ones_writes() -> None:
    """The walk reads a node from the writes not yet stored before the tiles: two batches
    through one `TiledNodes` give the roots of two through fresh ones."""
    rows = MemoryIndexRows()
    one = TiledNodes(rows.read_tiles)
    first = {sha(b"%d" % i): [i] for i in range(300)}
    second = {sha(b"%d" % i): [1000 + i] for i in range(150, 450)}
    one.extend_lists(first)
    root = one.extend_lists(second)
    lists = {k: v for k, v in first.items()}
    for k, v in second.items():
        lists[k] = lists.get(k, []) + v
    assert root == naive_root({k: list_hash(v) for k, v in lists.items()})


def test_tiles_met_on_the_way_are_read_through_the_store_and_kept() -> None:
    """Tiles come from `known` first, else through the store's read; a tile written but
    never read on the way (a leaf pushed down beside a new key) is read once after the
    walk, so the tiles encoded for storage keep their other records."""
    rows = MemoryIndexRows()
    base = TiledNodes(rows.read_tiles)
    base.extend_lists({sha(b"%d" % i): [i] for i in range(2000)})
    rows.tiles.update(base.changed_tiles())
    reads: list[list[tuple[int, bytes]]] = []
    real = rows.read_tiles

    def counted(keys: object) -> dict[tuple[int, bytes], bytes]:
        reads.append(list(keys))  # type: ignore[call-overload]
        return real(reads[-1])

    nodes = TiledNodes(counted)
    nodes.extend_lists({sha(b"new%d" % i): [5000 + i] for i in range(40)})
    assert reads, "nothing was read through the store"
    for path in nodes.changes():
        assert path in nodes.loaded_tiles()
    everything = {sha(b"%d" % i): list_hash([i]) for i in range(2000)}
    everything.update({sha(b"new%d" % i): list_hash([5000 + i]) for i in range(40)})
    rows.tiles.update(nodes.changed_tiles())
    assert TiledNodes(rows.read_tiles).extend_lists({sha(b"x"): [9999]}) == naive_root(
        {**everything, sha(b"x"): list_hash([9999])})


@pytest.mark.parametrize(("keys", "new", "error", "message"), [
    ([b"\x01" * 31], [[1]], ValueError, "32 bytes"),
    ([b"\x02" * 32, b"\x01" * 32], [[1], [2]], ValueError, "ascending"),
    ([b"\x01" * 32, b"\x01" * 32], [[1], [2]], ValueError, "ascending"),
    ([b"\x01" * 32], [[1], [2]], ValueError, "one new"),
    ([b"\x01" * 32], [b"\x00" * 32], TypeError, "must be a list"),
    ([b"\x01" * 32], [[-1]], OverflowError, "negative"),
    ([b"\x01" * 32], [["1"]], TypeError, "integer"),
    ([], [], ValueError, "nothing to update"),
])
def test_the_compiled_walk_refuses_what_the_python_walk_refuses(
        keys: list[bytes], new: list[object], error: type[Exception], message: str) -> None:
    from ledger.vindex._ctrie import update_tiles

    changes: dict[bytes, Tile] = {}
    with pytest.raises(error, match=message):
        update_tiles(keys, new, {}, {}, lambda path: {}, {}, changes)  # type: ignore[arg-type]


def test_a_damaged_record_is_refused_not_read_past() -> None:
    """A record that is not 67 bytes (a store damaged under the cache) is a ValueError,
    never a read past its end; a tile that is not a dict is a TypeError."""
    from ledger.vindex._ctrie import update_tiles

    key = b"\x01" * 32
    with pytest.raises(ValueError, match="67 bytes"):
        update_tiles([key], [[1]], {b"": {b"\x00\x00": b"\x01" * 10}}, {}, lambda p: {}, {}, {})
    with pytest.raises(TypeError, match="dict of records"):
        update_tiles([key], [[1]], {b"": [1]}, {}, lambda p: {}, {}, {})  # type: ignore[dict-item]


def test_without_the_compiled_walk_the_python_one_gives_the_same_root(
        monkeypatch: pytest.MonkeyPatch) -> None:
    added = {sha(b"%d" % i): [i, i + 7] for i in range(500)}
    fast = TiledNodes(MemoryIndexRows().read_tiles).extend_lists(added)
    monkeypatch.setattr(tiles_module, "_compiled", None)
    assert not compiled()
    assert TiledNodes(MemoryIndexRows().read_tiles).extend_lists(added) == fast


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 255), st.integers(0, 2),
                          st.binary(min_size=64, max_size=64)), max_size=20),
       st.integers(0, 3))
def test_the_compiled_split_of_a_tile_is_the_python_one(
        records: list[tuple[int, int, int, bytes]], cut: int) -> None:
    """Any bytes, well-formed or not (depths past the tile, path bits past the node's
    depth, kinds other than leaf and inner, a length off by `cut`): the same records,
    or the same typed error naming the fault."""
    data = b"".join(bytes((rel, bits, kind)) + rest for rel, bits, kind, rest in records)
    data = data[: len(data) - cut] if cut and data else data
    outcomes: list[object] = []
    for split in (tiles_module._split, None):
        tiles_module_split = tiles_module._split
        try:
            tiles_module._split = split
            outcomes.append(parse_tile(8, b"\x01", data))
        except IndexProofError as e:
            outcomes.append(str(e))
        finally:
            tiles_module._split = tiles_module_split
    assert outcomes[0] == outcomes[1]


def test_a_failed_update_records_nothing() -> None:
    """A walk that fails half-way (here: a list index that is not an int, met at the
    last key's leaf, after the first key's nodes were written) leaves the tiled store as
    it was, as the Python walk does."""
    rows = MemoryIndexRows()
    nodes = TiledNodes(rows.read_tiles)
    nodes.extend_lists({sha(b"%d" % i): [i] for i in range(50)})
    before = {path: dict(records) for path, records in nodes.changes().items()}
    bad: dict[bytes, list[int]] = {sha(b"a"): [100], b"\xff" * 32: ["x"]}  # type: ignore[list-item]
    with pytest.raises(TypeError):
        nodes.extend_lists(bad)
    assert nodes.changes() == before
