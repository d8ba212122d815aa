"""Trust boundary v2 (issue 10): bench speed-ups old vs new, check times, the huge-index cost.

    .venv/bin/python benchmarks/bench_trust_boundary.py [--old-rev f0f20a3] [--budget 5] [--tiny]

Baseline in the same run: the previous design (kernel and baseline timed inside one
Python child) from the git revision `--old-rev`, extracted with `git archive` into
a temporary folder and run in its own process, alternating with the new design on
the same kernel and shape. Then `check --budget quick` and `--budget full` wall time
per example kernel (goals on 2 cores: 20 s and 180 s), and the `index.overflow`
row's own cost from the full report.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verifier import KernelSpec, check, get_runtime  # noqa: E402

# The old design's `bench` takes its settings as keywords; the new one as a BenchSettings.
BENCH = ("import json, sys\nfrom verifier import bench\n"
         "kw = dict(seed=7, time_budget_s=float(sys.argv[2]), target=0.02)\n"
         "try:\n    from verifier import BenchSettings\nexcept ImportError:\n"
         "    r = bench(sys.argv[1], **kw)\nelse:\n    r = bench(sys.argv[1], BenchSettings(**kw))\n"
         "x = r.results[0]\n"
         "print(json.dumps([x.speedup, *x.speedup_ci95, x.median_ns, x.baseline_median_ns, r.trusted]))\n")


def _bench(where: Path, kernel: Path, budget: float) -> list[float]:
    out = subprocess.run([sys.executable, "-c", BENCH, str(kernel), str(budget)], cwd=where,
                         env={"PYTHONPATH": str(where), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=600, check=True)
    return [float(x) for x in json.loads(out.stdout.strip().splitlines()[-1])]


def _speedups(console: Console, kernels: list[Path], old: Path, budget: float) -> None:
    table = Table(title=f"bench speed-up vs NumPy float32, old vs new design, {budget:g} s each, "
                        "alternating in one run")
    for col in ("kernel", "design", "speed-up", "95% CI", "kernel median", "baseline median",
                "trusted"):
        table.add_column(col)
    for kernel in kernels:
        for design, where in (("new", ROOT), ("old", old), ("new", ROOT), ("old", old)):
            s, lo, hi, k, b, trusted = _bench(where, kernel, budget)
            table.add_row(kernel.name, design, f"{s:.3f}x", f"[{lo:.3f}, {hi:.3f}]",
                          f"{k / 1e3:.1f} us", f"{b / 1e3:.1f} us", str(bool(trusted)))
    console.print(table)


def _checks(console: Console, kernels: list[Path]) -> None:
    table = Table(title="ktl check wall time per kernel (new design), and the index.overflow row")
    for col in ("kernel", "check quick", "check full", "index.overflow (in full)", "goals"):
        table.add_column(col)
    for kernel in kernels:
        t0 = time.perf_counter()
        quick = check(kernel, budget="quick", seed=1)
        t1 = time.perf_counter()
        full = check(kernel, budget="full", seed=1)
        t2 = time.perf_counter()
        row = full.get("index.overflow")
        cost = f"{row.metrics['seconds']:.1f} s" if "seconds" in row.metrics else row.outcome
        ok = t1 - t0 <= 20 and t2 - t1 <= 180 and quick.passed and full.passed
        table.add_row(kernel.name, f"{t1 - t0:.1f} s", f"{t2 - t1:.1f} s", cost,
                      "met" if ok else "MISSED")
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--old-rev", default="f0f20a3")
    parser.add_argument("--budget", type=float, default=5.0)
    parser.add_argument("--only", choices=["bench", "check"], default=None)
    parser.add_argument("--tiny", action="store_true",
                        help="a smoke run: sum-rows only, 0.3 s benches, no check timings")
    args = parser.parse_args()
    console = Console(width=200)
    kernels = [p.parent for p in sorted((ROOT / "examples").glob("*/kernel.toml"))
               if get_runtime(KernelSpec.load(p.parent).runtime).unavailable_reason() is None]
    if args.tiny:
        kernels = [k for k in kernels if k.name == "sum-rows"]
        args.budget, args.only = 0.3, "bench"
    with tempfile.TemporaryDirectory(prefix="ktl-old-") as tmp:
        old = Path(tmp)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.old_rev],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        if args.only != "check":
            _speedups(console, kernels, old, args.budget)
    if args.only != "bench":
        _checks(console, kernels)


if __name__ == "__main__":
    main()
