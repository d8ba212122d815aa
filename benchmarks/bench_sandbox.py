"""Sandbox figures: what each child start costs, and what a flooding child costs the parent.

    .venv/bin/python benchmarks/bench_sandbox.py [--repeats 20] [--tiny]

Baseline measured in the same run: the same command started with a bare
`subprocess.run` (no namespaces, Landlock, seccomp or caps). The flood rows run a
child that writes without end, first as one endless line, then as short lines,
and report how fast it is killed and how much the parent's peak RSS grew.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verifier.sandbox import Limits, run_sandboxed  # noqa: E402

COMMANDS = {"/bin/true": ["/bin/true"],
            "python -c 'import numpy'": [sys.executable, "-s", "-B", "-c", "import numpy"]}


def _median(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _sandboxed(argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_sandboxed(argv, Path(tmp), Limits())


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--tiny", action="store_true", help="a smoke run: 2 repeats")
    args = parser.parse_args()
    if args.tiny:
        args.repeats = 2
    console = Console(width=160)
    table = Table(title=f"child start, median of {args.repeats}")
    for col in ("command", "bare subprocess (baseline)", "run_sandboxed", "overhead"):
        table.add_column(col)
    for name, argv in COMMANDS.items():
        bare = _median(lambda a=argv: subprocess.run(a, check=False), args.repeats)  # type: ignore[misc]
        boxed = _median(lambda a=argv: _sandboxed(a), args.repeats)  # type: ignore[misc]
        table.add_row(name, f"{bare * 1000:.1f} ms", f"{boxed * 1000:.1f} ms",
                      f"{(boxed - bare) * 1000:+.1f} ms")
    console.print(table)
    flood = Table(title="a flooding child")
    for col in ("child", "killed after", "reason", "parent peak RSS growth"):
        flood.add_column(col)
    for name, script in (("one endless line", "tr '\\0' A < /dev/zero"),
                         ("short lines without end", "yes short-line")):
        before = _peak_rss_mib()
        with tempfile.TemporaryDirectory() as tmp:
            res = run_sandboxed(["/bin/sh", "-c", script], Path(tmp), Limits(wall_s=60.0))
        flood.add_row(name, f"{res.wall_s:.2f} s", str(res.output_excess),
                      f"{_peak_rss_mib() - before:.1f} MiB")
    console.print(flood)


if __name__ == "__main__":
    main()
