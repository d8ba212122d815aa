"""The steps of benchmarks/gpu_check.sh: the verifier's device path on a GPU, one step a call.

    python3 benchmarks/bench_gpu_steps.py probe OUT
    python3 benchmarks/bench_gpu_steps.py bench OUT LABEL FOLDER SECONDS [--cold] [--shape R=..,C=..]
    python3 benchmarks/bench_gpu_steps.py attack OUT LABEL SOLUTION SECONDS
    python3 benchmarks/bench_gpu_steps.py reproduce OUT LABEL CLAIM_JSON FOLDER SECONDS
    python3 benchmarks/bench_gpu_steps.py --tiny     (no GPU needed: the fake device)

Each step writes OUT/LABEL.json (the bench report, or the probe) and prints one summary
line. Only the verifier runs (no log, no signatures), so the machine needs torch,
Triton, nvidia-ml-py and numpy, not the log's dependencies.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from verifier.device import Behaviour, FakeDevice, FakeSide, TimingPlan, measure  # noqa: E402

MANIFEST = """name = "gpu-check/{name}"
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
agent = "gpu-check"
agent_version = "1"
model = "none"

[target]
hardware_class = "gpu"
"""


def _summary(report: Any, seconds: float) -> dict[str, Any]:
    body = report.to_predicate()
    res = body.results[0] if body.results else None
    return {
        "speedup": None if res is None else round(res.speedup, 4),
        "ci95": None if res is None else [round(x, 4) for x in res.speedup_ci95],
        "halfwidth": None if res is None else round(res.halfwidth, 4),
        "median_ns": None if res is None else round(res.median_ns, 1),
        "baseline_median_ns": None if res is None else round(res.baseline_median_ns, 1),
        "n": None if res is None else res.n, "trusted": body.trusted,
        "faults": [f.kind for f in body.faults],
        "timer": body.device.timer if body.device else None,
        "throttle": list(body.device_conditions.throttle) if body.device_conditions else None,
        "during_samples": body.device_conditions.during_samples if body.device_conditions else None,
        "during_throttle": list(body.device_conditions.during_throttle)
        if body.device_conditions else None,
        "cold": body.device.cold if body.device else None,
        "batch": report.samples[0].get("batch") if report.samples else None,
        "seconds": round(seconds, 1),
    }


def _write(out: Path, label: str, report: Any, line: dict[str, Any]) -> None:
    (out / f"{label}.json").write_text(json.dumps({"summary": line, "report": report.to_json()},
                                                  indent=1))
    print(f"{label}: {json.dumps(line)}")


def _bench(folder: Path, seconds: float, cold: bool, shape: str | None) -> Any:
    from verifier.benchmark._cabi_bench import cabi_bench
    from verifier.benchmark._device_bench import DeviceBenchSettings, device_bench, gpu_device
    from verifier.kernel import KernelSpec

    spec = KernelSpec.load(folder)
    settings = DeviceBenchSettings(device="cuda", time_budget_s=seconds, max_halfwidth=0.05,
                                   cold=cold)
    if spec.is_torch:
        return device_bench(spec, settings, gpu_device(), seed=1, progress=print)
    shapes = None if shape is None else [
        {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}]
    return cabi_bench(spec, settings, gpu_device(), shapes, seed=1, progress=print)


def step_probe(out: Path) -> int:
    from verifier.device import probe_device

    probed = probe_device()
    body: dict[str, Any] = {"error": probed.error, "info": probed.info,
                            "peaks": None if probed.peaks is None else vars(probed.peaks)}
    if probed.error is None:
        from verifier.benchmark._device_bench import gpu_device

        device = gpu_device()
        body["device"] = vars(device.info())
        body["sample"] = vars(device.sample())
    (out / "probe.json").write_text(json.dumps(body, indent=1))
    print(f"probe: {json.dumps(body)[:600]}")
    return 0 if probed.error is None else 1


def step_bench(out: Path, label: str, folder: Path, seconds: float, cold: bool,
               shape: str | None) -> int:
    t0 = time.perf_counter()
    report = _bench(folder, seconds, cold, shape)
    line = _summary(report, time.perf_counter() - t0)
    _write(out, label, report, line)
    return 0 if line["trusted"] else 1


def step_attack(out: Path, label: str, solution: Path, seconds: float) -> int:
    with tempfile.TemporaryDirectory(prefix="ktl-attack-") as tmp:
        folder = Path(tmp) / solution.stem
        folder.mkdir()
        shutil.copy(ROOT / "tests" / "gpu_attackers" / "reference.py", folder / "reference.py")
        shutil.copy(solution, folder / "solution.py")
        (folder / "kernel.toml").write_text(MANIFEST.format(name=solution.stem))
        t0 = time.perf_counter()
        report = _bench(folder, seconds, False, None)
    line = _summary(report, time.perf_counter() - t0)
    line["refused"] = bool(line["faults"]) or not line["trusted"]
    _write(out, label, report, line)
    return 0 if line["refused"] else 1


def step_reproduce(out: Path, label: str, claim: Path, folder: Path, seconds: float) -> int:
    from verifier.benchmark import BenchReport
    from verifier.reproduce import compare_benchmark

    claimed = BenchReport.from_json(json.loads(claim.read_text())["report"]).to_predicate()
    t0 = time.perf_counter()
    fresh = _bench(folder, seconds, False, None)
    claims = compare_benchmark(claimed, fresh.to_predicate())
    line = {**_summary(fresh, time.perf_counter() - t0),
            "verdicts": [c.verdict for c in claims],
            "reason": claims[0].reason[:300] if claims else "no claim to compare: "
            + "; ".join(claimed.notes[:2])[:300]}
    _write(out, label, fresh, line)
    return 0 if claims and all(c.verdict == "confirmed" for c in claims) else 1


def tiny() -> int:
    """The fake device: an honest kernel and a side-stream one, no GPU needed."""
    dev = FakeDevice()
    plan = TimingPlan(batch=8, reps=10, cold=False)
    for name, kernel in (("honest", Behaviour(kernel_ns=5_000.0)),
                         ("side stream", Behaviour(kernel_ns=5_000.0, late_share=0.9))):
        t = measure(FakeSide(dev, kernel, 1), FakeSide(dev, Behaviour(), 2), dev,
                    lambda r, c: [np.full(4, float(r * 8 + c))],
                    lambda a, b: all(np.allclose(x, y) for x, y in zip(a, b, strict=True)),
                    plan, np.random.default_rng(0), dev.clock)
        print(f"fake device, {name}: per call {np.median(t.kernel.per_call_ns):.0f} ns, "
              f"faults {[k for k, _ in t.faults]}")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--tiny"]:
        return tiny()
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["probe", "bench", "attack", "reproduce"])
    ap.add_argument("out", type=Path)
    ap.add_argument("rest", nargs="*")
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--shape")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if a.step == "probe":
        return step_probe(a.out)
    if a.step == "bench":
        label, folder, seconds = a.rest
        return step_bench(a.out, label, Path(folder), float(seconds), a.cold, a.shape)
    if a.step == "attack":
        label, solution, seconds = a.rest
        return step_attack(a.out, label, Path(solution), float(seconds))
    label, claim, folder, seconds = a.rest
    return step_reproduce(a.out, label, Path(claim), Path(folder), float(seconds))


if __name__ == "__main__":
    sys.exit(main())
