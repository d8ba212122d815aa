"""The device room on a fake device: outside-the-process timing, escaping work, the
physical floor, conditions and the device record (every figure injected, none timed)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attest import ValidationError
from attest.predicates import BenchmarkPredicate, DeviceConditions
from verifier.device import (
    Behaviour,
    FakeDevice,
    FakeSide,
    OpCost,
    Peaks,
    Sample,
    ThreadWatch,
    TimingPlan,
    below_floor,
    device_diff,
    floor_of,
    measure,
    parse_probe,
    record,
    summarize,
    throttle_names,
)

PLAN = TimingPlan(batch=8, reps=12, cold=False)


def _draw(rep: int, call: int) -> list[np.ndarray]:
    return [np.full(16, rep * 100.0 + call)]


def _agree(a, b) -> bool:
    return len(a) == len(b) and all(np.allclose(x, y, equal_nan=False) for x, y in zip(a, b, strict=True))


BASELINE = Behaviour(kernel_ns=10_000.0)


def _run(kernel: Behaviour, baseline: Behaviour = BASELINE,
         plan: TimingPlan = PLAN, samples=None):
    dev = FakeDevice() if samples is None else FakeDevice(samples=samples)
    cand, base = FakeSide(dev, kernel, 1), FakeSide(dev, baseline, 2)
    timing = measure(cand, base, dev, _draw, _agree, plan, np.random.default_rng(0), dev.clock)
    return timing, cand, dev


def _kinds(timing) -> list[str]:
    return [k for k, _ in timing.faults]


def test_honest_kernel_figures_are_its_device_time_with_the_overhead_subtracted() -> None:
    timing, cand, _ = _run(Behaviour(kernel_ns=5_000.0))
    assert timing.kernel.per_call_ns == [5_000.0] * PLAN.reps
    assert timing.baseline.per_call_ns == [10_000.0] * PLAN.reps
    assert not timing.wrong and not timing.faults and timing.checked == 2 * PLAN.reps
    assert timing.timer == "events-checked"
    assert cand.allocations == PLAN.batch  # buffers allocated once per shape, restaged after


def test_cold_mode_flushes_are_measured_in_the_empty_batches_and_subtracted() -> None:
    """Both processes flush the same bytes (twice the probed L2) with the same code."""
    cold = dataclasses.replace(PLAN, cold=True)
    timing, _, _ = _run(Behaviour(kernel_ns=5_000.0, flush_ns=50_000.0),
                        Behaviour(kernel_ns=10_000.0, flush_ns=50_000.0), plan=cold)
    assert timing.kernel.per_call_ns == [5_000.0] * PLAN.reps


def test_a_patched_event_timer_gains_nothing_and_is_named() -> None:
    timing, _, _ = _run(Behaviour(kernel_ns=5_000.0, events_scale=0.1))
    assert timing.kernel.per_call_ns == [5_000.0] * PLAN.reps
    assert _kinds(timing) == ["timer_disagrees"] and timing.timer == "outside"
    assert timing.kernel.events_ns == []  # not kept for the distribution either


def test_without_events_the_outside_clock_alone_sets_the_figures() -> None:
    timing, _, _ = _run(Behaviour(kernel_ns=5_000.0, events_scale=None))
    assert timing.timer == "outside" and not timing.faults
    assert timing.kernel.per_call_ns == [5_000.0] * PLAN.reps


def test_a_side_stream_whose_fetch_waits_is_charged_and_named_late_work() -> None:
    """A patched torch.cuda.synchronize: the batch answers with 90 % of its work still
    running; the fetch waits for it, so the parent's clock still sees it."""
    timing, _, _ = _run(Behaviour(kernel_ns=20_000.0, late_share=0.9))
    assert "late_work" in _kinds(timing)
    assert min(timing.kernel.per_call_ns) >= 20_000.0  # the hidden 90 % is charged back
    assert not timing.wrong


def test_a_side_stream_whose_fetch_does_not_wait_reads_wrong_outputs() -> None:
    timing, _, _ = _run(Behaviour(kernel_ns=20_000.0, late_share=0.9, fetch_waits=False))
    assert len(timing.wrong) == timing.checked


@pytest.mark.parametrize("cache", ["buffer", "warmup"])
def test_cached_answers_fail_the_output_checks(cache: str) -> None:
    """A cache keyed on the buffer (like data_ptr) answers the first inputs staged there;
    one replayed after warm-up answers the first call's. Inputs change every batch."""
    timing, _, _ = _run(Behaviour(kernel_ns=1_000.0, cache=cache))  # type: ignore[arg-type]
    assert timing.wrong and len(timing.wrong) >= timing.checked - 2


def test_noise_does_not_make_an_honest_kernel_late_or_a_liar() -> None:
    timing, _, _ = _run(Behaviour(kernel_ns=5_000.0, jitter=0.01),
                        Behaviour(kernel_ns=10_000.0, jitter=0.01))
    assert not timing.faults and not timing.wrong


def test_a_busy_machines_fetch_spikes_do_not_make_an_honest_kernel_late() -> None:
    """What an honest torch module on a loaded CPU met: every fetch, the baseline's too, now
    and then waits milliseconds for the scheduler. The candidate's are no slower than the
    slowest of the baseline's, so nothing is late (a median over the baseline's fetches
    called this honest kernel late_work)."""
    spikes = (0.0, 900_000.0, 0.0, 1_200_000.0, 600_000.0, 0.0)
    timing, _, _ = _run(Behaviour(kernel_ns=5_000.0, fetch_spikes_ns=spikes[1:] + spikes[:1]),
                        Behaviour(kernel_ns=10_000.0, fetch_spikes_ns=spikes))
    assert "late_work" not in _kinds(timing)
    # while a side stream's late work, beyond every spike the baseline met, still is
    timing, _, _ = _run(Behaviour(kernel_ns=400_000.0, late_share=0.9, fetch_spikes_ns=spikes),
                        Behaviour(kernel_ns=10_000.0, fetch_spikes_ns=spikes))
    assert "late_work" in _kinds(timing)


def test_stalls_in_half_of_an_honest_kernels_fetches_are_not_an_accusation() -> None:
    """What an honest torch module met on a starved machine: 7 of its 12 fetches stalled 3 ms
    (past every baseline fetch, 6 of which stalled 1 ms), so the median repetition's excess
    passed the late-work share. A rank test finds its fetches not slower throughout: charged,
    not trusted (`late_unproven`), but no `late_work` fault, which would refute its claim."""
    mine = (3e6, 0.0, 3e6, 0.0, 3e6, 3e6, 0.0, 3e6, 0.0, 3e6, 0.0, 3e6)
    theirs = (1e6, 0.0, 0.0, 1e6, 0.0, 1e6, 1e6, 0.0, 1e6, 0.0, 1e6, 0.0)
    timing, _, _ = _run(Behaviour(kernel_ns=5_000.0, fetch_spikes_ns=mine),
                        Behaviour(kernel_ns=10_000.0, fetch_spikes_ns=theirs))
    assert "late_work" not in _kinds(timing)
    assert timing.late_unproven is not None
    assert timing.late_ns > 0  # the stalls past the baseline's slowest are still charged
    from verifier.benchmark._device_bench import _faults
    from verifier.benchmark._report import Findings

    notes = Findings()
    _faults("{x=1}", {"x": 1}, timing, notes)
    assert [c.kind for c in notes.caveats] == ["late_unproven"] and not notes.faults


def test_late_work_in_every_fetch_is_proven_by_the_rank_test() -> None:
    """The attack the rank test must not let through: a side stream whose work every fetch
    waits for, on the same starved machine (the baseline stalls as above)."""
    theirs = (1e6, 0.0, 0.0, 1e6, 0.0, 1e6, 1e6, 0.0, 1e6, 0.0, 1e6, 0.0)
    timing, _, _ = _run(Behaviour(kernel_ns=400_000.0, late_share=0.9, fetch_spikes_ns=theirs),
                        Behaviour(kernel_ns=10_000.0, fetch_spikes_ns=theirs))
    assert "late_work" in _kinds(timing) and timing.late_unproven is None


def test_an_honest_kernel_delayed_by_a_busy_cpu_in_every_fetch_is_not_accused() -> None:
    """What an honest torch module met in a full test run with a second process keeping one
    core busy (`make test-loop`): each of its 8 fetches was slower than all 8 of the
    baseline's, by about 1.2 ms (rank test p = 8e-05), because its process waited for the
    CPU it shares. The OS accounts those waits: judged without them its fetches are no
    slower, so the excess is charged and not trusted (`late_unproven`), never `late_work`."""
    plan = dataclasses.replace(PLAN, reps=8)
    timing, _, _ = _run(Behaviour(kernel_ns=5_000.0, fetch_waited_ns=(1.2e6, 1.1e6, 1.3e6)),
                        plan=plan)
    assert "late_work" not in _kinds(timing)
    assert timing.late_unproven is not None
    # judged without the accounted waits, its fetches are the baseline's
    assert max(timing.kernel.fetch_busy_ns) <= max(timing.baseline.fetch_busy_ns)
    assert timing.late_ns >= 8 * 1.1e6  # the raw excess is still charged to the candidate
    assert min(timing.kernel.fetch_ns) > max(timing.baseline.fetch_ns)  # slower throughout


def test_late_work_on_a_host_thread_cannot_pass_as_a_busy_cpu() -> None:
    """The attacker's way past that rule: late work on a host thread of its own, on its one
    CPU, makes its main thread wait on the run queue as long as the work runs, so the OS
    accounts it as waiting. That thread's CPU time is the side's, and the figure judged is
    never below it: still `late_work`, on a machine busy for both sides too."""
    busy = (0.0, 300_000.0, 0.0, 500_000.0)
    timing, _, _ = _run(Behaviour(kernel_ns=400_000.0, late_share=0.9, late_on_cpu=True,
                                  fetch_waited_ns=busy),
                        Behaviour(kernel_ns=10_000.0, fetch_waited_ns=busy))
    assert "late_work" in _kinds(timing) and timing.late_unproven is None
    # the hidden 90 % is charged back, less the baseline's slowest fetch (its noise)
    assert min(timing.kernel.per_call_ns) >= 400_000.0 - max(busy) / PLAN.batch - 1.0


def test_an_honest_batch_well_above_the_overheads_noise_is_resolved() -> None:
    timing, _, _ = _run(Behaviour(kernel_ns=5_000.0, jitter=0.01),
                        Behaviour(kernel_ns=10_000.0, jitter=0.01))
    assert timing.unresolved is None


def test_work_within_the_empty_batches_noise_is_too_short_to_judge() -> None:
    """The noticed case: an honest kernel whose batch's work (8 calls of 200 ns) is lost in
    the noise of a 40 us round trip (20 % jitter): the per-call estimate is an artefact,
    so the timing says so instead of handing 0 ns to the floor."""
    plan = TimingPlan(batch=8, reps=40, cold=False, empty_every=2)
    timing, _, _ = _run(Behaviour(kernel_ns=200.0, launch_ns=0.0, jitter=0.2),
                        Behaviour(kernel_ns=200.0, launch_ns=0.0, jitter=0.2), plan)
    assert timing.unresolved is not None and "too short to judge" in timing.unresolved
    assert "candidate" in timing.unresolved or "baseline" in timing.unresolved


def _judged(timing, plan: TimingPlan, cost: OpCost):
    """`_device_bench._judge` on an injected timing; (result, findings)."""
    from verifier.benchmark._device_bench import DeviceBenchSettings, _judge, _Mode
    from verifier.benchmark._report import Findings

    notes = Findings()
    result = _judge({"N": 1}, _Mode(plan.cold, plan, timing), cost, FakeDevice(),
                    np.random.default_rng(0), DeviceBenchSettings(), notes)
    return result, notes


def test_an_unresolved_shape_is_a_caveat_not_an_impossible_kernel_nor_a_figure() -> None:
    plan = TimingPlan(batch=8, reps=40, cold=False, empty_every=2)
    timing, _, _ = _run(Behaviour(kernel_ns=200.0, launch_ns=0.0, jitter=0.2),
                        Behaviour(kernel_ns=200.0, launch_ns=0.0, jitter=0.2), plan)
    cost = OpCost(flops=None, nbytes=4e6)  # 4 MB a call: a floor of ~0.7 us
    result, notes = _judged(timing, plan, cost)
    assert result is None and not notes.faults
    assert [c.kind for c in notes.caveats] == ["below_resolution"]


def test_an_unresolved_shape_whose_whole_batches_beat_the_floor_is_impossible() -> None:
    """The attacker's way round: stay below resolution to dodge the floor. Each batch's
    whole time divided by its calls (the overhead kept) is never below the call's own
    time, so when even that beats the floor the shape is refused as impossible."""
    plan = TimingPlan(batch=8, reps=40, cold=False, empty_every=2)
    timing, _, _ = _run(Behaviour(kernel_ns=200.0, launch_ns=0.0, jitter=0.2),
                        Behaviour(kernel_ns=200.0, launch_ns=0.0, jitter=0.2), plan)
    assert timing.unresolved is not None
    result, notes = _judged(timing, plan, OpCost(flops=None, nbytes=4e9))
    assert result is None and [f.kind for f in notes.faults] == ["roofline"]


def test_a_resolved_time_below_the_floor_is_still_refused_as_impossible() -> None:
    """The attacker's side of the guard: a kernel whose resolved batches are faster than the
    device can move its bytes is refused by the floor, not excused as too short."""
    timing, _, _ = _run(Behaviour(kernel_ns=5_000.0), Behaviour(kernel_ns=10_000.0))
    assert timing.unresolved is None
    result, notes = _judged(timing, PLAN, OpCost(flops=None, nbytes=4e9))
    assert result is None and [f.kind for f in notes.faults] == ["roofline"]
    assert not notes.caveats


def test_a_timing_plan_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        TimingPlan(batch=0, reps=10, cold=False)
    with pytest.raises(ValueError):
        TimingPlan(batch=4, reps=1, cold=False)
    with pytest.raises(ValueError):
        TimingPlan(batch=4, reps=10, cold=False, least_reps=11)
    with pytest.raises(ValueError):
        TimingPlan(batch=4, reps=10, cold=False, budget_ns=0.0)


def test_repetitions_stop_when_the_time_budget_is_spent() -> None:
    """The plan's repetitions are an upper bound: on the H200 the per-repetition cost of
    drawing, staging and checking fresh inputs made 400 planned repetitions overrun a 20 s
    budget fourfold. On the fake clock a repetition costs about 0.4 ms (two batches of
    8 x 10 us, their empties and fetches): a budget of 5 ms stops after about a dozen."""
    plan = TimingPlan(batch=8, reps=40, cold=False, budget_ns=5e6, least_reps=3)
    timing, _, _ = _run(Behaviour(kernel_ns=10_000.0), plan=plan)
    done = len(timing.kernel.per_call_ns)
    assert 3 < done < 40 and len(timing.baseline.per_call_ns) == done
    assert any(f"{done} of 40 planned repetitions" in n for n in timing.notes)
    # the same plan without a budget runs them all, and says nothing of a budget
    full, _, _ = _run(Behaviour(kernel_ns=10_000.0), plan=dataclasses.replace(
        plan, budget_ns=float("inf")))
    assert len(full.kernel.per_call_ns) == 40
    assert not any("time budget" in n for n in full.notes)
    # however slow the repetitions, at least least_reps are measured
    slow = TimingPlan(batch=8, reps=40, cold=False, budget_ns=1.0, least_reps=3)
    assert len(_run(Behaviour(kernel_ns=10_000.0), plan=slow)[0].kernel.per_call_ns) == 3


# -- the physical floor ----------------------------------------------------------------------

PEAKS = Peaks(1e15, 4e12, "injected")


def test_a_time_below_the_floor_is_impossible() -> None:
    cost = OpCost(flops=None, nbytes=4e9)  # 4 GB at 1.5 x 4 TB/s: at least 0.667 ms
    floor = floor_of(cost, PEAKS, batch_bytes=4e9, l2_bytes=50 * 2**20, cold=False)
    assert floor.ns == pytest.approx(4e9 / 6e12 * 1e9)
    assert "impossible" in (below_floor([1_000.0, 2_000.0], floor, "softmax") or "")
    assert below_floor([700_000.0], floor, "softmax") is None


def test_the_floor_takes_the_larger_of_compute_and_bandwidth() -> None:
    cost = OpCost(flops=2 * 8192.0**3, nbytes=3 * 4 * 8192.0**2)
    floor = floor_of(cost, PEAKS, batch_bytes=1e12, l2_bytes=0, cold=True)
    assert floor.ns == pytest.approx(2 * 8192.0**3 / 1.5e15 * 1e9)
    assert "FLOP" in floor.why


def test_data_resident_in_l2_drops_the_bandwidth_term_and_says_so() -> None:
    cost = OpCost(flops=None, nbytes=4096)
    hot = floor_of(cost, PEAKS, batch_bytes=64 * 4096, l2_bytes=50 * 2**20, cold=False)
    assert hot.ns == 0.0 and below_floor([0.0], hot, "x") is None
    cold = floor_of(cost, PEAKS, batch_bytes=64 * 4096, l2_bytes=50 * 2**20, cold=True)
    assert cold.ns > 0


def test_peaks_and_costs_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        Peaks(0.0, 1.0, "x")
    with pytest.raises(ValueError):
        OpCost(flops=-1.0, nbytes=1.0)


# -- conditions ------------------------------------------------------------------------------

STEADY = Sample(1980.0, 3201.0, 400.0, 50.0, 0x1)


def test_throttle_bits_become_typed_reasons_and_benign_bits_do_not() -> None:
    assert throttle_names(0x1 | 0x2 | 0x100) == frozenset()
    assert throttle_names(0x4 | 0x40) == {"sw_power_cap", "hw_thermal"}


def test_steady_conditions_have_no_reason_not_to_trust() -> None:
    cond = summarize([STEADY, STEADY])
    assert cond.throttle == () and cond.samples == 2 and cond.power_max_w == 400.0


def test_a_throttle_during_the_run_is_recorded_from_the_samples() -> None:
    hot = dataclasses.replace(STEADY, throttle_bits=0x20, temperature_c=88.0)
    timing, _, _ = _run(Behaviour(kernel_ns=5_000.0), samples=[STEADY, STEADY, hot, STEADY])
    cond = summarize(timing.samples)
    assert cond.throttle == ("sw_thermal",) and cond.temperature_max_c == 88.0
    assert len(timing.samples) == 2 + PLAN.reps // PLAN.sample_every


def test_clocks_moving_and_missing_samples_are_reasons_too() -> None:
    slow = dataclasses.replace(STEADY, sm_clock_mhz=1500.0)
    assert summarize([STEADY, slow]).throttle == ("clocks_varied",)
    assert summarize([]).throttle == ("unreadable",)


def test_a_trusted_benchmark_body_cannot_carry_a_throttled_device() -> None:
    from attest.examples import benchmark

    body = benchmark()
    body["trusted"] = True
    body["device_conditions"] = summarize([dataclasses.replace(STEADY, throttle_bits=0x4)]).to_json()
    with pytest.raises(ValidationError, match="throttled"):
        BenchmarkPredicate.from_json(body)
    body["trusted"] = False
    assert BenchmarkPredicate.from_json(body).device_conditions is not None


def test_device_conditions_refuse_inverted_clocks() -> None:
    with pytest.raises(ValidationError):
        DeviceConditions(samples=1, sm_clock_min_mhz=2.0, sm_clock_max_mhz=1.0,
                         mem_clock_min_mhz=0.0, mem_clock_max_mhz=0.0, power_max_w=0.0,
                         temperature_max_c=0.0, throttle=())


# -- the record and the comparison -------------------------------------------------------------


def test_the_record_names_the_device_and_another_model_is_a_hardware_difference() -> None:
    dev = FakeDevice()
    here = record(dev.info(), STEADY, PEAKS, "torch-eager", "outside", False)
    assert here.sm_count == 132 and here.driver == "580.159.04" and here.cuda == "13.0"
    other = dict(here.to_json(), model="NVIDIA H100 80GB HBM3", sm_count=132, driver="570.1")
    diff = device_diff(other, here)
    assert [(d.field, d.hardware) for d in diff] == [("device.model", True),
                                                      ("device.driver", False)]
    assert device_diff(here, here) == []
    assert device_diff(None, here)[0].hardware


def test_the_probe_answer_is_parsed_strictly() -> None:
    good = ('{"model": "NVIDIA H200", "capability": "9.0", "sm_count": 132, "l2_bytes": 52428800,'
            ' "memory_bytes": 150000000000, "cuda": "13.0", "torch": "2.11.0", "flops": 7e14,'
            ' "bytes_per_s": 4e12}')
    got = parse_probe(0, "noise\n" + good + "\n")
    assert got.error is None and got.peaks is not None and got.info["sm_count"] == 132
    assert parse_probe(0, '{"error": "torch sees no CUDA device"}').error == "torch sees no CUDA device"
    assert parse_probe(1, "").error is not None
    assert "malformed" in (parse_probe(0, '{"model": "x"}').error or "")
    assert parse_probe(0, good.replace("7e14", "0")).error is not None


# -- claimed times and reproductions -----------------------------------------------------------


def _device_body(peak_flops: float, model: str = "Fake H200") -> dict:
    from attest.examples import benchmark

    body = benchmark()
    rec = record(FakeDevice().info(), STEADY, Peaks(peak_flops, 4e12, "x"), "torch-eager",
                 "outside", False)
    body["device"] = dict(rec.to_json(), model=model)
    return body


def test_a_claimed_time_below_the_recorded_devices_floor_is_refused() -> None:
    """64^3 matmul (524288 FLOP) claimed in 1000 ns: fine at 1 TFLOP/s, impossible at 0.1."""
    assert BenchmarkPredicate.from_json(_device_body(1e12)).device is not None
    with pytest.raises(ValidationError, match="physical floor"):
        BenchmarkPredicate.from_json(_device_body(1e11))


def test_a_reproduction_on_another_gpu_model_names_the_device_difference() -> None:
    from verifier.reproduce import compare_benchmark

    claimed = BenchmarkPredicate.from_json(_device_body(1e12, "NVIDIA H100 80GB HBM3"))
    here = BenchmarkPredicate.from_json(_device_body(1e12))
    claims = compare_benchmark(claimed, here)
    diff = claims[0].environment_diff or ()
    assert ("device.model", True) in [(d.field, d.hardware) for d in diff]
    assert not compare_benchmark(here, here)[0].environment_diff


def test_the_gpu_check_script_runs_what_the_docs_say_within_eight_minutes() -> None:
    """benchmarks/gpu_check.sh names existing folders and attackers, and its deadline plus
    the longest step's limit stays under 8 minutes."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    script = (root / "benchmarks" / "gpu_check.sh").read_text()
    deadline = int(re.search(r"^DEADLINE=(\d+)$", script, re.M).group(1))  # type: ignore[union-attr]
    assert deadline + 15 <= 480
    for path in re.findall(r"(examples/[a-z0-9-]+|tests/[a-z_]+/[a-z_]+\.py)", script):
        assert (root / path).exists(), path
    readme = (root / "docs" / "gpu.md").read_text()
    for name in ("examples/triton-rmsnorm", "examples/triton-bias-gelu", "examples/cuda-softmax",
                 "data_ptr", "under 8 minutes"):
        assert name in readme
    for step in ("triton_rmsnorm_cold", "attack_sidestream", "attack_eventpatch",
                 "attack_ptrcache", "reproduce_triton_rmsnorm"):
        assert step in script


def test_events_somewhat_apart_are_dropped_with_a_note_not_called_a_moved_timer() -> None:
    """Launch gaps make honest events differ from the outside clock a little: 30 % off is
    dropped for the distribution, not a fault; 10x off is a moved timer."""
    timing, _, _ = _run(Behaviour(kernel_ns=5_000.0, events_scale=0.7))
    assert not timing.faults and timing.timer == "outside" and timing.kernel.events_ns == []
    timing, _, _ = _run(Behaviour(kernel_ns=5_000.0, events_scale=10.0))
    assert _kinds(timing) == ["timer_disagrees"]


def test_the_probe_is_measured_once_per_machine_and_recorded(tmp_path) -> None:
    from verifier.device import ProbeResult, cached_probe

    runs = []
    good = ProbeResult(None, {"model": "NVIDIA H200", "capability": "9.0", "sm_count": 132,
                              "l2_bytes": 1, "memory_bytes": 2, "cuda": "13.0", "torch": "2.11"},
                       Peaks(7e14, 4e12, "probe"))

    def run() -> ProbeResult:
        runs.append(1)
        return good

    first = cached_probe(tmp_path, "H200|580", run)
    again = cached_probe(tmp_path, "H200|580", run)
    assert len(runs) == 1 and again.peaks is not None and again.peaks.flops == 7e14
    assert again.info == first.info
    cached_probe(tmp_path, "H100|580", run)  # another GPU or driver: measured again
    assert len(runs) == 2
    (tmp_path / "device-probe.json").write_text("{not json")
    assert cached_probe(tmp_path, "H100|580", run).error is None and len(runs) == 3
    failed = ProbeResult("no device", {}, None)
    assert cached_probe(tmp_path / "x", "k", lambda: failed).error == "no device"
    assert not (tmp_path / "x" / "device-probe.json").exists()


def test_a_throttle_seen_only_while_the_timed_batches_ran_is_not_trusted() -> None:
    # the attacker's device: clocks fine before, between repetitions and after; throttled
    # (power brake, clocks down) only while a timed batch runs
    braked = dataclasses.replace(STEADY, sm_clock_mhz=1100.0, throttle_bits=0x80)
    dev = FakeDevice(samples=[STEADY], during=[braked])
    cand, base = FakeSide(dev, Behaviour(kernel_ns=5_000.0), 1), FakeSide(dev, BASELINE, 2)
    timing = measure(cand, base, dev, _draw, _agree, PLAN, np.random.default_rng(0), dev.clock)
    assert summarize(timing.samples).throttle == ()  # before/between/after alone: fine
    cond = summarize(timing.samples, timing.during, timing.watch_failed)
    assert cond.throttle == ("hw_power_brake", "clocks_varied")
    assert cond.during_throttle == ("hw_power_brake",)  # the clocks moved between the two kinds
    assert cond.sm_clock_min_mhz == 1100.0 and cond.during_samples == len(timing.during) > 0
    # every timed batch of both sides (and their empty batches) was watched
    empties = 2 * sum(PLAN.empty_at(r) for r in range(PLAN.reps))
    assert len(timing.during) == 2 * PLAN.reps + empties
    assert DeviceConditions.from_json(cond.to_json()) == cond


def test_the_watch_keeps_no_more_samples_than_its_cap() -> None:
    dev = FakeDevice()
    cand, base = FakeSide(dev, BASELINE, 1), FakeSide(dev, BASELINE, 2)
    plan = dataclasses.replace(PLAN, watch_cap=5)
    timing = measure(cand, base, dev, _draw, _agree, plan, np.random.default_rng(0), dev.clock)
    assert len(timing.during) == 5 and not timing.watch_failed
    assert summarize(timing.samples, timing.during).throttle == ()
    with pytest.raises(ValueError, match="samples"):
        dataclasses.replace(PLAN, watch_cap=0)


def test_a_watch_that_cannot_read_makes_the_conditions_unreadable() -> None:
    dev = FakeDevice(during=())
    cand, base = FakeSide(dev, BASELINE, 1), FakeSide(dev, BASELINE, 2)
    timing = measure(cand, base, dev, _draw, _agree, PLAN, np.random.default_rng(0), dev.clock)
    cond = summarize(timing.samples, timing.during, timing.watch_failed)
    assert timing.watch_failed and cond.throttle == ("unreadable",)
    assert cond.during_throttle == ("unreadable",) and cond.during_samples == 0


def test_the_thread_watch_reads_while_entered_stops_at_its_cap_and_at_a_failed_read() -> None:
    reads: list[int] = []

    def read() -> Sample:
        reads.append(1)
        if len(reads) > 3:
            raise RuntimeError("NVML went away")
        return STEADY

    watch = ThreadWatch(read, 0.001, 2)
    for _ in range(3):
        with watch:
            pass
    assert watch.samples == [STEADY, STEADY] and not watch.failed
    failing = ThreadWatch(read, 0.001, 100)
    for _ in range(3):
        with failing:
            pass
    assert failing.failed and len(failing.samples) == 1
    with pytest.raises(ValueError):
        ThreadWatch(read, 0.0, 10)


def test_conditions_refuse_mid_batch_reasons_missing_from_the_whole() -> None:
    good = summarize([STEADY], [STEADY]).to_json()
    with pytest.raises(ValidationError, match="during_throttle"):
        DeviceConditions.from_json({**good, "during_throttle": ["hw_slowdown"]})
    with pytest.raises(ValidationError, match="during_samples"):
        DeviceConditions.from_json({**good, "during_samples": good["samples"] + 1})


def test_the_runs_of_a_claim_keep_the_worst_conditions_of_any_run() -> None:
    from verifier.device import combine

    hot = dataclasses.replace(STEADY, sm_clock_mhz=1500.0, throttle_bits=0x40, temperature_c=90.0)
    calm, braked = summarize([STEADY], [STEADY]), summarize([STEADY], [hot])
    both = combine([calm, braked])
    assert both is not None and both.samples == calm.samples + braked.samples
    assert both.throttle == braked.throttle and both.during_throttle == ("hw_thermal",)
    assert both.sm_clock_min_mhz == 1500.0 and both.temperature_max_c == 90.0
    assert both.during_samples == 2 and combine([]) is None


# -- issue 44: the device attacks refused with typed faults, the calibration and the budget --


def test_work_left_on_a_side_stream_is_refused_as_side_stream_not_merely_charged() -> None:
    """tests/gpu_attackers/sidestream.py on the fake device: the batch's own stream is done
    while 90 % of the work still runs on another; the device-wide synchronise (bound before
    the module loaded) waits for it, so it is timed, and the wait is a typed fault."""
    timing, _, _ = _run(Behaviour(kernel_ns=20_000.0, side_share=0.9))
    assert _kinds(timing) == ["side_stream"]
    assert min(timing.kernel.per_call_ns) >= 20_000.0  # timed in full
    # an honest kernel on the stream it is given: no gap, no fault
    honest, _, _ = _run(Behaviour(kernel_ns=20_000.0))
    assert not honest.faults


def test_a_candidate_slowing_its_own_empty_batches_has_no_more_subtracted_than_the_baseline() -> None:
    """The calibration runs in the candidate's process: 50 us extra per empty call would
    have been subtracted from every call (a 5 us kernel timed as 0). It is capped at the
    baseline's own."""
    timing, _, _ = _run(Behaviour(kernel_ns=5_000.0, empty_extra_ns=50_000.0))
    assert timing.kernel.per_call_ns == [5_000.0] * PLAN.reps
    from verifier.device import calibration

    assert calibration([9.0, 10.0, 11.0], [4.0, 5.0, 6.0]) == 5.0
    assert calibration([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == 2.0


def test_work_done_while_inputs_are_staged_is_charged_back() -> None:
    """A hook on the staging copy computes the answers ahead of the timed batch: the
    staging command's excess over the baseline's slowest is charged to the candidate."""
    timing, _, _ = _run(Behaviour(kernel_ns=20_000.0, stage_share=0.8))
    assert min(timing.kernel.per_call_ns) >= 20_000.0
    assert timing.late_ns > 0


@pytest.mark.parametrize("stale", ["previous", "zeros"])
def test_a_previous_calls_memory_or_a_zeroed_output_fails_the_output_checks(stale: str) -> None:
    """`torch.empty` handing back the previous call's output every other call, and an
    output left zeroed: the calls compared in full (picked after each batch answered) differ
    from the baseline's, since every call's inputs are its own."""
    timing, _, _ = _run(Behaviour(kernel_ns=1_000.0, stale=stale))  # type: ignore[arg-type]
    assert timing.wrong
    if stale == "zeros":
        assert len(timing.wrong) == timing.checked


def test_the_parents_own_work_is_kept_off_the_budget_within_a_wall_limit() -> None:
    """Drawing and staging fresh inputs cost the parent 1 ms a call on the fake clock, far
    more than the kernel: they no longer eat the budget (the repetitions run as if they
    were free), but the wall clock stops them at `wall_factor` budgets."""
    dev = FakeDevice()

    def slow_draw(rep: int, call: int) -> list[np.ndarray]:
        dev.advance(1e6)  # the parent drawing (not a device's time)
        return _draw(rep, call)

    plan = TimingPlan(batch=8, reps=40, cold=False, budget_ns=5e6, least_reps=3,
                      wall_factor=100.0)
    cand, base = FakeSide(dev, Behaviour(kernel_ns=10_000.0), 1), FakeSide(dev, BASELINE, 2)
    timing = measure(cand, base, dev, slow_draw, _agree, plan, np.random.default_rng(0), dev.clock)
    free, _, _ = _run(Behaviour(kernel_ns=10_000.0), plan=plan)
    assert len(timing.kernel.per_call_ns) == len(free.kernel.per_call_ns) < 40
    tight = dataclasses.replace(plan, wall_factor=3.0)
    dev2 = FakeDevice()

    def slow_draw2(rep: int, call: int) -> list[np.ndarray]:
        dev2.advance(1e6)
        return _draw(rep, call)

    walled = measure(FakeSide(dev2, Behaviour(kernel_ns=10_000.0), 1), FakeSide(dev2, BASELINE, 2),
                     dev2, slow_draw2, _agree, tight, np.random.default_rng(0), dev2.clock)
    assert 3 <= len(walled.kernel.per_call_ns) < len(timing.kernel.per_call_ns)


def test_the_cold_flush_is_twice_the_l2_the_device_reports() -> None:
    from verifier.benchmark._device_bench import flush_bytes

    info = FakeDevice().info()
    assert flush_bytes(info) == 2 * info.l2_bytes == 100 * 2**20
    assert flush_bytes(dataclasses.replace(info, l2_bytes=0)) == 2  # never an empty flush


def test_a_device_record_keeps_both_modes_once_each() -> None:
    from attest.predicates import DeviceMode, DeviceRecord

    rec = record(FakeDevice().info(), FakeDevice().sample(), PEAKS, "torch-eager", "outside", False)
    warm = DeviceMode(shape={"N": 1}, cold=False, n=10, median_ns=100.0, baseline_median_ns=200.0,
                      speedup=2.0, speedup_ci95=(1.9, 2.1))
    cold = dataclasses.replace(warm, cold=True, median_ns=200.0, speedup=1.0, speedup_ci95=(0.9, 1.1))
    both = dataclasses.replace(rec, modes=(warm, cold))
    assert DeviceRecord.from_json(both.to_json()) == both
    with pytest.raises(ValidationError, match="each shape and mode at most once"):
        DeviceRecord.from_json(dataclasses.replace(rec, modes=(warm, warm)).to_json())
    with pytest.raises(ValidationError, match="medians give"):
        DeviceRecord.from_json(dataclasses.replace(
            rec, modes=(dataclasses.replace(warm, speedup=3.0, speedup_ci95=(2.9, 3.1)),)).to_json())
    assert DeviceRecord.from_json(rec.to_json()).modes is None  # entries from before: absent


def test_the_childs_synchronise_is_bound_before_the_module_loads_and_measures_the_gap() -> None:
    """tests/gpu_attackers/sidestream.py makes `torch.cuda.synchronize` a no-op when its
    module loads; the child's loop binds the real one first, so the batch still waits for
    the side stream, and the wait after the default stream finished is its stream gap."""
    from types import SimpleNamespace

    from verifier.worker._torch_child import _DeviceSync

    clock = [0]
    log: list[str] = []

    def device_sync() -> None:
        clock[0] += 700  # the side stream's work still running
        log.append("device")

    class Stream:
        def synchronize(self) -> None:
            clock[0] += 100
            log.append("stream")

    cuda = SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True,
                           synchronize=device_sync, default_stream=Stream, Stream=Stream)
    sync = _DeviceSync(SimpleNamespace(cuda=cuda))
    sync.clock = lambda: clock[0]
    cuda.synchronize = lambda device=None: None  # the attacker's patch, after binding
    Stream.synchronize = lambda self: None  # type: ignore[method-assign]
    assert sync.batch() == 700 and log == ["stream", "device"]
    sync.all()
    assert log[-1] == "device"
    # on a CPU (no CUDA) there is no gap to measure and nothing to synchronise
    cpu = _DeviceSync(SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: False)))
    assert cpu.batch() is None
    cpu.all()


@pytest.mark.parametrize(("gap", "ok"), [(1234, True), (None, True), (float("nan"), False),
                                         (-1.0, False), (True, False), ("5", False)])
def test_a_runs_stream_gap_is_parsed_strictly(gap: object, ok: bool) -> None:
    from types import SimpleNamespace

    from verifier.benchmark._device_sides import TorchSide
    from verifier.worker import BadAnswer

    answer = {} if gap is None else {"stream_gap_ns": gap}
    child = SimpleNamespace(request=lambda body, timeout: (0, answer))
    side = TorchSide(SimpleNamespace(), child, SimpleNamespace(), "cuda", 2, False)  # type: ignore[arg-type]
    if ok:
        assert side.run(4, False).stream_gap_ns == (None if gap is None else 1234.0)
    else:
        with pytest.raises(BadAnswer):
            side.run(4, False)


def test_the_other_l2_modes_unresolved_batches_are_a_note_not_a_doubt_of_the_results() -> None:
    """Both modes are timed; the one asked for gives the results. Where the other cannot be
    resolved it has no figure and says so, without making the results untrusted; where it
    is the one asked for, it is the usual caveat."""
    from verifier.benchmark._device_bench import DeviceBenchSettings, _judge, _Mode
    from verifier.benchmark._report import Findings

    plan = TimingPlan(batch=8, reps=40, cold=True, empty_every=2)
    timing, _, _ = _run(Behaviour(kernel_ns=200.0, launch_ns=0.0, jitter=0.2),
                        Behaviour(kernel_ns=200.0, launch_ns=0.0, jitter=0.2), plan)
    assert timing.unresolved is not None
    for primary in (True, False):
        notes = Findings()
        result = _judge({"N": 1}, _Mode(True, plan, timing, primary), OpCost(None, 4e6),
                        FakeDevice(), np.random.default_rng(0), DeviceBenchSettings(), notes)
        assert result is None and not notes.faults
        assert [c.kind for c in notes.caveats] == (["below_resolution"] if primary else [])
        assert primary or any("no figure in this mode" in n for n in notes.notes)
