"""What the proofs add to `ktl check --budget full`, per C example.

For each kernel, in one process and on the same machine, one after the other: `check --budget
full` with the proof rows (what a user runs), the same check with its proof rows left out (the
baseline), and the proof rows alone (`proof_rows`: the same tools, bounds and CPU limit,
self-tests included). Wall seconds are the parent's clock; tool CPU seconds are what each row's tool used
on the kernel (its `cpu_s` metric; the self-test is extra). Rows print as they finish:

    .venv/bin/python benchmarks/bench_proofs.py [--kernels sum-rows,softmax-rows] [--no-check]

`--tiny` proves one small kernel at bounds 2 (a smoke run of a few seconds).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

# Runnable without installing the project: the repository root goes on sys.path.
_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent))

from verifier import KernelSpec, check  # noqa: E402
from verifier.proofs import (  # noqa: E402
    MEMORY_ROW,
    OVERFLOW_ROW,
    ProofSettings,
    Tools,
    proof_rows,
    quick_rows,
)

EXAMPLES = ("sum-rows", "softmax-rows", "rmsnorm-rows", "matmul-blocked", "attention",
            "attention-causal")


def _proofs(folder: Path, settings: ProofSettings | None) -> tuple[float, dict[str, str]]:
    spec = KernelSpec.load(folder)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ktl-bench-proofs-") as work:
        rows = proof_rows(spec, True, Path(work), None, settings)
    wall = time.perf_counter() - start
    seen = {r.name: f"{r.outcome} ({r.metrics.get('cpu_s', 0.0):.1f} s CPU)" for r in rows}
    return wall, seen


def _check(folder: Path, proofs: bool = True) -> float:
    """Wall seconds of `check --budget full`; without `proofs`, its proof rows are replaced by
    the quick budget's skipped ones (the baseline: the same run less the proofs)."""
    import verifier.checks._suite as suite  # the one place the check picks its proof rows

    kept = suite.proof_rows
    if not proofs:
        suite.proof_rows = lambda spec, full, work, progress: quick_rows()
    try:
        start = time.perf_counter()
        check(folder, budget="full", seed=1)
        return time.perf_counter() - start
    finally:
        suite.proof_rows = kept


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", default=",".join(EXAMPLES),
                    help="comma-separated example folders")
    ap.add_argument("--no-check", action="store_true", help="time the proof rows only")
    ap.add_argument("--tiny", action="store_true", help="smoke run: one kernel at bounds 2")
    args = ap.parse_args()
    tools = Tools.here()
    print(f"ESBMC: {tools.esbmc if isinstance(tools.esbmc, str) else tools.esbmc.version}; "
          f"Frama-C: {tools.frama_c if isinstance(tools.frama_c, str) else tools.frama_c.version}")
    if args.tiny:
        folder = _HERE.parent / "tests" / "proof_kernels" / "int32_rows"
        wall, seen = _proofs(folder, ProofSettings(cpu_s=60, bounds={"R": 2, "C": 2}))
        print(f"int32_rows (R, C <= 2): proofs {wall:.1f} s wall; {seen}")
        return 0
    print("kernel | check --budget full (s) | proofs alone (s) | full without proofs (s) | "
          f"{MEMORY_ROW} | {OVERFLOW_ROW}")
    for name in args.kernels.split(","):
        folder = _HERE.parent / "examples" / name
        full = without = float("nan")
        if not args.no_check:
            full = _check(folder)
            without = _check(folder, proofs=False)
        wall, seen = _proofs(folder, None)
        print(f"{name} | {full:.1f} | {wall:.1f} | {without:.1f} | {seen.get(MEMORY_ROW)} | "
              f"{seen.get(OVERFLOW_ROW)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
