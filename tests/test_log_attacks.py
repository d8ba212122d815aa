"""Issue 26's attacks on the log, each through a real `ktl serve` on 127.0.0.1."""

from __future__ import annotations

import json
import os
from pathlib import Path

import requests
from ledger_support import entry_bytes, ktl_serve

from ledger.merkle import leaf_hash
from ledger.tiles import TILE_WIDTH, encode_bundle


def _fill(base: str, n: int) -> list[bytes]:
    entries = [entry_bytes(i) for i in range(n)]
    for lo in range(0, n, 250):
        r = requests.post(f"{base}/api/v1/entries:batch", timeout=60,
                          json={"entries": [json.loads(e) for e in entries[lo:lo + 250]]})
        assert r.status_code == 200, r.text
    return entries


def _flip(path: Path, offset: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x01
    path.write_bytes(bytes(raw))


def test_flipped_bytes_in_stored_bundles_and_tiles_are_not_served(tmp_path: Path) -> None:
    # Row 8: a flipped byte in a stored bundle was served `immutable` for a year.
    data = tmp_path / "log"
    lines: list[str] = []
    with ktl_serve(data, lines=lines) as (_proc, base, _vkey):
        entries = _fill(base, TILE_WIDTH + 2)
        files = data / "tiles"
        bundle, tile = files / "tile/entries/000", files / "tile/0/000"
        assert bundle.read_bytes() == encode_bundle(entries[:TILE_WIDTH])
        _flip(bundle, 1000)  # before any read: never verified, never served
        r = requests.get(f"{base}/tile/entries/000", timeout=10)
        assert r.status_code == 500 and r.json()["error"]["code"] == "corrupt_storage"
        assert "immutable" not in r.headers.get("Cache-Control", "")
        _flip(bundle, 1000)  # repaired: verifies and is served, in every worker
        for _ in range(4):
            ok = requests.get(f"{base}/tile/entries/000", timeout=10)
            assert ok.status_code == 200 and ok.content == bundle.read_bytes()
            assert "immutable" in ok.headers["Cache-Control"]
        good = requests.get(f"{base}/tile/0/000", timeout=10)
        assert good.content == b"".join(leaf_hash(e) for e in entries[:TILE_WIDTH])
        # After a verified read, the bytes change: they are checked again, not trusted.
        for f, off in ((bundle, 7), (tile, 32 * 17 + 5)):
            _flip(f, off)
            for _ in range(4):
                r = requests.get(f"{base}/{f.relative_to(files)}", timeout=10)
                assert r.status_code == 500 and r.json()["error"]["code"] == "corrupt_storage"
        # A forged tile consistent with a forged bundle is still not the signed tree.
        forged = [*entries[:TILE_WIDTH - 1], entry_bytes(10**6)]
        bundle.write_bytes(encode_bundle(forged))
        tile.write_bytes(b"".join(leaf_hash(e) for e in forged))
        for p in ("tile/entries/000", "tile/0/000"):
            assert requests.get(f"{base}/{p}", timeout=10).status_code == 500
        # The partial bundle at the right edge is compared with the stored hashes.
        part = files / "tile/entries/001.p/2"
        _flip(part, 3)
        assert requests.get(f"{base}/tile/entries/001.p/2", timeout=10).status_code == 500
    assert any("do not verify" in line for line in lines), "".join(lines[-20:])


def test_a_symlink_in_the_data_folder_is_refused_not_followed(tmp_path: Path) -> None:
    # Row 12: a symlink planted in tiles served its target (e.g. /etc/hostname).
    data = tmp_path / "log"
    secret = tmp_path / "secret"
    with ktl_serve(data) as (_proc, base, _vkey):
        entries = _fill(base, TILE_WIDTH + 2)
        secret.write_bytes(encode_bundle(entries[:TILE_WIDTH]))  # even the right bytes
        bundle = data / "tiles/tile/entries/000"
        bundle.unlink()
        os.symlink(secret, bundle)
        r = requests.get(f"{base}/tile/entries/000", timeout=10)
        assert r.status_code == 500 and r.content != secret.read_bytes()
        # A link to a folder, higher up the path, is refused too.
        tiles0 = data / "tiles/tile/0"
        moved = tmp_path / "moved0"
        tiles0.rename(moved)
        os.symlink(moved, tiles0)
        r = requests.get(f"{base}/tile/0/000", timeout=10)
        assert r.status_code == 500 and r.json()["error"]["code"] == "internal_error"
        # And a FIFO never blocks a reader.
        bundle.unlink()
        os.mkfifo(bundle)
        r = requests.get(f"{base}/tile/entries/000", timeout=10)
        assert r.status_code == 500
