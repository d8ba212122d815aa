"""How long a torch check's comparison of one call's output takes, against its baseline.

`verifier.tensors.compare_tensor` on an output of --elements float32 values (the 6.3 M of
KernelBench's scaled element-wise problems) against its float64 reference: the all-finite
path (nearly every call), and as the baseline the general path that handles NaN and
infinities (the same arrays with one NaN planted in both, so both paths judge the same
values). Each row is the median of --repeats runs, interleaved, in one process:

    .venv/bin/python benchmarks/bench_tensors.py [--elements 6291456] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

# Runnable without installing the project: the repository root goes on sys.path.
_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from verifier.tensors import compare_tensor, held  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--elements", type=int, default=2048 * 3072)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="a smoke run of a second")
    args = parser.parse_args()
    n, repeats = (4096, 2) if args.tiny else (args.elements, args.repeats)
    rng = np.random.default_rng(1)
    ref = rng.standard_normal(n)
    out = held(ref.astype(np.float32).tobytes(), (n,), "float32")  # as a check keeps it
    with_nan = (ref.copy(), np.array(out, dtype=np.float64))
    with_nan[0][0] = with_nan[1][0] = np.nan
    cases = {"all finite (the common path)": (out, ref),
             "one NaN planted (the general path, baseline)": with_nan}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, (o, r) in cases.items():
            t0 = time.perf_counter()
            got = compare_tensor(o, r, "float32")
            times[name].append(time.perf_counter() - t0)
            assert got.ok, (name, got)
    table = Table(title=f"compare_tensor, {n:,} float32 elements (median of {repeats})")
    for col in ("path", "ms", "x baseline"):
        table.add_column(col)
    base = statistics.median(times["one NaN planted (the general path, baseline)"])
    for name, ts in times.items():
        mid = statistics.median(ts)
        table.add_row(name, f"{mid * 1e3:.0f}", f"{base / mid:.2f}")
    Console().print(table)


if __name__ == "__main__":
    main()
