"""The steps of benchmarks/gpu_check.sh: the verifier's device path on a GPU, one step a call.

    python3 benchmarks/bench_gpu_steps.py probe OUT
    python3 benchmarks/bench_gpu_steps.py bench OUT LABEL FOLDER SECONDS [--cold] [--shape R=..,C=..]
    python3 benchmarks/bench_gpu_steps.py attack OUT LABEL SOLUTION SECONDS
    python3 benchmarks/bench_gpu_steps.py reproduce OUT LABEL FOLDER SECONDS RUNS
    python3 benchmarks/bench_gpu_steps.py --tiny     (no GPU needed: the fake device)

Each step writes OUT/LABEL.json (the bench report, or the probe) and prints one summary
line. Only the verifier runs (no log, no signatures), so the machine needs torch,
Triton, nvidia-ml-py and numpy, not the log's dependencies. A bench times both L2 modes
(the one asked for gives the results; `modes` in the line has both). `reproduce` makes a
claim of RUNS independent runs and reproduces it with as many fresh ones.

With KTL_GPU_CHECK_FAKE=1 (gpu_check.sh's dry run, on any machine) every step runs on the
fake device instead (`verifier.benchmark._device_bench.fake_bench`: the same timing,
judging, report and summary, no process and no GPU): an honest kernel for the benches,
each attacker's `Behaviour` (FAKE_ATTACKS) for the attacks; a folder that is not a torch
module is stood in for by examples/torch-rmsnorm's spec.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
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

FAKE = os.environ.get("KTL_GPU_CHECK_FAKE") == "1"
HONEST = Behaviour(kernel_ns=10_000.0, jitter=0.01)
FAKE_ATTACKS = {
    "sidestream": Behaviour(kernel_ns=10_000.0, jitter=0.01, side_share=0.9),
    "eventpatch": Behaviour(kernel_ns=200_000.0, jitter=0.01, events_scale=0.001),
    "ptrcache": Behaviour(kernel_ns=10_000.0, jitter=0.01, cache="buffer"),
    "reuse": Behaviour(kernel_ns=10_000.0, jitter=0.01, cache="warmup"),
    "graphreplay": Behaviour(kernel_ns=10_000.0, jitter=0.01, cache="warmup"),
    "stale": Behaviour(kernel_ns=10_000.0, jitter=0.01, stale="previous"),
    "zeroed": Behaviour(kernel_ns=10_000.0, jitter=0.01, stale="zeros"),
    "otherprocess": Behaviour(kernel_ns=10_000.0, jitter=0.01, late_share=0.9, fetch_waits=False),
}
"""Each attacker of tests/gpu_attackers (and torch_flawed/ptrcache.py) as the fake device's
`Behaviour` of the same attack (tests/gpu_attackers/README.md)."""

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
        "modes": [{"cold": m.cold, "speedup": round(m.speedup, 4),
                   "ci95": [round(x, 4) for x in m.speedup_ci95], "n": m.n}
                  for m in (body.device.modes or ())] if body.device else None,
        "batch": report.samples[0].get("batch") if report.samples else None,
        "seconds": round(seconds, 1),
    }


def _write(out: Path, label: str, report: Any, line: dict[str, Any]) -> None:
    (out / f"{label}.json").write_text(json.dumps({"summary": line, "report": report.to_json()},
                                                  indent=1))
    print(f"{label}: {json.dumps(line)}")


def _bench(folder: Path, seconds: float, cold: bool, shape: str | None,
           behaviour: Behaviour = HONEST, seed: int = 1, both_modes: bool = True) -> Any:
    """One bench (both L2 modes unless `both_modes` is False: the attacks and the
    reproduction's runs need one, and the script's 8 minutes are short)."""
    from verifier.benchmark._cabi_bench import cabi_bench
    from verifier.benchmark._device_bench import (
        DeviceBenchSettings,
        device_bench,
        fake_bench,
        gpu_device,
    )
    from verifier.kernel import KernelSpec

    spec = KernelSpec.load(folder)
    settings = DeviceBenchSettings(device="cuda", time_budget_s=seconds, max_halfwidth=0.05,
                                   cold=cold, both_modes=both_modes)
    if FAKE:
        if not spec.is_torch:
            spec = KernelSpec.load(ROOT / "examples" / "torch-rmsnorm")
        return fake_bench(spec, dataclasses.replace(settings, max_reps=60), behaviour, seed)
    if spec.is_torch:
        return device_bench(spec, settings, gpu_device(), seed=seed, progress=print)
    shapes = None if shape is None else [
        {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}]
    return cabi_bench(spec, settings, gpu_device(), shapes, seed=seed, progress=print)


def step_probe(out: Path) -> int:
    from verifier.device import ProbeResult, probe_device

    if FAKE:
        fake = FakeDevice()
        stand_in = {"error": None, "info": {"fake": True}, "peaks": vars(fake.peaks()),
                    "device": vars(fake.info()), "sample": vars(fake.sample())}
        (out / "probe.json").write_text(json.dumps(stand_in, indent=1))
        print(f"probe: {json.dumps(stand_in)[:600]}")
        return 0
    probed: ProbeResult = probe_device()
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
        report = _bench(folder, seconds, False, None, FAKE_ATTACKS.get(solution.stem, HONEST),
                        both_modes=False)
    line = _summary(report, time.perf_counter() - t0)
    line["refused"] = bool(line["faults"]) and not line["trusted"]  # a typed fault, not a doubt
    _write(out, label, report, line)
    return 0 if line["refused"] else 1


def step_reproduce(out: Path, label: str, folder: Path, seconds: float, runs: int) -> int:
    """A claim of `runs` independent runs (fresh processes each), then its reproduction by as
    many fresh runs: what `ktl publish` claims and `ktl reproduce` measures on a GPU."""
    from verifier.benchmark import RunSet
    from verifier.reproduce import compare_benchmark

    t0 = time.perf_counter()
    each = seconds / (2 * runs)
    claim = RunSet(tuple(_bench(folder, each, False, None, seed=1 + k, both_modes=False)
                         for k in range(runs)), None)
    fresh = RunSet(tuple(_bench(folder, each, False, None, seed=101 + k, both_modes=False)
                         for k in range(runs)), None)
    claimed, measured = claim.to_predicate(), fresh.to_predicate()
    claims = compare_benchmark(claimed, measured)
    res = measured.results[0] if measured.results else None
    line = {"speedup": None if res is None else round(res.speedup, 4),
            "ci95": None if res is None else [round(x, 4) for x in res.speedup_ci95],
            "runs": runs, "claim_trusted": claimed.trusted, "trusted": measured.trusted,
            "faults": [f.kind for f in measured.faults],
            "verdicts": [c.verdict for c in claims],
            "reason": claims[0].reason[:300] if claims else "no claim to compare: "
            + "; ".join(claimed.notes[:2])[:300], "seconds": round(time.perf_counter() - t0, 1)}
    (out / f"{label}.json").write_text(json.dumps(
        {"summary": line, "claim": claimed.to_json(), "reproduction": measured.to_json()}, indent=1))
    print(f"{label}: {json.dumps(line)}")
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
    label, folder, seconds, runs = a.rest
    return step_reproduce(a.out, label, Path(folder), float(seconds), int(runs))


if __name__ == "__main__":
    sys.exit(main())
