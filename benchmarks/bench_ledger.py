"""Log server throughput and latency: sequencing in process, submissions over HTTP, tiles, proofs.

    .venv/bin/python benchmarks/bench_ledger.py                  # 1,000,000 entries (a few minutes)
    .venv/bin/python benchmarks/bench_ledger.py --entries 50000  # quick run

Steps (one data folder in a temporary directory, removed at the end):
1. pre-fill the log with ``--entries`` synthetic 1.3 KB entries by direct integration
   (the sequencer does not verify; HTTP submissions below are real signed entries);
2. in process, at that size: a bare SQLite baseline (the same rows, one FULL-sync
   commit per batch, one table, no index), then `Sequencer.integrate` at two batch
   sizes, then inclusion and consistency proofs from stored tiles;
3. over HTTP against a real `ktl serve` (gunicorn, 2 gthread workers) with
   concurrent keep-alive clients in separate processes: a bare JSON endpoint
   (`GET /api/v1/log`, the baseline), signed submissions one per request, the batch
   endpoint, full tiles, and inclusion proofs.

The clients share the machine with the server: on 2 cores they take a good part of
the CPU, so HTTP figures are lower bounds of what the server alone would do.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import http.client
import multiprocessing
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attest.dsse import pae
from attest.entry import encode_entry, make_entry
from attest.predicates import KernelPredicate
from attest.statement import PAYLOAD_TYPE, make_statement
from ledger.merkle import consistency_proof, inclusion_proof
from ledger.note import NoteSigner
from ledger.sequencer import Sequencer, Submission
from ledger.server._keys import load_or_create_signer
from ledger.storage import EntryFacts, SqliteStorage, StoredHashReader, TileCache
from ledger.tiles import encode_index

console = Console()
PTYPE = "https://kerneltransparency.dev/attestation/kernel/v1"
KEYID = "cd" * 32


@dataclass
class Row:
    group: str
    what: str
    count: int
    seconds: float
    latencies: list[float]
    unit: str = "ops"

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000.0


# ---------------------------------------------------------------- synthetic entries
def synthetic(n: int) -> Submission:
    digest = hashlib.sha256(n.to_bytes(8, "big")).digest()
    data = digest + bytes(1272)
    return Submission(data, EntryFacts(PTYPE, ((f"acme/kernel-{n % 50}", digest.hex()),), (KEYID,)))


def prefill(storage: SqliteStorage, signer: NoteSigner, n: int, batch: int = 10_000) -> float:
    seq = Sequencer(storage, signer, signer.name)
    start = time.perf_counter()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"pre-filling {n:,} entries", total=n)
        done = storage.entry_count()
        while done < n:
            k = min(batch, n - done)
            seq.integrate([synthetic(done + i) for i in range(k)])
            done += k
            progress.update(task, completed=done)
    return time.perf_counter() - start


# ---------------------------------------------------------------- in process
def bench_sqlite_baseline(tmp: Path, total: int, batch: int) -> Row:
    conn = sqlite3.connect(tmp / "baseline.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (idx INTEGER PRIMARY KEY, data BLOB NOT NULL)")
    rows = [(i, synthetic(i).data) for i in range(total)]
    start = time.perf_counter()
    lat = []
    for lo in range(0, total, batch):
        t0 = time.perf_counter()
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO t VALUES (?, ?)", rows[lo : lo + batch])
        conn.execute("COMMIT")
        lat.append(time.perf_counter() - t0)
    seconds = time.perf_counter() - start
    conn.close()
    return Row("in process", f"baseline: bare SQLite insert, {batch}/commit", total, seconds, lat, "entries")


def bench_sequencer(storage: SqliteStorage, signer: NoteSigner, base: int, total: int, batch: int) -> Row:
    seq = Sequencer(storage, signer, signer.name)
    offset = storage.entry_count()
    batches = [[synthetic(offset + base + lo + i) for i in range(min(batch, total - lo))]
               for lo in range(0, total, batch)]
    lat = []
    start = time.perf_counter()
    for b in batches:
        t0 = time.perf_counter()
        seq.integrate(b)
        lat.append(time.perf_counter() - t0)
    return Row("in process", f"Sequencer.integrate, batch {batch}", total,
               time.perf_counter() - start, lat, "entries")


def bench_proofs(storage: SqliteStorage, size: int, count: int) -> list[Row]:
    cache = TileCache(1024)
    rng = random.Random(1)
    rows = []
    for name, fn in (
        ("inclusion proof", lambda: inclusion_proof(rng.randrange(size), size,
                                                    StoredHashReader(storage, size, cache))),
        ("consistency proof", lambda: consistency_proof(rng.randrange(1, size), size,
                                                        StoredHashReader(storage, size, cache))),
    ):
        lat = []
        start = time.perf_counter()
        for _ in range(count):
            t0 = time.perf_counter()
            fn()
            lat.append(time.perf_counter() - t0)
        rows.append(Row("in process", f"{name} at {size:,}", count, time.perf_counter() - start, lat))
    return rows


# ---------------------------------------------------------------- signed entries, fast
def signed_entries(n: int) -> list[bytes]:
    """``n`` distinct valid entries: one template statement, the digest and signature varied."""
    key = Ed25519PrivateKey.generate()
    pred = KernelPredicate.from_json({
        "name": "acme/matmul", "version": "1.0.0", "op": "matmul", "runtime": "c",
        "entry": "matmul_blocked", "abi_version": 1,
        "sources": [{"path": "matmul.c", "sha256": "ab" * 32}],
        "build": {"compiler": "gcc", "compiler_version": "12.2.0", "flags": ["-O3"]},
        "generator": {"agent": "kernelsmith", "agent_version": "0.3", "model": "m-2026",
                      "prompt_sha256": None},
        "target": {"hardware_class": "x86_64-avx2"}, "parent": None,
    })
    marker = "ee" * 32
    entry = make_entry(make_statement("acme/matmul", marker, pred), [key])
    template = encode_entry(entry)
    payload = entry.envelope.payload
    b64_payload = base64.b64encode(payload).decode()
    b64_sig = base64.b64encode(entry.envelope.signatures[0].sig).decode()
    out = []
    salt = os.urandom(8)
    for i in range(n):
        digest = hashlib.sha256(salt + i.to_bytes(8, "big")).hexdigest()
        p = payload.replace(marker.encode(), digest.encode())
        sig = key.sign(pae(PAYLOAD_TYPE, p))
        out.append(template.replace(b64_payload.encode(), base64.b64encode(p))
                   .replace(b64_sig.encode(), base64.b64encode(sig)))
    return out


# ---------------------------------------------------------------- HTTP load
@dataclass(frozen=True)
class Job:
    method: str
    path: str
    body: bytes | None = None
    entries: int = 1


def _client(args: tuple[str, int, list[Job], int]) -> tuple[float, float, list[float], int]:
    host, port, jobs, threads = args
    lat: list[float] = []
    errors = 0
    lock = threading.Lock()
    shards = [jobs[i::threads] for i in range(threads)]

    def run(shard: list[Job]) -> None:
        nonlocal errors
        conn = http.client.HTTPConnection(host, port, timeout=60)
        mine: list[float] = []
        bad = 0
        for job in shard:
            headers = {"Content-Type": "application/json"} if job.body is not None else {}
            t0 = time.perf_counter()
            conn.request(job.method, job.path, body=job.body, headers=headers)
            resp = conn.getresponse()
            resp.read()
            mine.append(time.perf_counter() - t0)
            if resp.status >= 300:
                bad += 1
        conn.close()
        with lock:
            lat.extend(mine)
            errors += bad

    start = time.time()
    ts = [threading.Thread(target=run, args=(s,)) for s in shards]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return start, time.time(), lat, errors


def http_phase(what: str, host: str, port: int, jobs: list[Job], procs: int, threads: int,
               unit: str = "requests") -> Row:
    parts = [(host, port, jobs[i::procs], threads) for i in range(procs)]
    with multiprocessing.get_context("fork").Pool(procs) as pool:
        results = pool.map(_client, parts)
    start = min(r[0] for r in results)
    end = max(r[1] for r in results)
    lat = [x for r in results for x in r[2]]
    errors = sum(r[3] for r in results)
    if errors:
        console.print(f"[red]{what}: {errors} requests failed[/red]")
    count = sum(j.entries for j in jobs) if unit == "entries" else len(jobs)
    return Row("HTTP", what, count, end - start, lat, unit)


def start_server(data: Path) -> tuple[subprocess.Popen[str], str, int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", "from client.cli import main; main()", "serve", "--data", str(data),
         "--port", "0", "--workers", "2", "--threads", "32", "--rate", "1000000"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.match(r"serving on http://([0-9.]+):([0-9]+)", line)
        if m:
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            return proc, m.group(1), int(m.group(2))
    proc.kill()
    raise SystemExit("ktl serve did not start")


def stop_server(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


# ---------------------------------------------------------------- report
def report(rows: Sequence[Row], header: str, markdown: bool) -> None:
    table = Table(title=header)
    for col in ("group", "what", "count", "per second", "p50 ms", "p99 ms"):
        table.add_column(col, justify="right" if col not in ("group", "what") else "left")
    for r in rows:
        table.add_row(r.group, r.what, f"{r.count:,}", f"{r.rate:,.0f} {r.unit}/s",
                      f"{r.pct(0.5):.2f}", f"{r.pct(0.99):.2f}")
    console.print(table)
    if markdown:
        print("| where | what | count | per second | p50 ms | p99 ms |")
        print("|---|---|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r.group} | {r.what} | {r.count:,} | {r.rate:,.0f} {r.unit}/s | "
                  f"{r.pct(0.5):.2f} | {r.pct(0.99):.2f} |")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=1_000_000, help="pre-filled log size")
    ap.add_argument("--sequence", type=int, default=40_000, help="entries per in-process run")
    ap.add_argument("--single", type=int, default=10_000, help="signed single-entry POSTs")
    ap.add_argument("--batch", type=int, default=40_000, help="signed entries via entries:batch")
    ap.add_argument("--batch-size", type=int, default=250, help="entries per batch request")
    ap.add_argument("--reads", type=int, default=10_000, help="tile / proof / baseline GETs")
    ap.add_argument("--procs", type=int, default=2, help="client processes")
    ap.add_argument("--threads", type=int, default=16, help="threads per client process")
    ap.add_argument("--no-http", action="store_true", help="only the in-process figures")
    ap.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    ap.add_argument("--keep", type=Path, default=None, help="use (and keep) this data folder")
    ap.add_argument("--tiny", action="store_true", help="a smoke run of a few seconds")
    args = ap.parse_args(argv)
    if args.tiny:
        args.entries, args.sequence, args.single, args.batch = 600, 300, 40, 200
        args.batch_size, args.reads, args.procs, args.threads = 50, 50, 1, 4

    tmp = Path(tempfile.mkdtemp(prefix="ktl-bench-"))
    data = args.keep or tmp / "data"
    rows: list[Row] = []
    try:
        signer = load_or_create_signer(data, "bench.example/log")
        storage = SqliteStorage(data)
        took = prefill(storage, signer, args.entries)
        size = storage.entry_count()
        console.print(f"pre-filled {size:,} entries in {took:.1f} s ({size / max(took, 1e-9):,.0f}/s)")
        rows.append(bench_sqlite_baseline(tmp, args.sequence, 1000))
        rows.append(bench_sequencer(storage, signer, 10**12, args.sequence, 1000))
        rows.append(bench_sequencer(storage, signer, 2 * 10**12, args.sequence, 4096))
        size = storage.entry_count()
        rows.extend(bench_proofs(storage, size, 3000))
        storage.close()
        if not args.no_http:
            with Progress(console=console, transient=True) as progress:
                progress.add_task(f"signing {args.single + args.batch:,} entries", total=None)
                signed = signed_entries(args.single + args.batch)
            proc, host, port = start_server(data)
            try:
                rng = random.Random(2)
                full_tiles = max(1, size // 256)
                rows.append(http_phase("baseline: GET /api/v1/log", host, port,
                                       [Job("GET", "/api/v1/log")] * args.reads, args.procs, args.threads))
                singles = [Job("POST", "/api/v1/entries", e) for e in signed[: args.single]]
                rows.append(http_phase("POST /api/v1/entries (1 signed entry each)", host, port,
                                       singles, args.procs, args.threads, "entries"))
                rest = signed[args.single :]
                bs = args.batch_size
                batches = [Job("POST", "/api/v1/entries:batch",
                               b'{"entries":[' + b",".join(rest[i : i + bs]) + b"]}",
                               len(rest[i : i + bs])) for i in range(0, len(rest), bs)]
                rows.append(http_phase(f"POST /api/v1/entries:batch ({bs} per request)", host, port,
                                       batches, args.procs, max(1, args.threads // 4), "entries"))
                tiles = [Job("GET", "/tile/0/" + encode_index(rng.randrange(full_tiles)))
                         for _ in range(args.reads)]
                rows.append(http_phase("GET full level-0 tile", host, port, tiles, args.procs, args.threads))
                proofs = [Job("GET", f"/api/v1/proof/inclusion?index={rng.randrange(size)}&tree_size={size}")
                          for _ in range(args.reads)]
                rows.append(http_phase(f"GET inclusion proof at {size:,}", host, port, proofs,
                                       args.procs, args.threads))
            finally:
                stop_server(proc)
        load = os.getloadavg()
        report(rows, f"ledger at {size:,} entries, {os.cpu_count()} cores, "
               f"load average {load[0]:.1f} at the end", args.markdown)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # a --keep folder lives outside it

if __name__ == "__main__":
    main()
