"""Two `ktl serve --database` frontends on one PostgreSQL log; the integrator is SIGKILLed under load.

Submitters post to both frontends; the frontend whose process holds the integration lock
is killed with SIGKILL mid-batch while submissions keep coming. The other frontend must
take over within seconds; afterwards every acknowledged index returns the same entry
from both frontends (the dead one restarted), the tiles verify against the checkpoint,
each submitter saw sizes only grow, and no size ever had two roots.
"""

from __future__ import annotations

import base64
import os
import signal
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests
from ledger_support import (
    JSON,
    b64list,
    check_all_consistent,
    check_receipt,
    entry_bytes,
    ktl_serve,
)

from ledger.storage._pg_schema import INTEGRATE_LOCK
from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.merkle import leaf_hash, verify_inclusion
from ledger.tlog.note import NoteVerifier
from ledger.tlog.tiles import (
    TILE_WIDTH,
    TileHashReader,
    decode_bundle,
    entries_path,
    entry_bundles_for_size,
)

pytestmark = [pytest.mark.postgresql, pytest.mark.slow]

_HOLDER_SQL = (
    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.objid = %s"
)


class Submitters:
    """Threads posting distinct signed entries to one frontend, recording what was acked."""

    def __init__(self, base: str, verifier: NoteVerifier, first: int, count: int) -> None:
        self.base = base
        self.verifier = verifier
        self.acked: list[tuple[bytes, dict[str, Any]]] = []
        self.roots: dict[int, bytes] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(first + 100_000 * t,))
                        for t in range(count)]

    def _run(self, first: int) -> None:
        last_size = 0
        with requests.Session() as s:
            for i in range(first, first + 100_000):
                if self.stop.is_set():
                    return
                body = entry_bytes(i)
                try:
                    r = s.post(f"{self.base}/api/v1/entries", data=body, headers=JSON, timeout=30)
                except requests.RequestException:
                    return  # this frontend died: unacknowledged, nothing promised
                if r.status_code != 201:
                    return
                size, root = check_receipt(r.json(), body, self.verifier)
                assert size >= last_size, "a submitter saw the log shrink"
                last_size = size
                with self.lock:
                    self.acked.append((body, r.json()))
                    assert self.roots.setdefault(size, root) == root, f"two roots for size {size}"

    def start(self) -> Submitters:
        for t in self.threads:
            t.start()
        return self

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


def _wait(what: str, cond: Any, timeout: float) -> float:
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
    return time.monotonic() - start


def _became(lines: list[str]) -> int:
    """How often a frontend logged that one of its processes became the integrator."""
    return sum("is now the log's integrator" in line for line in list(lines))


def _integrator_pid(url: str, timeout: float = 20) -> int:
    """The process holding the integration lock (it names itself in application_name)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(_HOLDER_SQL, (INTEGRATE_LOCK,)).fetchone()
            if row is not None and str(row[0]).startswith("ktl-integrator pid "):
                return int(str(row[0]).rsplit(" ", 1)[1])
            time.sleep(0.002)
    raise AssertionError("no process ever held the integration lock")


def _check_tiles(base: str, verifier: NoteVerifier) -> int:
    """Every leaf of the served tree verifies against the signed checkpoint via the tiles."""
    with requests.Session() as s:
        cp = open_checkpoint(s.get(f"{base}/checkpoint", timeout=10).content, verifier).checkpoint

        def fetch(path: str) -> bytes:
            r = s.get(f"{base}/{path}", timeout=10)
            assert r.status_code == 200, (path, r.status_code)
            return r.content

        reader = TileHashReader(cp.size, cp.root_hash, fetch)
        leaves = reader.read_hashes([(0, i) for i in range(cp.size)])
        for ref in entry_bundles_for_size(cp.size):
            bundle = decode_bundle(fetch(entries_path(ref.index, ref.width)), ref.width)
            first = ref.index * TILE_WIDTH
            assert [leaf_hash(e) for e in bundle] == leaves[first : first + ref.width]
    return cp.size


def test_integrator_sigkilled_under_load_loses_nothing_and_never_forks(
    pg_url: str, tmp_path: Path,
) -> None:
    extra = ("--database", pg_url, "--workers", "1", "--threads", "16")
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with ExitStack() as stack:
        out: dict[str, list[str]] = {"a": [], "b": []}
        a_proc, a_base, vkey = stack.enter_context(
            ktl_serve(a_dir, "--origin", "failover.example/log", *extra, lines=out["a"]))
        key = str(a_dir / "log.key")
        b_proc, b_base, b_vkey = stack.enter_context(
            ktl_serve(b_dir, "--key", key, *extra, lines=out["b"]))
        assert b_vkey == vkey, "the second frontend shares the first one's key"
        verifier = NoteVerifier.from_key_string(vkey)
        frontends = {a_proc.pid: ("a", a_base, a_dir), b_proc.pid: ("b", b_base, b_dir)}
        subs = {a_base: Submitters(a_base, verifier, 0, 3).start(),
                b_base: Submitters(b_base, verifier, 1_000_000, 3).start()}
        try:
            _wait("acks from both frontends", lambda: min(s.count() for s in subs.values()) >= 20, 40)
            pid = _integrator_pid(pg_url)
            dead_pgid = os.getpgid(pid)
            assert dead_pgid in frontends, "the lock holder is one of our frontends"
            dead_name, dead_base, dead_dir = frontends[dead_pgid]
            (alive_name,) = [n for n, _, _ in frontends.values() if n != dead_name]
            alive_base = frontends[a_proc.pid if alive_name == "a" else b_proc.pid][1]
            assert _became(out[dead_name]) >= 1, "the integrator says so in its log"
            became = _became(out[alive_name])
            before_alive = subs[alive_base].count()
            os.killpg(dead_pgid, signal.SIGKILL)  # the whole frontend, mid-batch
            took = _wait("the other frontend to take over",
                         lambda: subs[alive_base].count() >= before_alive + 20, 30)
            assert took < 10, f"take-over took {took:.1f} s"
            _wait("the survivor to log that it integrates",
                  lambda: _became(out[alive_name]) > became, 10)
        finally:
            for s in subs.values():
                s.join()
        acked = [a for s in subs.values() for a in s.acked]
        roots = {k: v for s in subs.values() for k, v in s.roots.items()}
        # The dead frontend comes back (its start-up check runs on the shared database).
        restart_args: tuple[str, ...] = (*extra,) if dead_base == a_base else ("--key", key, *extra)
        _proc, back_base, back_vkey = stack.enter_context(ktl_serve(dead_dir, *restart_args))
        assert back_vkey == vkey
        cp_note = requests.get(f"{alive_base}/checkpoint", timeout=10).content
        cp = open_checkpoint(cp_note, verifier).checkpoint
        assert requests.get(f"{back_base}/checkpoint", timeout=10).content == cp_note
        for body, receipt in acked:
            for base in (alive_base, back_base):
                r = requests.get(f"{base}/api/v1/entries/{receipt['index']}", timeout=10).json()
                assert r["tree_size"] == cp.size
                assert base64.b64decode(r["entry_b64"]) == body, (base, receipt["index"])
                verify_inclusion(leaf_hash(body), receipt["index"], cp.size,
                                 b64list(r["inclusion_proof"]), cp.root_hash)
        assert len({r["index"] for _, r in acked}) == len(acked)
        roots.setdefault(cp.size, cp.root_hash)
        assert roots[cp.size] == cp.root_hash
        check_all_consistent(back_base, roots)
        assert _check_tiles(back_base, verifier) == cp.size
        # The log goes on taking entries through either frontend.
        body = entry_bytes(9_999_999)
        r = requests.post(f"{back_base}/api/v1/entries", data=body, headers=JSON, timeout=30)
        assert r.status_code == 201 and r.json()["index"] == cp.size
