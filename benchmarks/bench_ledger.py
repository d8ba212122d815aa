"""Log server throughput and latency on SQLite and PostgreSQL: sequencing, HTTP submissions, proofs.

    .venv/bin/python benchmarks/bench_ledger.py                  # 1,000,000 entries (several minutes)
    .venv/bin/python benchmarks/bench_ledger.py --entries 50000  # quick run
    .venv/bin/python benchmarks/bench_ledger.py --tiny           # smoke run (seconds)

Steps (data folders and a throwaway PostgreSQL cluster in a temporary directory, removed
at the end; ``--database URL`` uses an existing empty database instead, ``--no-pg`` skips
PostgreSQL):
1. pre-fill each backend with ``--entries`` synthetic 1.3 KB entries by direct
   integration (the sequencer does not verify; HTTP submissions below are real signed
   entries);
2. in process, at that size: a bare SQLite baseline (the same rows, one FULL-sync
   commit per batch, one table, no index), then `Sequencer.integrate` at two batch
   sizes on each backend, then inclusion and consistency proofs from stored tiles;
3. over HTTP with concurrent keep-alive clients in separate processes: the limit, a
   bare gunicorn+Flask POST that only reads the body (same worker settings); then
   against real `ktl serve` (gunicorn, 2 asyncio-front workers per frontend) on SQLite, on
   PostgreSQL with one frontend and with two frontends (clients split between them):
   signed submissions one per request and through the batch endpoint; on SQLite and
   one PostgreSQL frontend also a bare JSON GET, full tiles and inclusion proofs.

The clients share the machine with the servers (and PostgreSQL): on 2 cores they take
a good part of the CPU, so HTTP figures are lower bounds of what a server alone does.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attest.dsse import pae
from attest.entry import encode_entry, make_entry
from attest.predicates import KERNEL_V1, KernelPredicate
from attest.statement import PAYLOAD_TYPE, make_statement
from ledger.sequencer import Sequencer, Submission
from ledger.server._keys import load_or_create_signer
from ledger.storage import EntryFacts, LogStorage, SqliteStorage, StoredHashReader, TileCache
from ledger.tlog.merkle import consistency_proof, inclusion_proof
from ledger.tlog.note import NoteSigner
from ledger.tlog.tiles import encode_index

ROOT = Path(__file__).resolve().parent.parent
console = Console()
PTYPE = KERNEL_V1
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


def prefill(storage: LogStorage, signer: NoteSigner, n: int, batch: int = 10_000) -> float:
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


def bench_sequencer(storage: LogStorage, signer: NoteSigner, base: int, total: int, batch: int,
                    label: str) -> Row:
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
    return Row("in process", f"{label}: Sequencer.integrate, batch {batch}", total,
               time.perf_counter() - start, lat, "entries")


def bench_proofs(storage: LogStorage, size: int, count: int, label: str) -> list[Row]:
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
        rows.append(Row("in process", f"{label}: {name} at {size:,}", count,
                        time.perf_counter() - start, lat))
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


def http_phase(what: str, targets: Sequence[tuple[str, int]], jobs: list[Job], procs: int,
               threads: int, unit: str = "requests") -> Row:
    """``procs`` client processes (at least one per target), each on one target in turn."""
    procs = max(procs, len(targets))
    parts = [(*targets[i % len(targets)], jobs[i::procs], threads) for i in range(procs)]
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


def start_server(argv: list[str], pattern: str = r"serving on http://([0-9.]+):([0-9]+)",
                 ) -> tuple[subprocess.Popen[str], str, int]:
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 300
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(pattern, line)
        if m:
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            return proc, m.group(1), int(m.group(2))
    proc.kill()
    raise SystemExit("server did not start:\n" + "".join(lines[-20:]))


def ktl_serve(data: Path, *extra: str) -> tuple[subprocess.Popen[str], str, int]:
    return start_server(
        [sys.executable, "-c", "from client.cli import main; main()", "serve", "--data", str(data),
         "--port", "0", "--workers", "2", "--threads", "32", "--rate", "1000000",
         "--rate-bytes", "1000000000000", *extra],
    )


_BARE_APP = """
from flask import Flask, request
app = Flask("bare")

@app.post("/api/v1/entries")
def entries():
    request.get_data(cache=False)
    return ("{}", 201, {"Content-Type": "application/json"})
"""


def bare_flask(tmp: Path) -> tuple[subprocess.Popen[str], str, int]:
    """The limit: gunicorn + Flask with `ktl serve`'s worker settings, a POST that only reads the body."""
    (tmp / "bare_app.py").write_text(_BARE_APP)
    return start_server(
        [sys.executable, "-m", "gunicorn", "--chdir", str(tmp), "-b", "127.0.0.1:0", "-w", "2",
         "-k", "gthread", "--threads", "32", "--log-level", "info", "bare_app:app"],
        pattern=r"Listening at: http://([0-9.]+):([0-9]+)",
    )


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


def pg_database(args: argparse.Namespace) -> tuple[str | None, Callable[[], None]]:
    """An empty PostgreSQL database for the run, and how to clean it up."""
    if args.no_pg:
        return None, lambda: None
    if args.database:
        return args.database, lambda: None
    sys.path.insert(0, str(ROOT / "tests"))
    from pg_support import PgCluster, PgUnavailable

    try:
        cluster = PgCluster(durable=True).start()  # fsync on, as a real log runs
    except PgUnavailable as e:
        console.print(f"[yellow]PostgreSQL rows skipped: {e}[/yellow]")
        return None, lambda: None
    return cluster.new_database(), cluster.stop


def in_process(label: str, storage: LogStorage, signer: NoteSigner,
               args: argparse.Namespace) -> list[Row]:
    took = prefill(storage, signer, args.entries)
    size = storage.entry_count()
    console.print(f"{label}: pre-filled {size:,} entries in {took:.1f} s "
                  f"({size / max(took, 1e-9):,.0f}/s)")
    rows = [bench_sequencer(storage, signer, 10**12, args.sequence, 1000, label),
            bench_sequencer(storage, signer, 2 * 10**12, args.sequence, 4096, label)]
    rows.extend(bench_proofs(storage, storage.entry_count(), args.proofs, label))
    return rows


def submissions(label: str, targets: Sequence[tuple[str, int]], args: argparse.Namespace,
                batch: bool = True) -> list[Row]:
    with Progress(console=console, transient=True) as progress:
        progress.add_task(f"{label}: signing {args.single + args.batch:,} entries", total=None)
        signed = signed_entries(args.single + args.batch)
    singles = [Job("POST", "/api/v1/entries", e) for e in signed[: args.single]]
    rest = signed[args.single :]
    bs = args.batch_size
    batches = [Job("POST", "/api/v1/entries:batch",
                   b'{"entries":[' + b",".join(rest[i : i + bs]) + b"]}", len(rest[i : i + bs]))
               for i in range(0, len(rest), bs)]
    rows = [http_phase(f"{label}: POST /api/v1/entries (1 signed entry each)", targets, singles,
                       args.procs, args.threads, "entries")]
    if batch:
        rows.append(http_phase(f"{label}: POST /api/v1/entries:batch ({bs} per request)", targets,
                               batches, args.procs, max(1, args.threads // 4), "entries"))
    return rows


def reads(label: str, target: tuple[str, int], size: int, args: argparse.Namespace) -> list[Row]:
    rng = random.Random(2)
    full_tiles = max(1, size // 256)
    tiles = [Job("GET", "/tile/0/" + encode_index(rng.randrange(full_tiles))) for _ in range(args.reads)]
    proofs = [Job("GET", f"/api/v1/proof/inclusion?index={rng.randrange(size)}&tree_size={size}")
              for _ in range(args.reads)]
    return [
        http_phase(f"{label}: GET /api/v1/log (bare JSON)", [target],
                   [Job("GET", "/api/v1/log")] * args.reads, args.procs, args.threads),
        http_phase(f"{label}: GET full level-0 tile", [target], tiles, args.procs, args.threads),
        http_phase(f"{label}: GET inclusion proof at {size:,}", [target], proofs, args.procs,
                   args.threads),
    ]


def http_rows(tmp: Path, data: Path, url: str | None, sizes: dict[str, int],
              args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    proc, host, port = bare_flask(tmp)
    try:
        rows.extend(submissions("limit: bare gunicorn+Flask POST", [(host, port)], args, batch=False))
    finally:
        stop_server(proc)
    key = str(data / "log.key")
    runs: list[tuple[str, list[list[str]]]] = [("SQLite", [[]])]
    if url is not None:
        pg = ["--database", url, "--key", key]
        runs += [("PostgreSQL, 1 frontend", [pg]), ("PostgreSQL, 2 frontends", [pg, pg])]
    for label, frontends in runs:
        procs = []
        try:
            targets = []
            for i, extra in enumerate(frontends):
                folder = data if not extra else tmp / f"front{i}"
                p, h, pt = ktl_serve(folder, *extra)
                procs.append(p)
                targets.append((h, pt))
            if len(frontends) == 1:
                size = sizes["pg" if url is not None and frontends[0] else "sqlite"]
                rows.extend(reads(label, targets[0], size, args))
            rows.extend(submissions(label, targets, args))
        finally:
            for p in procs:
                stop_server(p)
    return rows


def goals(rows: Sequence[Row]) -> None:
    """Say which goals this run met; what a miss comes from is in docs/performance.md."""
    rate = {r.what: r.rate for r in rows}

    def find(prefix: str, part: str) -> float:
        return next((v for k, v in rate.items() if k.startswith(prefix) and part in k), float("nan"))

    single, batch = find("SQLite:", "entries (1"), find("SQLite:", "entries:batch")
    limit = find("limit:", "entries (1")
    console.print(f"goal >= 2,000 single entries/s over HTTP on SQLite: {single:,.0f} "
                  f"({'met' if single >= 2000 else 'MISSED'}; the bare Flask POST limit here: "
                  f"{limit:,.0f}/s)")
    console.print(f"goal >= 8,000 batched entries/s over HTTP on SQLite: {batch:,.0f} "
                  f"({'met' if batch >= 8000 else 'MISSED'})")
    for kind in ("entries (1", "entries:batch"):
        one, two = find("PostgreSQL, 1", kind), find("PostgreSQL, 2", kind)
        if one == one:  # not NaN: PostgreSQL ran
            console.print(f"two PostgreSQL frontends vs one ({'single' if '(' in kind else 'batch'}): "
                          f"{two:,.0f} vs {one:,.0f} entries/s ({two / one:.2f}x; goal >= 1)")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=1_000_000, help="pre-filled log size")
    ap.add_argument("--sequence", type=int, default=40_000, help="entries per in-process run")
    ap.add_argument("--proofs", type=int, default=3000, help="in-process proofs per kind")
    ap.add_argument("--single", type=int, default=10_000, help="signed single-entry POSTs")
    ap.add_argument("--batch", type=int, default=40_000, help="signed entries via entries:batch")
    ap.add_argument("--batch-size", type=int, default=250, help="entries per batch request")
    ap.add_argument("--reads", type=int, default=10_000, help="tile / proof / baseline GETs")
    ap.add_argument("--procs", type=int, default=2, help="client processes")
    ap.add_argument("--threads", type=int, default=16, help="threads per client process")
    ap.add_argument("--no-http", action="store_true", help="only the in-process figures")
    ap.add_argument("--no-pg", action="store_true", help="skip PostgreSQL")
    ap.add_argument("--database", default=None, help="an empty PostgreSQL database to use")
    ap.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    ap.add_argument("--keep", type=Path, default=None, help="use (and keep) this SQLite data folder")
    ap.add_argument("--tiny", action="store_true", help="a smoke run of a few seconds")
    args = ap.parse_args(argv)
    if args.tiny:
        args.entries, args.sequence, args.single, args.batch = 600, 300, 40, 200
        args.batch_size, args.reads, args.procs, args.threads, args.proofs = 50, 50, 1, 4, 100

    tmp = Path(tempfile.mkdtemp(prefix="ktl-bench-"))
    data = args.keep or tmp / "data"
    rows: list[Row] = []
    url, cleanup = pg_database(args)
    try:
        signer = load_or_create_signer(data, "bench.example/log")
        rows.append(bench_sqlite_baseline(tmp, args.sequence, 1000))
        sizes: dict[str, int] = {}
        backends: list[tuple[str, Callable[[], LogStorage]]] = [("sqlite", lambda: SqliteStorage(data))]
        if url is not None:
            from ledger.storage._postgres import PostgresStorage

            backends.append(("pg", lambda: PostgresStorage(url)))
        for name, make in backends:
            storage = make()
            try:
                rows.extend(in_process("SQLite" if name == "sqlite" else "PostgreSQL", storage,
                                       signer, args))
                sizes[name] = storage.entry_count()
            finally:
                storage.close()
        if not args.no_http:
            rows.extend(http_rows(tmp, data, url, sizes, args))
        load = os.getloadavg()
        report(rows, f"ledger at {sizes['sqlite']:,} entries, {os.cpu_count()} cores, "
               f"load average {load[0]:.1f} at the end", args.markdown)
        goals(rows)
    finally:
        cleanup()
        shutil.rmtree(tmp, ignore_errors=True)  # a --keep folder lives outside it


if __name__ == "__main__":
    main()
