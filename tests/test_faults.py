"""Fault injection on the write path, with real `ktl serve` processes.

- disk full: the data folder on a size-limited tmpfs that fills during integration;
- `fsync`/`fdatasync` and `pwrite64` errors injected into the running workers with
  `strace --inject` (Debian's strace);
- SIGKILL of the whole server at random moments under load, then a restart.

The promises each test keeps: a submission that cannot be made durable gets a clear 503
(`integration_failed`, with Retry-After, saying why); nothing acknowledged is lost; no two
checkpoints of one size differ; no half-written file is left; the start-up check passes
and the log takes entries again once the fault is gone, without an operator.
They run in `make faults` (also run by `.ci/run`), not in `make test`: the kill loop runs
`KTL_FAULT_KILLS` times (100 there), each restart a few seconds.
"""

from __future__ import annotations

import base64
import itertools
import os
import random
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
from ledger_support import SERVE_WORKERS, b64list, check_all_consistent, check_receipt, entry_bytes
from test_ledger_serve import JSON, ktl_serve

from ledger.server import load_or_create_signer
from ledger.storage import SqliteStorage, audit_log
from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.merkle import leaf_hash, verify_inclusion
from ledger.tlog.note import NoteVerifier

KILLS = int(os.environ.get("KTL_FAULT_KILLS", "5"))
pytestmark = pytest.mark.faults


class Ledger:
    """What clients were told: acknowledged entries and every checkpoint root seen."""

    def __init__(self, verifier: NoteVerifier) -> None:
        self.verifier = verifier
        self.acked: dict[int, bytes] = {}
        self.roots: dict[int, bytes] = {}
        self.checked: set[int] = set()  # entries and sizes a check has already covered
        self.checked_sizes: set[int] = set()
        self.lock = threading.Lock()

    def submit(self, base: str, body: bytes, session: Any = requests) -> requests.Response:
        r: requests.Response = session.post(f"{base}/api/v1/entries", data=body, headers=JSON,
                                            timeout=30)
        if r.status_code in (200, 201):
            size, root = check_receipt(r.json(), body, self.verifier)
            with self.lock:
                self.acked[r.json()["index"]] = body
                assert self.roots.setdefault(size, root) == root, f"two roots at size {size}"
        return r

    def check(self, base: str, sample: random.Random | None = None) -> None:
        """Every acknowledged entry is served, included in the latest checkpoint, and every
        checkpoint seen is consistent with the next.

        With `sample`, only what is new since the last check (what a kill can hurt) and 50
        random older entries: every check costing the whole log made the kill loop grow
        quadratically. A last check without `sample` covers everything."""
        got = requests.get(f"{base}/checkpoint", timeout=10)
        if got.status_code == 404 and not self.acked:
            return  # an empty log: nothing was promised yet
        cp = open_checkpoint(got.content, self.verifier).checkpoint
        with self.lock:
            assert self.roots.setdefault(cp.size, cp.root_hash) == cp.root_hash
            indices = sorted(self.acked)
            sizes = sorted(s for s in self.roots if s <= cp.size)
        pairs = list(itertools.pairwise(sizes))
        if sample is not None:
            old = [i for i in indices if i in self.checked]
            indices = sample.sample(old, min(50, len(old))) + [
                i for i in indices if i not in self.checked]
            pairs = [(a, b) for a, b in pairs
                     if a not in self.checked_sizes or b not in self.checked_sizes]
        for index in indices:
            body = self.acked[index]
            r = requests.get(f"{base}/api/v1/entries/{index}", timeout=10).json()
            assert base64.b64decode(r["entry_b64"]) == body, index
            verify_inclusion(leaf_hash(body), index, r["tree_size"],
                             b64list(r["inclusion_proof"]), cp.root_hash)
        check_all_consistent(base, self.roots, pairs)
        self.checked.update(indices)
        self.checked_sizes.update(sizes)


def _no_temp_files(data: Path) -> None:
    leftovers = [str(p) for p in data.rglob("*.tmp")]
    assert not leftovers, f"half-written files left: {leftovers}"


def _audit_clean(data: Path) -> None:
    """After the server stopped: nothing lost or damaged (missing files are derivable)."""
    signer = load_or_create_signer(data, "localhost/ktl")
    storage = SqliteStorage(data)
    try:
        audit = audit_log(storage, signer.verifier(), signer.name)
    finally:
        storage.close()
    assert [p for p in audit.problems if p.kind != "incomplete"] == [], audit.problems


def _unavailable(r: requests.Response, why: str) -> None:
    assert r.status_code == 503, r.text
    err = r.json()["error"]
    assert err["code"] == "integration_failed" and why in err["message"], err
    assert r.headers["Retry-After"] == "1"


@contextmanager
def _small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("disk-full test: mounting a size-limited tmpfs needs root")
    got = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                         capture_output=True, text=True)
    if got.returncode:
        pytest.skip(f"disk-full test: cannot mount a tmpfs here: {got.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(path: Path) -> None:
    with open(path, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass


def test_a_full_disk_gives_503_loses_nothing_and_recovers_by_itself(tmp_path: Path) -> None:
    with _small_tmpfs(tmp_path / "mnt", "8m") as mnt:
        data = mnt / "log"
        with ktl_serve(data) as (_proc, base, vkey):
            led = Ledger(NoteVerifier.from_key_string(vkey))
            for i in range(5):
                assert led.submit(base, entry_bytes(i)).status_code == 201
            _fill(mnt / "filler")
            answers = [led.submit(base, entry_bytes(i)) for i in range(5, 25)]
            refused = [r for r in answers if r.status_code != 201]
            assert refused, "the disk never filled"
            for r in refused:
                _unavailable(r, "disk is full")
            led.check(base)  # reads still work and nothing acknowledged is gone
            (mnt / "filler").unlink()  # space returns: no restart, no operator
            for i in range(25, 30):
                assert led.submit(base, entry_bytes(i)).status_code == 201
            for i in range(5, 25):  # the refused ones can simply be sent again
                assert led.submit(base, entry_bytes(i)).status_code in (200, 201)
            led.check(base)
        _no_temp_files(data)
        _audit_clean(data)
        with ktl_serve(data) as (_proc, base, _vkey):  # the start-up check passes
            led.check(base)


def _strace_workers(proc: subprocess.Popen[str], calls: str, error: str, when: str,
                    paths: list[Path]) -> subprocess.Popen[bytes]:
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed (Debian: apt-get install strace)")
    # Every worker must be traced, or one left untraced takes the requests and no fault is
    # ever seen (`serving on` comes after they all booted; this checks it again).
    deadline = time.monotonic() + 20
    while True:
        kids = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                              text=True).stdout.split()
        if len(kids) >= SERVE_WORKERS or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(kids) == SERVE_WORKERS, f"expected {SERVE_WORKERS} gunicorn workers to trace, saw {kids}"
    args = ["strace", "-f", "-qq", "-y", "-o", os.environ.get("KTL_STRACE_OUT", "/dev/null"), "-e", f"trace={calls}",
            "-e", f"inject={calls}:error={error}:when={when}"]
    for path in paths:  # only calls on these files are counted and failed (strace -P)
        args += ["-P", str(path)]
    for pid in kids:
        args += ["-p", pid]
    tracer = subprocess.Popen(args, stderr=subprocess.PIPE)
    time.sleep(1.0)  # attached
    if tracer.poll() is not None:
        pytest.skip(f"strace cannot attach here: {tracer.stderr.read().decode()[:200]}")  # type: ignore[union-attr]
    return tracer


# A write error is injected on the WAL only: SQLite swallows an error of the automatic
# checkpoint into log.db (the commit is already durable in the WAL), so a write there may
# rightly refuse nothing, and which write comes third depends on timing.
@pytest.mark.parametrize(("calls", "error", "why", "files"), [
    ("fsync,fdatasync", "EIO", "disk I/O error", ()),
    ("pwrite64,write", "ENOSPC", "disk is full", ("log.db-wal",)),
])
def test_injected_io_errors_give_503_and_the_log_goes_on(
        tmp_path: Path, calls: str, error: str, why: str, files: tuple[str, ...]) -> None:
    data = tmp_path / "log"
    with ktl_serve(data) as (proc, base, vkey):
        led = Ledger(NoteVerifier.from_key_string(vkey))
        assert led.submit(base, entry_bytes(0)).status_code == 201
        tracer = _strace_workers(proc, calls, error, "3..8", [data / f for f in files])
        try:
            answers = [led.submit(base, entry_bytes(i)) for i in range(1, 16)]
        finally:
            tracer.terminate()
            tracer.wait(10)
        refused = [r for r in answers if r.status_code != 201]
        assert refused, f"no {calls} error reached the integrator"
        for r in refused:
            _unavailable(r, why)
        for i in range(16, 20):
            assert led.submit(base, entry_bytes(i)).status_code == 201
        led.check(base)
    _no_temp_files(data)
    _audit_clean(data)
    with ktl_serve(data) as (_proc, base, _vkey):
        led.check(base)


def _load(base: str, led: Ledger, stop: threading.Event, seed: int) -> None:
    with requests.Session() as s:
        i = 0
        while not stop.is_set():
            try:
                r = led.submit(base, entry_bytes(seed + i), s)
            except requests.RequestException:
                return
            if r.status_code not in (200, 201):
                return
            i += 1


def test_random_sigkills_under_load_lose_nothing_acknowledged(tmp_path: Path) -> None:
    data = tmp_path / "log"
    rng = random.Random(15)
    led: Ledger | None = None
    for kill in range(KILLS):
        with ktl_serve(data) as (proc, base, vkey):  # the start-up check passed
            led = led or Ledger(NoteVerifier.from_key_string(vkey))
            led.check(base, rng)  # all of them once more at the end
            stop = threading.Event()
            threads = [threading.Thread(target=_load, args=(base, led, stop, 1_000_000 * kill
                                                            + 10_000 * t)) for t in range(4)]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.05, 0.6))
            os.killpg(proc.pid, signal.SIGKILL)
            stop.set()
            for t in threads:
                t.join(15)
    assert led is not None and led.acked
    with ktl_serve(data) as (_proc, base, _vkey):
        led.check(base)
        os.killpg(_proc.pid, signal.SIGTERM)
        assert _proc.wait(30) == 0
    _no_temp_files(data)  # a killed writer's temporary files are gone after a start
    _audit_clean(data)
