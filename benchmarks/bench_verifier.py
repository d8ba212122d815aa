"""Verifier figures: `check` wall time per op and budget; `bench` interval width per second.

    .venv/bin/python benchmarks/bench_verifier.py [--repeats 3] [--bench-budgets 2,5,10]

Baselines measured in the same run: a sandboxed child that starts and exits
without a kernel (the fixed cost of every sandboxed run) and a bare gcc -O3
build of the same kernel. Goals (2 cores): check quick <= 20 s, full <= 180 s per
kernel; bench reaches +-5% within 30 s on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verifier import BenchSettings, KernelSpec, bench, check, get_runtime  # noqa: E402
from verifier.sandbox import Limits, run_sandboxed  # noqa: E402


def _median_time(fn: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _bare_child() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_sandboxed([sys.executable, "-s", "-B", "-c", "import numpy"], Path(tmp), Limits())


def _bare_build(kernel: Path) -> None:
    spec = KernelSpec.load(kernel)
    with tempfile.TemporaryDirectory() as tmp:
        get_runtime(spec.runtime).build(spec, "release", Path(tmp))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bench-budgets", default="2,5,10")
    parser.add_argument("--bench-kernels", default="matmul-blocked,sum-rows")
    parser.add_argument("--only", choices=["check", "bench"], default=None)
    parser.add_argument("--tiny", action="store_true",
                        help="a smoke run: one kernel, quick check only, one short bench")
    args = parser.parse_args()
    console = Console(width=200)
    kernels = [p.parent for p in sorted((ROOT / "examples").glob("*/kernel.toml"))
               if get_runtime(KernelSpec.load(p.parent).runtime).unavailable_reason() is None]
    if args.tiny:
        kernels = [k for k in kernels if k.name == "sum-rows"][:1]
        args.repeats, args.bench_kernels, args.bench_budgets = 1, "sum-rows", "0.3"

    if args.only != "bench":
        _check_figures(console, kernels, args.repeats, full=not args.tiny)
    if args.only != "check":
        _bench_figures(console, args.bench_kernels.split(","),
                       [float(x) for x in args.bench_budgets.split(",")], slow=not args.tiny)


def _check_figures(console: Console, kernels: list[Path], repeats: int, full: bool = True) -> None:
    table = Table(title=f"ktl check wall time per kernel (median of {repeats})")
    for col in ("kernel", "op", "sandbox child (baseline)", "gcc build (baseline)",
                "check quick", "check full", "quick goal 20 s", "full goal 180 s"):
        table.add_column(col)
    child = _median_time(_bare_child, repeats)
    for kernel in kernels:
        op = KernelSpec.load(kernel).op
        build = _median_time(lambda k=kernel: _bare_build(k), repeats)
        quick = _median_time(lambda k=kernel: check(k, budget="quick", seed=1), repeats)
        took = (_median_time(lambda k=kernel: check(k, budget="full", seed=1), repeats)
                if full else float("nan"))
        table.add_row(kernel.name, op, f"{child:.2f} s", f"{build:.2f} s", f"{quick:.2f} s",
                      f"{took:.2f} s", "ok" if quick <= 20 else "MISSED",
                      "ok" if took <= 180 else ("MISSED" if full else "not run"))
    console.print(table)


def _bench_figures(console: Console, names: list[str], budgets: list[float], slow: bool = True) -> None:
    table = Table(title="ktl bench: speed-up interval reached per second of measuring "
                        "(target set unreachably tight so each run uses its whole budget)")
    for col in ("kernel", "shape", "budget", "measured", "n", "speed-up", "95% CI half-width",
                "+-5% reached", "trusted"):
        table.add_column(col)
    for name in names:
        for budget in budgets:
            report = bench(ROOT / "examples" / name,
                           BenchSettings(seed=1, time_budget_s=budget, target=1e-6, max_reps=10**6))
            for r in report.results:
                shape = ",".join(f"{k}={v}" for k, v in r.shape.items())
                table.add_row(name, shape, f"{budget:g} s", f"{report.measured_s:.1f} s",
                              str(r.n), f"{r.speedup:.3f}x", f"+-{100 * r.halfwidth:.2f}%",
                              "yes" if r.halfwidth <= 0.05 else "no", str(report.trusted))
    console.print(table)
    if not slow:
        return
    # Time to +-5%: the default stopping rule (stop once the interval is within +-5%).
    table = Table(title="ktl bench: time to a +-5% interval (default stopping rule, budget 30 s)")
    for col in ("kernel", "measured", "n", "half-width", "trusted", "notes"):
        table.add_column(col)
    for name in names:
        report = bench(ROOT / "examples" / name, BenchSettings(seed=2, time_budget_s=30))
        for r in report.results:
            table.add_row(name, f"{report.measured_s:.1f} s", str(r.n), f"+-{100 * r.halfwidth:.2f}%",
                          str(report.trusted), "; ".join(report.notes[2:])[:120])
    console.print(table)


if __name__ == "__main__":
    main()
