"""Sign and verify rates for a typical attestation, against raw Ed25519 on the same bytes.

The typical envelope is a benchmark/v1 statement with 10 results (about 4 KB of
canonical JSON). Each row is the median of --repeats timed runs of --seconds each,
all in the same process and interleaved round-robin, so the raw `cryptography`
rows are the baseline:

    .venv/bin/python benchmarks/bench_attest.py [--seconds 0.5] [--repeats 5] [--results 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

# Runnable without installing the project: the repository root goes on sys.path.
_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from attest import (  # noqa: E402
    BENCHMARK_V1,
    PAYLOAD_TYPE,
    decode_entry,
    encode_entry,
    generate_private_key,
    keyid,
    make_entry,
    make_statement,
    pae,
    parse_predicate,
    public_key_from_raw,
    sign_envelope,
    statement_payload,
    verify_entry,
    verify_envelope,
)
from attest import examples as ex  # noqa: E402
from attest.keys import raw_public_key  # noqa: E402


def timed_run(fn: Callable[[], object], seconds: float) -> float:
    """Calls per second over one run of about `seconds`."""
    calls = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(20):
            fn()
        calls += 20
        now = time.perf_counter()
        if now >= deadline:
            return calls / (now - start)


def rates(fns: list[Callable[[], object]], seconds: float, repeats: int) -> list[float]:
    """Median rate of each function; runs are interleaved round-robin so that noise from
    other processes falls on every row alike, baseline included."""
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            samples[i].append(timed_run(fn, seconds))
    return [statistics.median(s) for s in samples]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=0.5, help="length of one timed run")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per row (median reported)")
    parser.add_argument("--results", type=int, default=10, help="results in the benchmark predicate")
    parser.add_argument("--tiny", action="store_true", help="a smoke run of a few seconds")
    args = parser.parse_args()
    if args.tiny:
        args.seconds, args.repeats = 0.02, 1

    key = generate_private_key()
    public = key.public_key()
    statement = make_statement(ex.KERNEL_NAME, ex.SOURCE_SHA256,
                               parse_predicate(BENCHMARK_V1, ex.benchmark(args.results)))
    payload = statement_payload(statement)
    message = pae(PAYLOAD_TYPE, payload)
    signature = key.sign(message)
    envelope = sign_envelope(payload, PAYLOAD_TYPE, [key])
    entry_bytes = encode_entry(make_entry(statement, [key]))
    trusted = {keyid(public): public}
    raw = raw_public_key(public)

    rows: list[tuple[str, str, Callable[[], object]]] = [
        ("sign", "raw Ed25519 sign, same PAE bytes (baseline)", lambda: key.sign(message)),
        ("sign", "sign_envelope (PAE + sign)", lambda: sign_envelope(payload, PAYLOAD_TYPE, [key])),
        ("sign", "make_entry: validate, RFC 8785, sign",
         lambda: make_entry(statement, [key])),
        ("verify", "raw Ed25519 verify, same PAE bytes (baseline)",
         lambda: public.verify(signature, message)),
        ("verify", "verify_envelope (PAE + verify)", lambda: verify_envelope(envelope, trusted)),
        ("verify", "decode_entry + verify_entry: canonical check, verify, validate",
         lambda: verify_entry(decode_entry(entry_bytes))),
        ("verify", "public_key_from_raw: strict key check (canonical, large order) + load",
         lambda: public_key_from_raw(raw)),
    ]
    console = Console()
    console.print(f"payload {len(payload)} bytes, entry {len(entry_bytes)} bytes, "
                  f"{args.results} results; median of {args.repeats} interleaved runs x {args.seconds}s")
    table = Table(title="attest: sign and verify rates (one core)", title_justify="left")
    for col in ("kind", "operation", "ops/s", "µs/op", "vs raw"):
        table.add_column(col, justify="right" if col in ("ops/s", "µs/op", "vs raw") else "left")
    baseline: dict[str, float] = {}
    measured = rates([fn for _, _, fn in rows], args.seconds, args.repeats)
    for (kind, label, _), ops in zip(rows, measured, strict=True):
        baseline.setdefault(kind, ops)
        table.add_row(kind, label, f"{ops:,.0f}", f"{1e6 / ops:,.1f}", f"{ops / baseline[kind]:.2f}x")
    console.print(table)


if __name__ == "__main__":
    main()
