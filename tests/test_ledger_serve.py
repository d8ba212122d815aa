"""The real `ktl serve` process: start, serve, SIGTERM cleanly; SIGKILL mid-traffic loses nothing acked."""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from ledger_support import (
    JSON,
    KTL,
    b64list,
    check_all_consistent,
    check_receipt,
    entry_bytes,
    ktl_serve,
)

from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.merkle import leaf_hash, verify_inclusion
from ledger.tlog.note import NoteVerifier


@pytest.mark.slow
def test_ktl_serve_serves_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    data = tmp_path / "log"
    with ktl_serve(data, "--origin", "test.example/log") as (proc, base, vkey):
        verifier = NoteVerifier.from_key_string(vkey)
        assert verifier.name == "test.example/log"
        seen: dict[int, bytes] = {}
        for i in range(3):
            body = entry_bytes(i)
            r = requests.post(f"{base}/api/v1/entries", data=body, headers=JSON, timeout=30)
            assert r.status_code == 201, r.text
            size, root = check_receipt(r.json(), body, verifier)
            seen[size] = root
        check_all_consistent(base, seen)
        assert requests.get(f"{base}/api/v1/log", timeout=10).json()["verifier_key"] == vkey
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(30) == 0
    out = subprocess.run([*KTL, "log-key", "--data", str(data)], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == vkey
    assert (data / "log.key").stat().st_mode & 0o777 == 0o600
    # The key fixes the origin: another origin is refused with a clear message.
    bad = subprocess.run([*KTL, "serve", "--data", str(data), "--origin", "other/log", "--port", "0"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "not 'other/log'" in bad.stderr


@pytest.mark.slow
def test_sigkill_while_submitting_loses_nothing_acknowledged(tmp_path: Path) -> None:
    data = tmp_path / "log"
    acked: list[tuple[bytes, dict[str, Any]]] = []
    seen: dict[int, bytes] = {}
    lock = threading.Lock()
    stop = threading.Event()
    with ktl_serve(data) as (proc, base, vkey):
        verifier = NoteVerifier.from_key_string(vkey)

        def client(t: int) -> None:
            with requests.Session() as s:
                i = 0
                while not stop.is_set():
                    body = entry_bytes(10_000 * t + i)
                    i += 1
                    try:
                        r = s.post(f"{base}/api/v1/entries", data=body, headers=JSON, timeout=10)
                    except requests.RequestException:
                        return
                    if r.status_code != 201:
                        return
                    size, root = check_receipt(r.json(), body, verifier)
                    with lock:
                        acked.append((body, r.json()))
                        assert seen.setdefault(size, root) == root

        threads = [threading.Thread(target=client, args=(t,)) for t in range(6)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while len(acked) < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        stop.set()
        for t in threads:
            t.join(15)
    assert len(acked) >= 60
    with ktl_serve(data) as (_proc, base, vkey2):
        assert vkey2 == vkey
        cp_note = requests.get(f"{base}/checkpoint", timeout=10).content
        cp = open_checkpoint(cp_note, verifier).checkpoint
        for body, receipt in acked:
            r = requests.get(f"{base}/api/v1/entries/{receipt['index']}", timeout=10).json()
            assert base64.b64decode(r["entry_b64"]) == body
            assert r["tree_size"] == cp.size
            verify_inclusion(leaf_hash(body), receipt["index"], cp.size,
                             b64list(r["inclusion_proof"]), cp.root_hash)
        seen[cp.size] = cp.root_hash
        check_all_consistent(base, seen)
        # The log keeps working after the restart.
        body = entry_bytes(999_999)
        r = requests.post(f"{base}/api/v1/entries", data=body, headers=JSON, timeout=30)
        assert r.status_code == 201 and r.json()["index"] == cp.size


def test_ktl_serve_refuses_a_damaged_log(tmp_path: Path) -> None:
    from ledger.sequencer import Sequencer, Submission
    from ledger.server import load_or_create_signer
    from ledger.storage import EntryFacts, SqliteStorage

    data = tmp_path / "log"
    signer = load_or_create_signer(data, "damaged.example/log")
    storage = SqliteStorage(data)
    facts = EntryFacts("https://p/kernel/v1", (("acme/k", "ab" * 32),), ("cd" * 32,))
    Sequencer(storage, signer, signer.name).integrate(
        [Submission(f"entry {i}".encode(), facts) for i in range(5)]
    )
    storage.close()
    bundle = data / "tiles" / "tile" / "entries" / "000.p" / "5"
    bundle.write_bytes(bundle.read_bytes().replace(b"entry 3", b"entry 9"))
    out = subprocess.run([*KTL, "serve", "--data", str(data), "--port", "0", "--deep-check"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "refusing to serve" in out.stderr and "tile/entries/000.p/5" in out.stderr


def test_ktl_serve_prints_its_write_settings_and_blobs_need_the_token(tmp_path: Path) -> None:
    """Attack 4: unreferenced blob uploads without a token on a log that has one."""
    printed: list[str] = []
    with ktl_serve(tmp_path / "log", "--token-env", "KTL_TEST_TOKEN", "--blob-grace", "3600",
                   "--blob-budget", str(32 * 1024 * 1024), lines=printed,
                   env_extra={"KTL_TEST_TOKEN": "s3cret"}) as (_proc, base, _vkey):
        text = "".join(printed)
        assert "writes:       need 'Authorization: Bearer <token>' (entries and blobs)" in text
        assert "33554432 bytes per client address per hour" in text
        assert "deleted 3600 s after upload" in text
        blob = b"x" * 1000
        url = f"{base}/api/v1/blobs/sha256:{hashlib.sha256(blob).hexdigest()}"
        octet = {"Content-Type": "application/octet-stream"}
        r = requests.put(url, data=blob, headers=octet, timeout=10)
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        assert requests.get(url, timeout=10).status_code == 404  # nothing stored
        r = requests.put(url, data=blob, headers={**octet, "Authorization": "Bearer s3cret"},
                         timeout=10)
        assert r.status_code == 201, r.text


# -- "serving on" only once the workers answer ----------------------------------------------

_WORKER_FAULT = """
import os, sys, time
import ledger.serve  # the master's own reference to the key loader is taken here
import ledger.server

real = ledger.server.load_or_create_signer
fault = os.environ["KTL_TEST_WORKER_FAULT"]

def worker_key(data_dir, origin, key_file=None):  # only the workers' create_app calls this
    if fault == "hang":
        time.sleep(4)
        return real(data_dir, origin, key_file)
    raise PermissionError(13, "Permission denied", os.path.join(data_dir, "log.key"))

ledger.server.load_or_create_signer = worker_key
from client.cli import main
main()
"""


def _serve_with_worker_fault(data: Path, fault: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`ktl serve` whose workers (not its master, which checks the log first) cannot read
    the log key (`unreadable`) or take 4 s to boot (`hang`)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "KTL_TEST_WORKER_FAULT": fault}
    return subprocess.run(
        [sys.executable, "-c", _WORKER_FAULT, "serve", "--data", str(data), "--port", "0",
         "--workers", "2", "--threads", "4", *extra],
        capture_output=True, text=True, env=env, timeout=90)


def test_workers_that_cannot_boot_give_an_error_not_serving_on(tmp_path: Path) -> None:
    res = _serve_with_worker_fault(tmp_path / "log", "unreadable")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "serving on" not in out
    assert "error: the server's workers did not start" in res.stderr, out
    assert "Permission denied" in out  # the worker's own error, above it


@pytest.mark.slow  # 7-11 s, among make test's longest: CI's slow step runs it
def test_workers_that_do_not_come_up_in_time_give_an_error(tmp_path: Path) -> None:
    res = _serve_with_worker_fault(tmp_path / "log", "hang", "--boot-timeout", "1")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "serving on" not in out
    assert "error: the server did not come up within 1 s: 0 of 2 worker(s) booted" in res.stderr


def test_serving_on_is_printed_once_every_worker_answers(tmp_path: Path) -> None:
    with ktl_serve(tmp_path / "log") as (proc, base, _vkey):
        # at once, no retry: the banner came after the workers booted and answered
        assert requests.get(f"{base}/api/v1/log", timeout=5).status_code == 200
        kids = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                              text=True).stdout.split()
        assert len(kids) == 2, kids


def test_a_second_worker_failing_while_the_master_halts_is_the_same_error() -> None:
    """gunicorn raises HaltServer out of run() when a second worker fails to boot while the
    master is already halting for the first (seen once in ten fresh-clone runs): the same
    clear error, not a traceback."""
    import pytest
    from gunicorn.errors import HaltServer

    from ledger.serve import BootWatch, ServeError

    class Halting:
        def run(self) -> None:
            raise HaltServer("Worker failed to boot.", 3)

    watch = BootWatch(2, "/api/v1/log", 5.0, lambda _line: None)
    with pytest.raises(ServeError, match=r"workers did not start .*status 3"):
        watch.run(Halting())  # type: ignore[arg-type]
