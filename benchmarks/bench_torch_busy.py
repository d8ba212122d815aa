"""Issue 40's busy-machine comparison: torch forgeries against their honest twin, cores kept busy.

    .venv/bin/python benchmarks/bench_torch_busy.py [--runs 3] [--time-budget 4] [--tiny]

Done-when of issue 40: "with both cores kept busy by other work, every forgery reports at
most its honest twin's speed-up (or is refused), and honest torch kernels move by less than
their between-run spread". On the op of `tests/torch_flawed/` (ReLU of a 64-wide linear
layer on 16 x 64 inputs) this script benches:

- the honest twin (`honest.py`, addmm and clamp) `--runs` times on the machine as it is,
  then `--runs` times with every core kept busy by spinners of its own (one per core,
  plain Python loops in their own processes, started before and stopped after);
- each cost forgery (`fork_idle`, `fork_burn`, `set_cache`, `sample_memo`,
  `frame_inflate`) once with the cores kept busy.

It prints one JSON object: each kernel's speed-ups against PyTorch eager and whether the
bench trusted them (a refusal is its error text's first words), the honest twin's
between-run spread (max - min of its quiet runs) and how far its median moved under load,
and for each forgery whether it reported at most the twin's busy median. The load average
at the start and at the end is printed: on a shared machine read the figures with it. No
test asserts on these figures (`--tiny`: the twin once with the cores busy, for 1 s).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verifier import BenchSettings, VerifierError, bench  # noqa: E402

FLAWED = ROOT / "tests" / "torch_flawed"
FORGERIES = ("fork_idle", "fork_burn", "set_cache", "sample_memo", "frame_inflate")
MANIFEST = """name = "bench/{name}"
version = "0.1.0"
op = "torch"
runtime = "torch"
reference = "reference.py"
solution = "solution.py"
sources = ["reference.py", "solution.py"]
entry = "ModelNew"
flags = []
dtype = "float32"
[generator]
agent = "bench"
agent_version = "1"
model = "m"
[target]
hardware_class = "cpu"
"""
SPIN = "while True:\n    pass\n"


def folder(work: Path, solution: str) -> Path:
    out = work / solution
    out.mkdir()
    shutil.copy(FLAWED / "reference.py", out / "reference.py")
    shutil.copy(FLAWED / f"{solution}.py", out / "solution.py")
    (out / "kernel.toml").write_text(MANIFEST.format(name=solution.replace("_", "-")))
    return out


@contextmanager
def busy(cores: int) -> Iterator[None]:
    """`cores` spinning Python processes (other work), stopped on exit."""
    procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(cores)]
    try:
        time.sleep(0.5)
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def one(path: Path, budget: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        run = bench(path, BenchSettings(time_budget_s=budget))
    except VerifierError as exc:
        return {"refused": str(exc)[:160], "wall_s": round(time.perf_counter() - t0, 1)}
    result = run.results[0] if run.results else None
    return {"speedup": None if result is None else round(result.speedup, 3),
            "trusted": run.trusted, "wall_s": round(time.perf_counter() - t0, 1)}


def speedups(rows: list[dict[str, Any]]) -> list[float]:
    return [float(r["speedup"]) for r in rows if r.get("speedup") is not None]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--time-budget", type=float, default=4.0)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2,
                        help="spinners while busy (default: one per core)")
    parser.add_argument("--tiny", action="store_true",
                        help="smoke run: the honest twin once, busy, for 1 s")
    args = parser.parse_args()
    runs, budget = (1, 1.0) if args.tiny else (args.runs, args.time_budget)
    forgeries = () if args.tiny else FORGERIES
    load = [round(os.getloadavg()[0], 2)]
    out: dict[str, Any] = {"cores_busy": args.cores, "runs": runs, "time_budget_s": budget}
    with tempfile.TemporaryDirectory(prefix="ktl-bench-busy-") as tmp:
        work = Path(tmp)
        twin = folder(work, "honest")
        quiet = [] if args.tiny else [one(twin, budget) for _ in range(runs)]
        with busy(args.cores):
            loaded = [one(twin, budget) for _ in range(runs)]
            forged = {name: one(folder(work, name), budget) for name in forgeries}
    q, b = speedups(quiet), speedups(loaded)
    out["honest_quiet"], out["honest_busy"] = quiet, loaded
    if q and b:
        spread = max(q) - min(q)
        moved = abs(statistics.median(b) - statistics.median(q))
        out["honest_spread"] = round(spread, 3)
        out["honest_moved"] = round(moved, 3)
        out["honest_moved_within_spread"] = moved <= spread
    twin_busy = statistics.median(b) if b else None
    for row in forged.values():
        got = row.get("speedup")
        if "refused" in row:
            row["at_most_twin"] = True
        elif got is not None and twin_busy is not None:
            row["at_most_twin"] = got <= twin_busy
    out["forgeries_busy"] = forged
    load.append(round(os.getloadavg()[0], 2))
    out["load_average_1min"] = load
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
