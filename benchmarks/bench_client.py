"""Client figures: offline receipt verification rate, and monitor catch-up rate against the
server's own tile-serving rate, all measured in one run against a real `ktl serve`.

    .venv/bin/python benchmarks/bench_client.py [--entries 100000] [--seconds 3] [--workers 2] [--jobs 2]

1. Starts `ktl serve` (gunicorn) on 127.0.0.1 with a fresh data folder and fills it
   with --entries distinct signed kernel/v1 entries through `entries:batch`.
2. Baseline: the server's raw tile-serving rate, i.e. every entry bundle and level-0
   tile of the tree fetched once over one keep-alive session, nothing verified.
3. `client.run_monitor` from index 0 over the same tree: tiles verified against the
   signed checkpoint, every entry's leaf hash, envelope signature and statement.
   Again with --jobs worker processes. Also, as a CPU ceiling of one core,
   `decode_entry` + `verify_entry` on the same entries offline.
4. `client.verify_receipt` on one receipt (checkpoint signature, inclusion proof in
   the full tree, envelope signature, statement) in a loop for --seconds, against raw
   Ed25519 verifications of the same two signatures (the floor of the work).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Runnable without installing the project: the repository root goes on sys.path.
_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent))

import requests  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from attest import examples  # noqa: E402
from attest.entry import decode_entry, encode_entry, make_entry, verify_entry  # noqa: E402
from attest.keys import generate_private_key, public_key_from_b64  # noqa: E402
from attest.predicates import KERNEL_V1, parse_predicate  # noqa: E402
from attest.statement import make_statement  # noqa: E402
from client import (  # noqa: E402
    LogClient,
    TrustedState,
    connect,
    load_verifier,
    run_monitor,
    verify_receipt,
)
from client.api import Transport  # noqa: E402
from ledger.tlog.checkpoint import Checkpoint, open_checkpoint  # noqa: E402
from ledger.tlog.note import split_note  # noqa: E402
from ledger.tlog.proof_bundle import TlogProof  # noqa: E402
from ledger.tlog.tiles import TILE_WIDTH, entries_path, tile_path  # noqa: E402


def start_server(data: Path, workers: int) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-c", "from client.cli import main; main()", "serve", "--data",
           str(data), "--port", "0", "--workers", str(workers), "--origin", "127.0.0.1/bench",
           "--rate", "1000000"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=_HERE.parent)
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("serving on "):
            return proc, line.split()[-1]
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit("ktl serve did not start")


def make_entries(n: int) -> list[bytes]:
    key = generate_private_key()
    body = examples.kernel()
    out = []
    for i in range(n):
        body["version"] = f"1.0.{i}"
        stmt = make_statement(body["name"], examples.digest(f"src-{i}"),
                              parse_predicate(KERNEL_V1, body))
        out.append(encode_entry(make_entry(stmt, [key])))
    return out


def populate(log: LogClient, entries: list[bytes], console: Console) -> None:
    for i in range(0, len(entries), 1000):
        results = log.submit_batch(entries[i : i + 1000])
        bad = [r for r in results if isinstance(r, Exception)]
        if bad:
            raise SystemExit(f"the log rejected entries: {bad[0]}")
        console.print(f"  submitted {min(i + 1000, len(entries))}/{len(entries)}", end="\r")
    console.print()


def raw_tile_rate(url: str, size: int) -> float:
    """Entries/s for fetching every entry bundle and level-0 tile once (no verification)."""
    session = requests.Session()
    paths = []
    for n in range((size + TILE_WIDTH - 1) // TILE_WIDTH):
        width = min(TILE_WIDTH, size - n * TILE_WIDTH)
        paths += [entries_path(n, width), tile_path(0, n, width)]
    t0 = time.perf_counter()
    for p in paths:
        r = session.get(f"{url}/{p}", timeout=30)
        r.raise_for_status()
        _ = r.content
    return size / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2, help="monitor worker processes, second row")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="a smoke run of a few seconds")
    args = ap.parse_args()
    if args.tiny:
        args.entries, args.seconds, args.workers, args.jobs = 300, 0.1, 1, 2
    console = Console(stderr=True)
    rows: list[tuple[str, str, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        proc, url = start_server(Path(tmp) / "data", args.workers)
        try:
            log = LogClient(url, transport=Transport(timeout=(5.0, 120.0)))
            console.print(f"signing {args.entries} entries …")
            entries = make_entries(args.entries)
            console.print(f"submitting to {url} …")
            populate(log, entries, console)
            info = log.info()
            verifier = load_verifier(info.verifier_key)
            note = log.checkpoint()
            size = Checkpoint.from_text(split_note(note)[0]).size

            raw = raw_tile_rate(url, size)
            rows.append(("monitor", "server tile serving, no verification (baseline)", raw, "1.00x"))
            sess = connect(log, TrustedState(home), info.verifier_key)
            t0 = time.perf_counter()
            report = run_monitor(sess, Path(tmp) / "monitor.json")
            mon = report.entries_checked / (time.perf_counter() - t0)
            rows.append(("monitor", "`run_monitor` catch-up from 0 (entries/s)", mon,
                         f"{mon / raw:.2f}x"))
            t0 = time.perf_counter()
            report = run_monitor(sess, Path(tmp) / "monitor-jobs.json", jobs=args.jobs)
            par = report.entries_checked / (time.perf_counter() - t0)
            rows.append(("monitor", f"`run_monitor --jobs {args.jobs}` catch-up from 0", par,
                         f"{par / raw:.2f}x"))
            sample = entries[: min(len(entries), 5000)]
            t0 = time.perf_counter()
            for e in sample:
                verify_entry(decode_entry(e))
            cpu = len(sample) / (time.perf_counter() - t0)
            rows.append(("monitor", "offline decode_entry+verify_entry (CPU ceiling)", cpu,
                         f"{cpu / raw:.2f}x"))

            rec = log.entry(size // 2)
            proof = TlogProof(rec.index, rec.inclusion_proof, rec.checkpoint).to_text().encode()
            logged = decode_entry(rec.entry_bytes)
            env = logged.envelope
            pub = public_key_from_b64(next(iter(logged.keys.values())))
            msg = env.pae()
            sig = env.signatures[0].sig
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < args.seconds:
                pub.verify(sig, msg)
                open_checkpoint(rec.checkpoint, verifier)
                n += 1
            base = n / (time.perf_counter() - t0)
            rows.append(("receipt", "raw: checkpoint note + envelope Ed25519 (baseline)", base,
                         "1.00x"))
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < args.seconds:
                verify_receipt(proof, rec.entry_bytes, verifier)
                n += 1
            full = n / (time.perf_counter() - t0)
            rows.append(("receipt", f"`verify_receipt` offline (tree of {size})", full,
                         f"{full / base:.2f}x"))
        finally:
            proc.terminate()
            proc.wait(30)
    if args.json:
        print(json.dumps([{"kind": k, "what": w, "rate": r, "ratio": x} for k, w, r, x in rows]))
        return
    table = Table(title=f"client: {args.entries} entries, {os.cpu_count()} CPUs")
    for col in ("kind", "what", "per second", "vs baseline"):
        table.add_column(col, justify="right" if col != "what" else "left")
    for k, w, r, x in rows:
        table.add_row(k, w, f"{r:,.0f}", x)
    Console().print(table)


if __name__ == "__main__":
    main()
