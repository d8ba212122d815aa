"""The index map's batch update and tile split in C (`_ctrie.c`); see `ledger.vindex._tiles`."""

from collections.abc import Callable

def update_tiles(keys: list[bytes], new: list[list[int]], tiles: dict[bytes, dict[bytes, bytes]],
                 known: dict[bytes, dict[bytes, bytes]],
                 load: Callable[[bytes], dict[bytes, bytes]],
                 changes: dict[bytes, dict[bytes, bytes]],
                 written: dict[bytes, dict[bytes, bytes]]) -> bytes: ...

def split_records(data: bytes) -> dict[bytes, bytes] | None: ...
