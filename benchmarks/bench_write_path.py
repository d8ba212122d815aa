"""Where a signed submission's CPU goes on the server, stage by stage, in one process.

    .venv/bin/python benchmarks/bench_write_path.py            # 3,000 entries per stage
    .venv/bin/python benchmarks/bench_write_path.py --tiny     # smoke run (seconds)

Each stage runs the server's own code over the same real signed kernel/v1 entries
(1.3 KB, one Ed25519 signature) that `bench_ledger.py` submits over HTTP:

* parse: `attest.decode_entry` (strict JSON, RFC 8785 check, envelope and keys shape);
* verify: `attest.verify_entry` (key checks, Ed25519, statement and predicate);
* admit: `ledger.server._admit.admit_body`, the whole admission of one POST body
  (parse + verify + leaf hash + searchable facts), and `admit` per entry of a parsed
  batch body;
* integrate: `Sequencer.integrate` on SQLite (one FULL-sync commit per batch) at the
  batch sizes a loaded server sees (20 for single POSTs, 250 for a batch request);
* proof: the receipt's inclusion proof, as `LogService.receipt_proof` builds it;
* JSON: the receipt object to response bytes.

The baseline rows in the same run are the stdlib floor under the stages: `json.loads`
of the body, one SHA-256 of it, and one bare Ed25519 verify through `cryptography`.
Figures are CPU time of this process per entry (so a busy machine slows them less than
wall time), the median of ``--repeat`` passes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ledger import signed_entries

from attest import decode_entry, verify_entry
from ledger.sequencer import Receipt, Sequencer, Submission
from ledger.server import ServerConfig, create_app
from ledger.server._admit import admit, admit_body, parse_json
from ledger.server._api import _receipt_json
from ledger.server._keys import load_or_create_signer
from ledger.storage import SqliteStorage, StoredHashReader, TileCache
from ledger.tlog.merkle import inclusion_proof

console = Console()


def per_entry(fn: Callable[[], int], repeat: int) -> float:
    """Median CPU microseconds (this process, all threads) per entry over ``repeat`` passes; ``fn`` returns entries done."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        n = fn()
        times.append((time.process_time() - t0) / n * 1e6)
    return statistics.median(times)


def stage_rows(bodies: list[bytes], tmp: Path, repeat: int, batch: int) -> list[tuple[str, float]]:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    parsed = [decode_entry(b) for b in bodies]
    env0 = parsed[0].envelope
    (raw_key,) = [__import__("base64").b64decode(v) for v in parsed[0].keys.values()]
    key = Ed25519PublicKey.from_public_bytes(raw_key)
    message, sig = env0.pae(), env0.signatures[0].sig
    batch_obj = parse_json(b'{"entries":[' + b",".join(bodies[:batch]) + b"]}")["entries"]
    limit = 65535

    def each(fn: Callable[[bytes], object], items: Sequence[bytes]) -> Callable[[], int]:
        def run() -> int:
            for x in items:
                fn(x)
            return len(items)
        return run

    rows: list[tuple[str, float]] = [
        ("baseline: json.loads of the body", per_entry(each(json.loads, bodies), repeat)),
        ("baseline: SHA-256 of the body", per_entry(each(lambda b: hashlib.sha256(b).digest(), bodies),
                                                    repeat)),
        ("baseline: one Ed25519 verify", per_entry(each(lambda _: key.verify(sig, message), bodies),
                                                   repeat)),
        ("parse: decode_entry", per_entry(each(decode_entry, bodies), repeat)),
        ("verify: verify_entry", per_entry(
            lambda: sum(1 for e in parsed if verify_entry(e)), repeat)),
        ("admit: one POST body (admit_body)", per_entry(
            each(lambda b: admit_body(b, limit), bodies), repeat)),
        (f"admit: per entry of a parsed batch of {batch}", per_entry(
            lambda: sum(1 for o in batch_obj if admit(o, limit)), repeat)),
    ]
    rows.extend(server_rows(bodies, tmp, repeat, batch))
    return rows


def server_rows(bodies: list[bytes], tmp: Path, repeat: int, batch: int) -> list[tuple[str, float]]:
    """Integration, the receipt's proof and its JSON, with the server's own objects."""
    subs = [admit_body(b, 65535) for b in bodies]
    storage = SqliteStorage(tmp / "seq")
    signer = load_or_create_signer(tmp / "seq", "bench.example/log")
    seq = Sequencer(storage, signer, signer.name)
    rows: list[tuple[str, float]] = []
    made = 0

    def fresh(n: int) -> list[Submission]:
        """``n`` submissions not yet in the log (the sequencer does not verify; the bytes
        are a signed entry's with a unique first 32 bytes, so none is a duplicate)."""
        nonlocal made
        out = [Submission(hashlib.sha256(b"%d" % (made + i)).digest() + s.data[32:], s.facts)
               for i, s in zip(range(n), subs * (n // len(subs) + 1), strict=False)]
        made += n
        return out

    for size in (20, batch):
        passes = [fresh(size) for _ in range(repeat)]

        def integrate(passes: list[list[Submission]] = passes) -> int:
            chunk = passes.pop()
            seq.integrate(chunk)
            return len(chunk)
        rows.append((f"integrate: Sequencer.integrate, batch {size} (SQLite)",
                     per_entry(integrate, repeat)))
    storage.close()

    app = create_app(ServerConfig(data_dir=tmp / "srv", batch_delay_ms=0), check=False)
    svc = app.extensions["ktl"]
    receipts: list[Receipt] = []
    for lo in range(0, len(subs), 500):
        receipts.extend(r for r in svc.submit(subs[lo:lo + 500]) if isinstance(r, Receipt))
    cache = TileCache(1024)

    def proofs() -> int:
        for r in receipts:
            inclusion_proof(r.index, r.checkpoint.size, StoredHashReader(svc.storage, r.checkpoint.size,
                                                                         cache))
        return len(receipts)

    def receipt_json() -> int:
        with app.app_context():
            for r in receipts:
                app.json.response(_receipt_json(svc, r)).get_data()
        return len(receipts)

    rows.append(("proof: receipt inclusion proof", per_entry(proofs, repeat)))
    rows.append(("proof + JSON: receipt to response bytes", per_entry(receipt_json, repeat)))
    svc.close()
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=3000, help="signed entries per stage")
    ap.add_argument("--repeat", type=int, default=5, help="passes per stage (median)")
    ap.add_argument("--batch", type=int, default=250, help="entries per batch request")
    ap.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    ap.add_argument("--tiny", action="store_true", help="a smoke run of a few seconds")
    args = ap.parse_args(argv)
    if args.tiny:
        args.entries, args.repeat, args.batch = 300, 1, 50
    bodies = signed_entries(args.entries)
    with tempfile.TemporaryDirectory(prefix="ktl-write-") as tmp:
        rows = stage_rows(bodies, Path(tmp), args.repeat, args.batch)
    table = Table(title=f"write path per entry, {args.entries:,} signed kernel/v1 entries "
                        f"({len(bodies[0]):,} bytes), median of {args.repeat}")
    table.add_column("stage")
    table.add_column("CPU µs per entry", justify="right")
    for what, us in rows:
        table.add_row(what, f"{us:,.1f}")
    console.print(table)
    if args.markdown:
        print("| stage | CPU µs per entry |\n|---|---:|")
        for what, us in rows:
            print(f"| {what} | {us:,.1f} |")


if __name__ == "__main__":
    main()
