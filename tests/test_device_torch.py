"""The device path on torch's CPU build (device "cpu", `HostDevice`): the same staging,
batches, fetches and judging a GPU gets, with real sandboxed torch processes and the
attacker kernels of tests/torch_flawed. Nothing here asserts a timing beyond a 50 ms
sleep against a microsecond op. Each test starts two sandboxed Pythons with torch, so all
but the honest one are marked slow (tests/test_device.py covers every attack on the fake
device in the fast suite)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is installed by `make test`")

from attest.predicates import BenchmarkPredicate
from tests.test_torch_check import torch_folder
from verifier.benchmark import machine_peaks
from verifier.benchmark._device_bench import DeviceBenchSettings, device_bench
from verifier.device import HostDevice, Peaks
from verifier.environment import library_version
from verifier.kernel import KernelSpec

QUICK = DeviceBenchSettings(device="cpu", time_budget_s=1.0, min_reps=4, max_reps=8,
                            min_batch_ns=2e7, max_batch=4096, both_modes=False)
"""Batches of about 20 ms of work: tiny torch modules on the CPU resolve well above the
noise of the empty batches' round trip (`below_resolution` otherwise). One L2 mode (the
honest test times both)."""
ATTACK = DeviceBenchSettings(device="cpu", time_budget_s=1.0, min_reps=4, max_reps=8,
                             min_batch_ns=2e6, max_batch=16, both_modes=False)
"""Short batches, where a deferred call's work is a large share of its batch (faults are
judged whether or not the batches resolve)."""


def _host(peaks: Peaks | None = None) -> HostDevice:
    if peaks is None:
        flops, bw = machine_peaks()
        peaks = Peaks(flops, bw, "machine_peaks")
    return HostDevice(peaks, "test cpu", library_version("torch") or "unknown")


def _bench(tmp: Path, solution: str, settings: DeviceBenchSettings = QUICK,
           peaks: Peaks | None = None):  # type: ignore[no-untyped-def]
    return device_bench(KernelSpec.load(torch_folder(tmp, solution)), settings, _host(peaks),
                        seed=3)


@pytest.mark.slow  # 7-11 s, among make test's longest: CI's slow step runs it
def test_honest_solution_on_the_device_path_names_its_device_and_validates(tmp_path: Path) -> None:
    import dataclasses

    report = _bench(tmp_path, "honest.py", dataclasses.replace(QUICK, both_modes=True))
    assert not report.faults, report.notes
    assert report.results and report.results[0].n == len(report.samples[0]["kernel_ns"])
    body = report.to_predicate()
    assert BenchmarkPredicate.from_json(body.to_json()) == body
    assert body.device is not None and body.device.model == "test cpu"
    assert body.device.baseline.startswith("torch-eager (torch ")
    assert body.device_conditions is not None and body.device_conditions.samples >= 2
    # one buffer per call slot, allocated once for the shape and restaged ever after (the
    # two modes' batches share the slots)
    assert report.samples[0]["allocated"] == max(s["batch"] for s in report.samples)
    # both L2 modes timed in the run and recorded; the results are the warm mode's
    assert [s["cold"] for s in report.samples] == [False, True]
    modes = body.device.modes
    assert modes is not None and {m.cold for m in modes} <= {False, True}
    assert not body.device.cold and (not modes[0].cold if modes else True)


@pytest.mark.slow
def test_a_data_ptr_cache_fails_the_output_checks(tmp_path: Path) -> None:
    report = _bench(tmp_path, "ptrcache.py")
    assert not report.trusted
    assert "outputs_wrong" in {f.kind for f in report.faults}


@pytest.mark.slow
def test_an_impossible_time_is_refused_before_any_statistics(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Peaks injected absurdly low (1 kB/s): any time the batches resolve is below the
    floor, so no result is given at all. The L2 is taken as empty: a torch module's FLOPs
    are unknown, so the floor is its bytes, which do not count for a batch whose data fits
    in L2, and on a loaded machine the plan sizes batches small enough to fit (a CI run's
    slow step got no floor and no fault that way)."""
    import verifier.device._host as host

    monkeypatch.setattr(host, "_l2_bytes", lambda: 0)
    report = _bench(tmp_path, "honest.py", QUICK, Peaks(1e3, 1e3, "injected"))
    assert [f.kind for f in report.faults] == ["roofline"] and not report.results


@pytest.mark.slow
def test_patched_clocks_in_the_kernels_process_gain_nothing(tmp_path: Path) -> None:
    """50 ms of sleep per call against microseconds: a batch of one call, in which the
    baseline's work may not resolve from the round trip's noise; either way no figure
    makes it fast."""
    report = _bench(tmp_path, "timer.py")
    assert not report.trusted
    assert all(r.speedup < 0.1 for r in report.results), report.results
    if not report.results:
        assert [c.kind for c in report.caveats] == ["below_resolution"], report.notes


@pytest.mark.slow
@pytest.mark.parametrize("solution", ["lazy.py", "thread.py"])
def test_lazy_results_and_deferred_threads_are_caught(tmp_path: Path, solution: str) -> None:
    """Exposed (a typed fault), or on a machine too busy for the rank test to prove the
    late fetches, at least not trusted for them (`late_unproven`, the excess charged)."""
    report = _bench(tmp_path, solution, ATTACK)
    assert not report.trusted
    assert {"outputs_wrong", "escaped_work", "late_work"} & {f.kind for f in report.faults} or \
        "late_unproven" in {c.kind for c in report.caveats}, report.notes


def test_triton_on_the_cpu_device_path_is_refused_with_the_reason(tmp_path: Path) -> None:
    from verifier.errors import RuntimeUnavailableError

    with pytest.raises(RuntimeUnavailableError, match="interpreter"):
        device_bench(KernelSpec.load(torch_folder(tmp_path, "honest.py", runtime="triton")),
                     QUICK, _host(Peaks(1e9, 1e9, "x")))


@pytest.mark.slow
def test_a_device_throttled_only_while_its_batches_ran_makes_the_statement_untrusted(
        tmp_path: Path) -> None:
    # real processes (torch's CPU build), a fake device's conditions: steady before, between
    # repetitions and after, power-braked only while a timed batch runs
    from verifier.device import FakeDevice, Sample

    steady = Sample(1980.0, 3201.0, 350.0, 45.0, 0)
    braked = Sample(1100.0, 3201.0, 700.0, 80.0, 0x80)
    report = device_bench(KernelSpec.load(torch_folder(tmp_path, "honest.py")), QUICK,
                          FakeDevice(samples=[steady], during=[braked]), seed=3)
    body = report.to_predicate()
    assert not body.trusted and not report.faults, report.notes
    cond = body.device_conditions
    assert cond is not None and cond.during_samples > 0
    assert "hw_power_brake" in cond.during_throttle and "hw_power_brake" in cond.throttle
    # a loaded machine may add its own caveats (too short, late fetches unproven), never a fault
    kinds = [c.kind for c in body.caveats]
    assert "device_throttled" in kinds and set(kinds) <= {"device_throttled", "below_resolution",
                                                          "late_unproven"}, kinds
    assert BenchmarkPredicate.from_json(body.to_json()) == body


ATTACKERS = Path(__file__).resolve().parent / "gpu_attackers"


@pytest.mark.slow  # two sandboxed torch processes each, on a loaded machine a minute
@pytest.mark.parametrize(("solution", "expected"), [
    ("stale.py", {"outputs_wrong"}), ("zeroed.py", {"outputs_wrong"}),
    ("reuse.py", {"outputs_wrong"}),
    ("otherprocess.py", {"escaped_work", "outputs_wrong", "child_failed"})])
def test_the_device_attackers_that_need_no_cuda_are_refused_on_the_cpu_device_path(
        tmp_path: Path, solution: str, expected: set[str]) -> None:
    """tests/gpu_attackers' kernels that run on any device, through the device path on
    torch's CPU build (gpu_check.sh runs them, and the CUDA ones, on a GPU)."""
    import shutil

    from tests.test_torch_check import MANIFEST

    folder = tmp_path / solution.removesuffix(".py")
    folder.mkdir()
    shutil.copy(ATTACKERS / "reference.py", folder / "reference.py")
    shutil.copy(ATTACKERS / solution, folder / "solution.py")
    (folder / "kernel.toml").write_text(MANIFEST.format(runtime="torch"))
    report = device_bench(KernelSpec.load(folder), ATTACK, _host(), seed=5)
    assert not report.trusted
    assert expected & {f.kind for f in report.faults}, report.notes


def test_floating_inputs_are_drawn_on_the_device_from_the_stats_and_others_on_the_host() -> None:
    """`device_specs`: fresh floating tensors get a device draw like the host's rule (normal,
    half-normal from the minimum, uniform in [0, 1)); integer tensors and plain values are
    staged as drawn once; float64 or whole-number inputs leave the whole run on the host."""
    from verifier.benchmark._device_bench import device_specs
    from verifier.benchmark._torch_pool import FreshInputs, TensorDraw

    def specs(*draws: TensorDraw):  # type: ignore[no-untyped-def]
        return device_specs(FreshInputs(list(draws), np.random.default_rng(0)))

    normal = TensorDraw((4, 8), "float32", {"min": -3.0, "max": 3.0, "mean": 0.5, "std": 2.0})
    half = TensorDraw((4,), "bfloat16", {"min": 0.25, "max": 9.0, "std": 1.5})
    unit = TensorDraw((4,), "float16", {"min": 0.0, "max": 1.0})
    index = TensorDraw((4,), "int64", {"min": 0, "max": 3, "integral": True})
    plain = TensorDraw(None, "int64", {}, 7)
    assert specs(normal, half, unit, index, plain) == [
        [[4, 8], "float32", "normal", 0.5, 2.0], [[4], "bfloat16", "halfnormal", 0.25, 1.5],
        [[4], "float16", "uniform", 0.0, 1.0], None, None]
    assert specs(normal, TensorDraw((4,), "float64", {"min": -1.0, "max": 1.0})) is None
    assert specs(TensorDraw((4,), "float32", {"min": 0.0, "max": 5.0, "integral": True})) is None


def test_the_childs_device_draw_is_the_same_in_both_processes_and_never_repeats() -> None:
    """What each process runs for a seeded stage (torch's CPU build): the same seed gives
    the same bytes in the candidate's and the baseline's process, and every element differs
    from the previous call's, a one-call batch's too (its slot is the same buffer)."""
    import torch

    from verifier.worker._torch_child import _DeviceSync, _Server

    def server() -> _Server:
        return _Server("reference", bytearray(64), type("M", (), {"Model": object}), "Model",
                       _DeviceSync(torch))

    spec = {"g": [[64], "float16", "uniform", 0.0, 1.0]}
    a, b = server(), server()
    for s in (a, b):
        s.stage({"device": "cpu", "seed": 5, "calls": [{"in": [spec]}, {"in": [spec]}]})
    assert all(torch.equal(x[0], y[0]) for x, y in zip(a.staged, b.staged, strict=True))
    assert not torch.any(a.staged[0][0] == a.staged[1][0])
    one = server()
    for seed in (1, 1, 2):  # the same seed again: the draw repeats, the flip does not let it
        before = None if not one.staged else one.staged[0][0].clone()
        one.stage({"device": "cpu", "seed": seed, "calls": [{"in": [spec]}]})
        if before is not None:
            assert not torch.any(one.staged[0][0] == before)
