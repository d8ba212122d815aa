"""Figures for kernels defined by a PyTorch module (issue 23): the examples' check and bench.

    .venv/bin/python benchmarks/bench_torch.py [--runs 3] [--time-budget 10] [--no-cold] [--tiny]

- `ktl check` (quick) of examples/torch-rmsnorm (C++ `load_inline`) with an empty build
  cache (a fresh KTL_CACHE_DIR: the extension is built in the compiler's sandbox), then
  again with the cache filled by that first check;
- `ktl check` of examples/triton-bias-gelu (Triton's interpreter on a CPU);
- `ktl bench` of torch-rmsnorm against PyTorch eager: `--runs` independent runs of
  `--time-budget` seconds, the speed-up with its 95% interval over runs;
- `ktl bench` of triton-bias-gelu, which says why it does not time it on a CPU.

Wall times include starting both sandboxed processes (importing torch twice). The load
average at the start and the end is printed: on a shared machine read it with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verifier import (  # noqa: E402
    BenchSettings,
    RuntimeUnavailableError,
    bench,
    bench_runs,
    check,
)

RMSNORM = ROOT / "examples" / "torch-rmsnorm"
GELU = ROOT / "examples" / "triton-bias-gelu"


def _timed(what: str, fn: Callable[[], Any]) -> tuple[float, Any]:
    print(f"{what}...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    print(f"  {seconds:.1f} s", file=sys.stderr, flush=True)
    return seconds, out


def _check_row(label: str, folder: Path) -> dict[str, Any]:
    seconds, report = _timed(label, lambda: check(folder, budget="quick"))
    return {"what": label, "wall_s": round(seconds, 1), "passed": report.passed,
            "build": report.get("build").detail}


def _refusal() -> dict[str, Any]:
    try:
        bench(GELU, BenchSettings(time_budget_s=2.0))
        refused = "timed (unexpected without a GPU)"
    except RuntimeUnavailableError as exc:
        refused = str(exc)[:120]
    return {"what": "bench triton-bias-gelu", "refused": refused}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--time-budget", type=float, default=10.0)
    parser.add_argument("--no-cold", action="store_true", help="skip the empty-cache build")
    parser.add_argument("--tiny", action="store_true",
                        help="smoke run: only the refusal to time Triton on a CPU (no processes)")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    load = [os.getloadavg()[0]]
    if args.tiny:
        rows.append(_refusal())
        print(json.dumps({"load_average_1min": load, "rows": rows}, indent=1))
        return 0
    if not args.no_cold:
        with tempfile.TemporaryDirectory(prefix="ktl-bench-cache-") as cache:
            os.environ["KTL_CACHE_DIR"] = cache
            rows.append(_check_row("check torch-rmsnorm, empty build cache", RMSNORM))
            rows.append(_check_row("check torch-rmsnorm, extensions cached", RMSNORM))
            del os.environ["KTL_CACHE_DIR"]
    else:
        rows.append(_check_row("check torch-rmsnorm (cache as it is)", RMSNORM))
    rows.append(_check_row("check triton-bias-gelu (interpreter)", GELU))
    seconds, runs = _timed(f"bench torch-rmsnorm, {args.runs} runs of {args.time_budget:g} s",
                           lambda: bench_runs(RMSNORM, runs=args.runs,
                                              settings=BenchSettings(time_budget_s=args.time_budget)))
    pred = runs.to_predicate()
    result = pred.results[0] if pred.results else None
    rows.append({"what": "bench torch-rmsnorm vs PyTorch eager", "wall_s": round(seconds, 1),
                 "trusted": pred.trusted,
                 "speedup": None if result is None else round(result.speedup, 3),
                 "ci95": None if result is None else [round(v, 3) for v in result.speedup_ci95],
                 "per_run": [] if result is None else [round(r.speedup, 3) for r in result.runs or ()],
                 "kernel_median_us": None if result is None else round(result.median_ns / 1e3, 1),
                 "eager_median_us": None if result is None else
                 round(result.baseline_median_ns / 1e3, 1)})
    rows.append(_refusal())
    load.append(os.getloadavg()[0])
    print(json.dumps({"load_average_1min": load, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
