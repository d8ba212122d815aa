"""Issue 26's attacks on the log, each through a real `ktl serve` on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests
from ledger_support import KTL, entry_bytes, ktl_serve

from ledger.merkle import leaf_hash
from ledger.tiles import TILE_WIDTH, encode_bundle


def _fill(base: str, n: int, first: int = 0) -> list[bytes]:
    entries = [entry_bytes(i) for i in range(first, first + n)]
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


def test_an_impostor_at_another_url_cannot_lock_the_user_out(tmp_path: Path) -> None:
    # Row 9: `ktl log-info` against an impostor announcing the real log's origin made the
    # real log refused ("the log may have changed keys") until both pins were forgotten.
    from client_server import Ktl

    ktl = Ktl(tmp_path / "home")
    origin = "real.example/log"
    with ktl_serve(tmp_path / "real", "--origin", origin) as (_p, real, real_key), \
            ktl_serve(tmp_path / "fake", "--origin", origin) as (_q, fake, fake_key):
        assert real_key != fake_key
        _fill(real, 3)
        _fill(fake, 7)
        assert ktl.json("log-info", "--log", real)["tree_size"] == 3
        assert ktl.json("log-info", "--log", fake)["tree_size"] == 7  # TOFU at its own URL
        again = ktl("log-info", "--log", real, "--json")
        assert again.exit_code == 0, again.stdout + again.stderr
        _fill(real, 2, first=100)
        assert ktl.json("log-info", "--log", real)["tree_size"] == 5
        listed = {p["url"]: p["trusted_size"] for p in ktl.json("trust", "list")["pins"]}
        assert listed == {real: 5, fake: 7}


def _dribbler(head_only: bool) -> tuple[str, threading.Event]:
    """A server on 127.0.0.1 that answers one byte every 0.3 s, for at most 20 s."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(20)
    stop = threading.Event()
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 200
              if head_only else
              b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n" + b"{" * 200)

    def run() -> None:
        with srv:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                for i in range(len(answer)):  # bounded: ends by itself
                    if stop.wait(0.3):
                        return
                    try:
                        conn.sendall(answer[i:i + 1])
                    except OSError:
                        return

    threading.Thread(target=run, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}", stop


@pytest.mark.parametrize("head_only", [True, False])
def test_a_server_dribbling_bytes_is_cut_off_by_the_overall_deadline(
        tmp_path: Path, head_only: bool) -> None:
    # Row 10: one byte every 2 s kept `ktl log-info` waiting forever (per-read timeouts).
    url, stop = _dribbler(head_only)
    env = {**os.environ, "KTL_HOME": str(tmp_path), "KTL_DEADLINE": "2"}
    t0 = time.monotonic()
    res = subprocess.run([*KTL, "log-info", "--log", url], capture_output=True, text=True,
                         env=env, timeout=60)
    took = time.monotonic() - t0
    stop.set()
    assert res.returncode == 3, res.stderr
    assert "within 2 s" in res.stderr and took < 30  # not the ~60 s the bytes would take
