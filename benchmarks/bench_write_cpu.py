"""Server CPU per signed submission over HTTP: what a `ktl serve` spends on each entry.

    .venv/bin/python benchmarks/bench_write_cpu.py            # 8,000 entries per row
    .venv/bin/python benchmarks/bench_write_cpu.py --prefill 200000   # logs of 200,000 first
    .venv/bin/python benchmarks/bench_write_cpu.py --tiny     # smoke run (seconds)

Throughput on a shared machine moves with everyone else's load; the CPU time the server's
processes (gunicorn master and workers, all threads) spend per entry moves much less, so
this script reports both. Rows, against one fresh SQLite log each (same settings as
`bench_ledger.py`: 2 gthread workers x 32 threads, clients in 2 processes x 32 keep-alive
threads on the same machine):

* limit: a bare gunicorn+Flask app whose POST only reads the body (the baseline);
* single: `POST /api/v1/entries`, one real signed kernel/v1 entry per request;
* batch: `POST /api/v1/entries:batch`, ``--batch-size`` entries per request.

Server CPU is read from ``/proc/<pid>/stat`` of the server's process tree before and after
the load; client CPU from the client processes' rusage. ``--prefill N`` first fills each
log with N synthetic entries integrated directly (`bench_vindex.py`'s: each names a digest,
a kernel name, a signer and a predicate type, as a real entry does), so the rows measure a
log of that size: the verifiable index (caught up when the server starts, before the load)
costs more per entry as its map grows.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ledger import (
    Job,
    bare_flask,
    http_phase,
    ktl_serve,
    load_or_create_signer,
    signed_entries,
    stop_server,
)
from bench_vindex import synthetic_submission

from ledger.sequencer import Sequencer
from ledger.storage import SqliteStorage

console = Console()


def _tree(pid: int) -> list[int]:
    kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [pid, *(p for k in kids for p in _tree(int(k)))]


def _server_pids(pid: int, workers: int = 2) -> list[int]:
    """The server's processes once its workers are up (they start after "serving on")."""
    deadline = time.monotonic() + 60
    while True:
        pids = _tree(pid)
        if len(pids) > workers or time.monotonic() > deadline:
            return pids
        time.sleep(0.1)


def _cpu_seconds(pids: Sequence[int]) -> float:
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _settled(pids: Sequence[int], idle: float = 0.05, limit: float = 600.0) -> None:
    """Wait until the server is idle (under `idle` CPU seconds a second): its workers'
    start-up work, such as catching the index up with a pre-filled log, is not the load's."""
    deadline = time.monotonic() + limit
    before = _cpu_seconds(pids)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = _cpu_seconds(pids)
        if now - before < idle:
            return
        before = now


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(what: str, proc: subprocess.Popen[str], target: tuple[str, int], jobs: list[Job],
            args: argparse.Namespace) -> tuple[str, float, float, float]:
    pids = _server_pids(proc.pid)
    _settled(pids)
    entries = sum(j.entries for j in jobs)
    server0, clients0 = _cpu_seconds(pids), _children_cpu()
    row = http_phase(what, [target], jobs, args.procs, args.threads, "entries")
    server = _cpu_seconds(pids) - server0
    clients = _children_cpu() - clients0
    return what, row.rate, server / entries * 1e3, clients / entries * 1e3


def _prefilled(folder: Path, n: int) -> None:
    """A SQLite log of `n` synthetic entries in `folder`, signed with the key it serves with."""
    signer = load_or_create_signer(folder, "bench.example/log")
    storage = SqliteStorage(folder)
    rng = random.Random(1)
    try:
        sequencer = Sequencer(storage, signer, signer.name)
        for lo in range(0, n, 4096):
            sequencer.integrate([synthetic_submission(i, rng)[0]
                                 for i in range(lo, min(n, lo + 4096))])
            console.print(f"  pre-filled {min(n, lo + 4096):,} of {n:,}", end="\r")
    finally:
        storage.close()


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=8000, help="signed entries per row")
    ap.add_argument("--batch-size", type=int, default=250, help="entries per batch request")
    ap.add_argument("--procs", type=int, default=2, help="client processes")
    ap.add_argument("--threads", type=int, default=32, help="threads per client process")
    ap.add_argument("--prefill", type=int, default=0, metavar="N",
                    help="fill each log with N synthetic entries before its load")
    ap.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    ap.add_argument("--tiny", action="store_true", help="a smoke run of a few seconds")
    args = ap.parse_args(argv)
    if args.tiny:
        args.entries, args.batch_size, args.procs, args.threads = 200, 50, 1, 4
    bodies = signed_entries(args.entries)
    singles = [Job("POST", "/api/v1/entries", b) for b in bodies]
    batches = [Job("POST", "/api/v1/entries:batch",
                   b'{"entries":[' + b",".join(bodies[i:i + args.batch_size]) + b"]}",
                   len(bodies[i:i + args.batch_size]))
               for i in range(0, len(bodies), args.batch_size)]
    tmp = Path(tempfile.mkdtemp(prefix="ktl-write-cpu-"))
    rows = []
    try:
        for what, jobs in (("limit: bare gunicorn+Flask POST (1 entry each)", singles),
                           ("POST /api/v1/entries (1 signed entry each)", singles),
                           (f"POST /api/v1/entries:batch ({args.batch_size} per request)", batches)):
            folder = tmp / f"log{len(rows)}"
            if args.prefill and not what.startswith("limit"):
                _prefilled(folder, args.prefill)
            proc, host, port = bare_flask(tmp) if what.startswith("limit") else ktl_serve(folder)
            try:
                rows.append(measure(what, proc, (host, port), jobs, args))
            finally:
                stop_server(proc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()[0]
    table = Table(title=f"server CPU per entry over HTTP on SQLite, {args.entries:,} entries per row"
                        f"{f' after {args.prefill:,}' if args.prefill else ''}, "
                        f"{os.cpu_count()} cores, load average {load:.1f} at the end")
    for col in ("what", "entries/s", "server CPU ms/entry", "client CPU ms/entry"):
        table.add_column(col, justify="left" if col == "what" else "right")
    for what, rate, server, clients in rows:
        table.add_row(what, f"{rate:,.0f}", f"{server:.3f}", f"{clients:.3f}")
    console.print(table)
    if args.markdown:
        print("| what | entries/s | server CPU ms/entry | client CPU ms/entry |\n|---|---:|---:|---:|")
        for what, rate, server, clients in rows:
            print(f"| {what} | {rate:,.0f} | {server:.3f} | {clients:.3f} |")


if __name__ == "__main__":
    main()
