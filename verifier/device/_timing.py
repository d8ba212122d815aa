"""A shape's batches on a device, timed from outside the kernel's process.

For each repetition both sides (candidate and PyTorch baseline, alternating which goes
first) get the same freshly drawn inputs, distinct per call, staged into their buffers
outside the timed region. The parent's clock then spans one `run` command, which answers
only after a device-wide synchronise; the same clock spans an empty-kernel batch of the
same length, measured in the same run (in the first `empties_first` repetitions and every
`empty_every`-th), whose
median is subtracted. While each batch runs, the device's conditions are read by a watch
(`_watch`: every `watch_every_s`, `watch_cap` samples per shape at most), besides the
samples before, between repetitions and after; `DeviceTiming.during` keeps them. The calls whose outputs are checked are drawn by the parent after
the candidate's batch answered and fetched at once, before the baseline runs (so work
the candidate left running cannot slow the baseline down); the baseline's outputs of the
same calls are fetched after its batch and compared.

Work that escapes the batch loses either way: a fetch that waits for it (a side stream,
a host thread, a lazy result computed on demand) is slower than the slowest of the
baseline's fetches of the same outputs, and the excess is charged to the candidate's
batch (`late_work` when the median repetition's excess is more than `late_share` of its
batch and a one-sided rank test finds the candidate's fetches slower than the baseline's
at `late_alpha`, both judged on the fetches less the run-queue waits the OS accounted to
them, never below the side's CPU time in them; the excess without that evidence is
`late_unproven`, not trusted but no accusation: a busy machine stalls some fetches of
either side, or every fetch of a process that shares a busy CPU); a fetch that does not wait reads unfinished or stale outputs (a cached answer, keyed on pointers or replayed after warm-up), which fail
the comparison (`outputs_wrong`).

In-process CUDA events (the side's `events_ns`) never set the figures. They are compared
only where the batches' work was resolved (against noise they prove nothing), and kept for
the per-call distribution only when their total agrees with the outside clock within
`events_tolerance`; a total more than `events_refuse` times off (either way) means the
kernel's process moved its timers (`timer_disagrees`); in between they are dropped with a
note (launch gaps between calls count in one and not fully in the other). Patching `Event.elapsed_time`, `torch.cuda.synchronize` or `time.*`
in the kernel's process changes neither the parent's clock nor the outputs it reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from attest.predicates import BenchFaultKind
from verifier.device._interface import (
    BatchAnswer,
    Clock,
    Device,
    DeviceSide,
    Inputs,
    Sample,
    Watch,
)
from verifier.device._watch import WATCH_CAP
from verifier.ranks import rank_test_greater
from verifier.worker import busy_ns

__all__ = ["RESOLUTION_MADS", "DeviceTiming", "SideTiming", "TimingPlan", "calibration", "measure"]

RESOLUTION_MADS = 3.0
"""A batch's work must exceed this many median absolute deviations of the empty batches."""

Draw = Callable[[int, int], Inputs]
"""(repetition, call) -> that call's inputs; distinct per call and per repetition."""
Agree = Callable[[Sequence[NDArray[np.float64]], Sequence[NDArray[np.float64]]], bool]
"""Whether the candidate's outputs of one call match the baseline's (within tolerance)."""


@dataclass(frozen=True)
class TimingPlan:
    batch: int
    reps: int
    cold: bool
    """An L2 flush before each call (the caller always says which mode it times)."""
    picks: int = 2
    empty_every: int = 10
    empties_first: int = 3
    """Empty batches in each of the first repetitions too, so the overhead's median and its
    noise rest on at least this many (the first of a process's batches may be its slowest)."""
    sample_every: int = 5
    events_tolerance: float = 0.10
    events_refuse: float = 2.0
    """Events more than this factor away from the parent's clock are a moved timer."""
    late_share: float = 0.05
    late_alpha: float = 0.01
    """A fetch excess is `late_work` only if the candidate's fetches are slower than the
    baseline's by a one-sided rank test at this level (else `late_unproven`)."""
    watch_every_s: float = 0.01
    """Conditions read every this many seconds while a timed batch runs (`_watch`)."""
    watch_cap: int = 2048
    """At most this many samples read during the batches of one shape."""
    budget_ns: float = float("inf")
    """Repetitions stop once this much of the parent's clock is spent in the sides' batches
    and fetches (after `least_reps`). The parent's own work each repetition (drawing,
    staging and comparing fresh inputs) is kept off it: on an H200 it cost 0.23-0.9 s a
    repetition, far more than the kernels, and cut the repetitions to a fifth of the plan."""
    wall_factor: float = 2.0
    """However cheap the budget's share, repetitions stop once the parent's clock has run
    this many budgets in all (the parent's work included)."""
    least_reps: int = 2

    def empty_at(self, rep: int) -> bool:
        """Whether an empty batch precedes repetition `rep`'s timed batch on each side."""
        return rep < self.empties_first or rep % self.empty_every == 0

    def __post_init__(self) -> None:
        if not (1 <= self.batch <= 4096 and 2 <= self.reps <= 100_000 and self.picks >= 1
                and self.empty_every >= 1 and self.empties_first >= 0 and self.sample_every >= 1
                and 0 < self.watch_every_s <= 60 and 1 <= self.watch_cap <= WATCH_CAP
                and 2 <= self.least_reps <= self.reps and self.budget_ns > 0
                and self.wall_factor >= 1):
            raise ValueError(f"a timing plan needs 1..4096 calls per batch, 2..100000 "
                             f"repetitions (at least 2 before a positive budget stops "
                             f"them), positive intervals and 1..{WATCH_CAP} samples "
                             f"watched, got {self}")


@dataclass
class SideTiming:
    """One side's figures: per-call means of batches (overhead subtracted, late work
    charged), the empty batches' totals, the fetches' times and the events offered."""

    per_call_ns: list[float] = field(default_factory=list)
    empty_ns: list[float] = field(default_factory=list)
    fetch_ns: list[float] = field(default_factory=list)
    fetch_busy_ns: list[float] = field(default_factory=list)
    """The fetches less the run-queue waits the OS accounted to them, never below the
    side's CPU time in them (`verifier.worker.busy_ns`): what late work is judged on."""
    run_ns: list[float] = field(default_factory=list)
    stage_ns: list[float] = field(default_factory=list)
    """The staging commands' times (untimed work, but a process that computes while its
    inputs are copied in is charged the excess over the baseline's slowest, as a fetch)."""
    gap_ns: list[float] = field(default_factory=list)
    """Per batch, how long the device-wide synchronise waited after the batch's own stream
    had finished (as the side answered it; empty where not measured)."""
    events_ns: list[float] = field(default_factory=list)
    events_missing: bool = False


@dataclass
class DeviceTiming:
    kernel: SideTiming
    baseline: SideTiming
    wrong: list[str]
    checked: int
    late_ns: float
    samples: list[Sample]
    """Read before the shape, between repetitions (every `sample_every`) and after it."""
    during: list[Sample] = field(default_factory=list)
    """Read while the timed batches ran (`TimingPlan.watch_cap` at most)."""
    watch_failed: bool = False
    """A read during the batches failed (the conditions are partly unreadable)."""
    timer: str = "outside"
    unresolved: str | None = None
    """Why the batches' work could not be told from the empty batches' noise (`_judge_resolution`),
    or None: no per-call figure of this shape means anything then."""
    faults: list[tuple[BenchFaultKind, str]] = field(default_factory=list)
    """(BenchFaultKind, detail) for each fault this shape's timing exposed."""
    late_unproven: str | None = None
    """The fetches' excess was past `late_share` without the rank test's evidence: why this
    shape's figures are not trusted, though no fault is shown (`_judge_late`)."""
    notes: list[str] = field(default_factory=list)


def measure(  # noqa: PLR0913 (two sides, the device and the plan's strategies)
        cand: DeviceSide, base: DeviceSide, device: Device, draw: Draw, agree: Agree,
        plan: TimingPlan, rng: np.random.Generator, clock: Clock) -> DeviceTiming:
    """Time `plan.reps` batches per side (see the module docstring)."""
    k, b = SideTiming(), SideTiming()
    out = DeviceTiming(k, b, [], 0, 0.0, [device.sample()])
    timer = _Timer(clock, device.watch(plan.watch_every_s, plan.watch_cap))
    start = float(clock())
    for rep in range(plan.reps):
        if rep >= plan.least_reps and _spent(out, plan, float(clock()) - start):
            out.notes.append(f"{rep} of {plan.reps} planned repetitions: the time budget "
                             f"({plan.budget_ns / 1e9:.3g} s of batches and fetches, "
                             f"{plan.wall_factor:g}x that in all) was spent")
            break
        calls = [draw(rep, j) for j in range(plan.batch)]
        picks: list[int] = []
        fetched: dict[int, list[list[NDArray[np.float64]]]] = {}
        for side in ((0, 1) if rep % 2 == 0 else (1, 0)):
            proc, into = (cand, k) if side == 0 else (base, b)
            _batch(proc, into, calls, rep, plan, timer)
            if not picks:  # drawn after the first batch answered, the same for both sides
                picks = sorted(int(i) for i in rng.choice(plan.batch, min(plan.picks, plan.batch),
                                                          replace=False))
            t0 = clock()
            got = proc.fetch(picks)
            ns = float(clock() - t0)
            fetched[side] = got.outputs
            into.fetch_ns.append(ns)
            into.fetch_busy_ns.append(busy_ns(ns, got.waited_ns, got.cpu_ns))
        _charge(out, plan)
        _compare(out, picks, fetched, agree, rep, plan.batch)
        if (rep + 1) % plan.sample_every == 0:
            out.samples.append(device.sample())
    out.samples.append(device.sample())
    out.during, out.watch_failed = list(timer.watch.samples), timer.watch.failed
    out.unresolved = _judge_resolution(out)
    _judge_late(out, plan)
    _judge_streams(out, plan)
    if out.unresolved is None:
        _judge_events(out, plan)
    else:  # events against a work estimate lost in the overhead's noise prove nothing
        out.kernel.events_ns.clear()
        out.notes.append("in-process CUDA events: not compared (the batches' work was not "
                         "resolved); figures from the parent's clock")
    return out


@dataclass(frozen=True)
class _Timer:
    """The parent's clock, and the watch entered around each batch it spans (entered
    before the clock starts and left after it stops, so the watch's own start is not timed)."""

    clock: Clock
    watch: Watch

    def run(self, proc: DeviceSide, plan: TimingPlan, empty: bool) -> tuple[float, BatchAnswer]:
        with self.watch:
            t0 = self.clock()
            answer = proc.run(plan.batch, plan.cold, empty=empty)
            return float(self.clock() - t0), answer


def _spent(out: DeviceTiming, plan: TimingPlan, wall_ns: float) -> bool:
    """Whether the budget is spent: the sides' batches and fetches (the device's time and
    the pipe's), or the wall clock past `wall_factor` budgets."""
    device = sum(sum(s.run_ns) + sum(s.empty_ns) + sum(s.fetch_ns)
                 for s in (out.kernel, out.baseline))
    return device >= plan.budget_ns or wall_ns >= plan.wall_factor * plan.budget_ns


def _batch(proc: DeviceSide, into: SideTiming, calls: Sequence[Inputs], rep: int,
           plan: TimingPlan, timer: _Timer) -> None:
    """Stage (its command's time kept), an empty batch now and then, and one timed batch
    of one side."""
    t0 = timer.clock()
    own = proc.stage(calls)
    into.stage_ns.append(float(timer.clock() - t0) if own is None else float(own))
    if plan.empty_at(rep):
        into.empty_ns.append(timer.run(proc, plan, empty=True)[0])
    ns, answer = timer.run(proc, plan, empty=False)
    into.run_ns.append(ns)
    if answer.stream_gap_ns is not None:
        into.gap_ns.append(float(answer.stream_gap_ns))
    _events(answer.events_ns, plan.batch, into)


def _events(events: tuple[float, ...] | None, batch: int, into: SideTiming) -> None:
    if events is None or len(events) != batch:
        into.events_missing = True
        return
    into.events_ns += [float(e) for e in events]


def calibration(kernel_empty: Sequence[float], baseline_empty: Sequence[float]) -> float:
    """What is subtracted from each candidate batch for the empty batch's overhead: its own
    empty batches' median, never more than the baseline's (the empty batch runs in the
    candidate's process, which can slow it to have more subtracted; the torch path's rule,
    `_torch_bench.calibration_ns`)."""
    return min(float(np.median(kernel_empty)), float(np.median(baseline_empty)))


def _charge(out: DeviceTiming, plan: TimingPlan) -> None:
    """This repetition's per-call figure of each side; the candidate pays for a fetch slower
    than the slowest of the baseline's fetches of the same number of outputs, and for a
    staging command slower than the slowest of the baseline's staging of the same inputs
    (so the baseline's noise is never charged, and work hidden beyond it always is)."""
    k, b = out.kernel, out.baseline
    excess = max(0.0, k.fetch_ns[-1] - max(b.fetch_ns))
    excess += max(0.0, k.stage_ns[-1] - max(b.stage_ns))
    out.late_ns += excess
    overheads = (calibration(k.empty_ns, b.empty_ns), float(np.median(b.empty_ns)))
    for side, extra, overhead in ((k, excess, overheads[0]), (b, 0.0, overheads[1])):
        side.per_call_ns.append(max(side.run_ns[-1] - overhead + extra, 0.0) / plan.batch)


def _compare(out: DeviceTiming, picks: list[int], fetched: dict[int, list[list[NDArray[np.float64]]]],
             agree: Agree, rep: int, batch: int) -> None:
    for i, call in enumerate(picks):
        out.checked += 1
        mine, theirs = fetched[0], fetched[1]
        if i >= len(mine) or i >= len(theirs) or not agree(mine[i], theirs[i]):
            out.wrong.append(f"call {rep * batch + call + 1}")


def _judge_resolution(out: DeviceTiming) -> str | None:
    """Each side's median batch less its empty batches' median is the work the figures rest
    on; where that is no larger than the empty batches' own noise (`RESOLUTION_MADS` median
    absolute deviations: one hiccup among them does not move it), the subtraction cannot
    tell the work from the overhead and a per-call figure (0 ns, or any) would be an
    artefact: the floor would refuse an honest kernel as impossible, a speed-up would be
    noise. Too short to judge, with the figures that say so."""
    for name, side in (("candidate", out.kernel), ("baseline", out.baseline)):
        if not side.run_ns or not side.empty_ns:
            continue
        empty = np.asarray(side.empty_ns)
        overhead = float(np.median(empty))
        work = float(np.median(side.run_ns)) - overhead
        spread = RESOLUTION_MADS * float(np.median(np.abs(empty - overhead)))
        if work <= spread:
            return (f"the {name}'s batches took {work / 1e3:.1f} us more than its empty batches "
                    f"(median {overhead / 1e3:.1f} us), within their own noise ({RESOLUTION_MADS:g} "
                    f"median absolute deviations: {spread / 1e3:.1f} us): too short to judge")
    return None


def _late(kernel: Sequence[float], baseline: Sequence[float]) -> float:
    """The median repetition's excess of the candidate's fetch over the baseline's slowest."""
    slowest = float(max(baseline))
    return float(np.median([max(0.0, f - slowest) for f in kernel]))


def _judge_late(out: DeviceTiming, plan: TimingPlan) -> None:
    """Late work is systematic: the median repetition's fetch is slower than the slowest of
    the baseline's fetches by more than `late_share` of the median batch, and a one-sided
    rank test finds the candidate's fetches slower than the baseline's at `late_alpha`,
    both judged on the fetches less the run-queue waits the OS accounted to them
    (`fetch_busy_ns`: a busy machine the candidate's process shares delays its every
    command, and is not its work; the floor of its CPU time keeps a host thread's late
    work in). A scheduling spike now and then is charged, where it exceeds the baseline's
    slowest, but is no fault; nor is the spread a busy machine gives every fetch (the
    baseline's own shows it). The excess without that evidence is `late_unproven`: a
    busy machine stalled one side's fetches, or late work too; charged either way."""
    k, b = out.kernel, out.baseline
    if not k.run_ns or not b.fetch_ns or not k.fetch_ns:
        return
    run = float(np.median(k.run_ns))
    late = _late(k.fetch_ns, b.fetch_ns)
    if not (run > 0 and late > plan.late_share * run):
        return
    busy = _late(k.fetch_busy_ns, b.fetch_busy_ns)
    p = rank_test_greater(k.fetch_busy_ns, b.fetch_busy_ns)
    what = (f"fetching the candidate's outputs took {late / 1e3:.0f} us longer than the "
            f"baseline's fetch of the same outputs in the median repetition "
            f"({100 * late / run:.0f} % of its batch's time; charged in total "
            f"{out.late_ns / 1e3:.0f} us)")
    beyond_waits = busy > plan.late_share * run
    if beyond_waits and p < plan.late_alpha:
        out.faults.append(("late_work", (
            f"{what}, slower throughout (rank test p = {p:.2g}) and not by waiting for a CPU: "
            "work finished after its batches answered (a side stream, a host thread or a "
            "result computed on demand)")))
    elif beyond_waits:
        out.late_unproven = (f"{what}, but not slower throughout (rank test p = {p:.2g}, "
                             f"{plan.late_alpha:g} needed): late work, or a busy machine "
                             "stalling some fetches")
    else:
        out.late_unproven = (f"{what}, but the OS accounted all but {busy / 1e3:.0f} us of it "
                             "to waiting for a CPU: a busy machine delaying the candidate's "
                             "process, or late work hidden by it")


def _judge_streams(out: DeviceTiming, plan: TimingPlan) -> None:
    """Work on another stream: in the median batch the device-wide synchronise still waited,
    after the batch's own stream had finished, more than `late_share` of the batch beyond
    the baseline's median wait (an honest kernel launches on the stream it is given; the
    wait is timed and charged either way, and named here: `side_stream`)."""
    k, b = out.kernel, out.baseline
    if not k.gap_ns or not k.run_ns:
        return
    gap = float(np.median(k.gap_ns)) - (float(np.median(b.gap_ns)) if b.gap_ns else 0.0)
    run = float(np.median(k.run_ns))
    if run > 0 and gap > plan.late_share * run:
        out.faults.append(("side_stream", (
            f"in the median batch the device was still busy {gap / 1e3:.0f} us "
            f"({100 * gap / run:.0f} % of the batch) after the batch's own stream had "
            "finished: work launched on another stream (timed and charged; an honest "
            "kernel runs on the stream it is given)")))


def _judge_events(out: DeviceTiming, plan: TimingPlan) -> None:
    k = out.kernel
    if k.events_missing or not k.events_ns:
        out.notes.append("in-process CUDA events: not offered; figures from the parent's clock")
        return
    outside = sum(k.per_call_ns) * plan.batch - out.late_ns
    events = sum(k.events_ns)
    gap = abs(events - outside) / max(outside, 1.0)
    if gap <= plan.events_tolerance:
        out.timer = "events-checked"
        out.notes.append(f"in-process CUDA events agree with the parent's clock ({100 * gap:.1f} % "
                         "apart): kept for the per-call distribution only")
        return
    k.events_ns.clear()
    if 1.0 / plan.events_refuse <= events / max(outside, 1.0) <= plan.events_refuse:
        out.notes.append(f"in-process CUDA events {100 * gap:.0f} % apart from the parent's clock "
                         "(launch gaps count differently): not kept; figures from the parent's clock")
        return
    out.faults.append(("timer_disagrees", (
        f"the kernel's process reported {events / 1e3:.0f} us of CUDA events where the parent's "
        f"clock measured {outside / 1e3:.0f} us of work ({100 * gap:.0f} % apart, limit "
        f"{plan.events_refuse:g}x): its timers were moved; events discarded")))
