"""A benchmark claim is k independent runs: `bench_runs` and the benchmark/v1 body (version 2).

One run is `verifier.benchmark._route.bench(...)`: fresh sandboxed processes, fresh inputs and
allocations, kernel and baseline interleaved. Runs differ from each other far more
than one run's bootstrap interval says (buffer placement, CPU placement, the state
of a shared machine), so a claim records every run's speed-up and interval, and the
headline speed-up is their geometric mean with a t interval over the runs.

From the parent side, every run of a single-threaded benchmark is pinned to one CPU
(the parent's affinity, inherited by the child), so kernel and baseline always share
one core's caches and clock and the child is never migrated. The CPU is the one other
work used least in the probe before the runs (ties: the highest), so a process that keeps
one core of the machine busy does not sit on the runs' core. Measured on the shared
2-core machine at load 13-40 (docs/performance.md, "reproduce"), it did not measurably
change the between-run spread (1-2 % for sum-rows and matmul-blocked either way); the
spread that matters is measured in every reproduction anyway.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from attest.ops import CATALOGUE_VERSION, shape_key
from attest.predicates import (
    BENCHMARK_SCHEMA_VERSION,
    BenchCaveat,
    BenchFault,
    BenchmarkPredicate,
    BenchmarkResult,
    BenchmarkRun,
    MeasuredKernel,
    TorchOp,
    derived_gflops,
)
from attest.predicates import (
    Conditions as ConditionsBody,
)
from attest.verdicts import HALFWIDTH_WEAK
from verifier.benchmark._ballast import Ballast
from verifier.benchmark._conditions import Conditions, Placement, merge, probe, probe_placed
from verifier.benchmark._report import BenchReport, machine_peaks, samples_ref
from verifier.benchmark._route import bench
from verifier.benchmark._settings import BenchSettings
from verifier.device import combine
from verifier.errors import VerifierError
from verifier.kernel import measured_kernel
from verifier.progress import Progress, quiet
from verifier.stats import max_runs, student_t_quantile

__all__ = ["DEFAULT_RUNS", "PUBLISH_MAX_RUNS", "RunSet", "bench_runs", "pinned_cpu"]

DEFAULT_RUNS = 5
"""Runs per claim and per reproduction: with a between-run spread of 2-5 % (measured,
docs/performance.md) five runs a side refute a 1.25x inflation at 99 % confidence and keep
a reproduction of one example kernel well under two minutes."""
PUBLISH_MAX_RUNS = 15
"""`ktl publish` measures DEFAULT_RUNS runs and, while they disagree (`disagreements`: the
interval over runs wider than +-RUNS_AGREE, which makes a claim weak), DEFAULT_RUNS more, up to
this many in all. On a host whose memory system moves a run's speed-up 10-25 % from the next
with nothing else running (2026-12-06, `benchmarks/bench_host_noise.py`), five runs leave an
honest claim weak, and the test's interval, which shrinks with 1/claimed + 1/measured runs,
too wide to refute a 1.25x lie: published with five, none of 4 lies recreated busy -> quiet
was refuted; with up to 15, 9 of 16 (docs/performance.md, "Reproduce")."""
MAX_NOTES = 64
RUNS_AGREE = HALFWIDTH_WEAK
"""Most half-width (relative) of a shape's interval over runs for the set to be trusted: the
issue 42 check found 14 of 50 per-run intervals of identical modules excluding 1.0 on a
loaded machine, so agreement between runs, not each run's own width, is what is trusted;
the same +-10 % beyond which a claim is weak (`attest.verdicts.HALFWIDTH_WEAK`)."""
_Typed = TypeVar("_Typed", BenchFault, BenchCaveat)


def pinned_cpu() -> int | None:
    """The CPU runs are pinned to on a quiet machine: the highest one this process may use
    (None: no affinity API). With other load, `bench_runs` takes the idlest instead."""
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return None
    return max(allowed) if allowed else None


def _choose_cpu(pin: bool, like: Mapping[str, Any] | None = None
                ) -> tuple[Placement | None, Conditions]:
    """Where the runs go (None when not pinning or no affinity API): the CPU other work used
    least in a short probe, or, given the conditions a claim was measured under (`like`),
    the CPU and spinners that make this machine's load most like them (`place_like`); and
    the conditions seen before the runs."""
    try:
        allowed = os.sched_getaffinity(0) if pin else set()
    except (AttributeError, OSError):
        allowed = set()
    if not allowed:
        return None, probe(None)
    return probe_placed(allowed, like)


@contextmanager
def _pinned(cpu: int | None) -> Iterator[None]:
    """Pin this process (and so the children it starts) to `cpu`, restoring the old set after."""
    if cpu is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@dataclass(frozen=True)
class RunSet:
    """k runs of the same workload; `to_predicate()` is the benchmark/v1 body (version 2)."""

    runs: tuple[BenchReport, ...]
    cpu: int | None
    kernel: Mapping[str, Any] | None = None
    """The folder measured: name, version, source_sha256 (benchmark/v1 `kernel`)."""
    conditions: Conditions | None = None
    matched: str | None = None
    """How the runs were placed to measure under the claim's conditions (`place_like`)."""

    def __post_init__(self) -> None:
        if not 1 <= len(self.runs) <= max_runs():
            raise VerifierError(f"a run set holds 1 to {max_runs()} runs, got {len(self.runs)}")

    @property
    def trusted(self) -> bool:
        """Every run trusted, every shape measured in every run, and the runs agreeing
        (`disagreements`): one run's narrow interval under load says nothing of the next."""
        return all(r.trusted for r in self.runs) and all(
            len(r.results) == len(self.runs[0].shapes) for r in self.runs) and \
            not self.disagreements()

    def disagreements(self) -> list[BenchCaveat]:
        """A `runs_disagree` caveat per shape whose interval over runs (the between-run
        spread, `_combine`) is wider than +-RUNS_AGREE, whatever each run's own says."""
        out = []
        for agg in self.aggregate():
            found = runs_disagree(self.runs[0].op, agg.shape, [r.speedup for r in agg.runs or ()])
            if found is not None:
                out.append(found)
        return out

    def speedups(self) -> list[list[float]]:
        """Per shape (in workload order), each run's speed-up (shapes a run lacks are skipped)."""
        return [[r.results[i].speedup for r in self.runs if i < len(r.results)]
                for i in range(len(self.runs[0].shapes))]

    def aggregate(self) -> list[BenchmarkResult]:
        """One result per shape measured in every run: geometric mean and t interval over runs,
        each run's own figures in `runs`."""
        out = []
        for i in range(len(self.runs[0].shapes)):
            per_run = [r.results[i] for r in self.runs if i < len(r.results)]
            if len(per_run) == len(self.runs):
                out.append(_combine(per_run))
        return out

    def notes(self) -> list[str]:
        """Run 1's notes in full, later runs' notes that differ; capped at MAX_NOTES."""
        out: list[str] = []
        seen: set[str] = set()
        for k, report in enumerate(self.runs, 1):
            for note in report.notes:
                if k == 1 or note not in seen:
                    out.append(f"run {k}/{len(self.runs)}: {note}")
                seen.add(note)
        if self.matched:
            out.insert(0, f"measured under the claim's conditions: {self.matched}")
        if self.cpu is not None:
            out.insert(0, f"{len(self.runs)} independent runs, each pinned to CPU {self.cpu}")
        else:
            out.insert(0, f"{len(self.runs)} independent runs, not pinned to a CPU")
        if len(out) > MAX_NOTES:
            dropped = len(out) - MAX_NOTES + 1
            out = [*out[:MAX_NOTES - 1], f"... {dropped} more notes not shown"]
        return out

    def samples_blob(self) -> bytes:
        doc = {"runs": [json.loads(r.samples_blob()) for r in self.runs]}
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    def to_predicate(self) -> BenchmarkPredicate:
        first = self.runs[0]
        aggregated = self.aggregate()
        method = dataclasses.replace(first.method(), runs=len(self.runs),
                                     cpu_pinned=self.cpu is not None)
        if aggregated:
            method = dataclasses.replace(method, repetitions=max(1, min(r.n for r in aggregated)))

        return BenchmarkPredicate(
            schema_version=BENCHMARK_SCHEMA_VERSION, environment=first.environment,
            workload=dataclasses.replace(first.workload(), catalogue_version=CATALOGUE_VERSION),
            kernel=MeasuredKernel.from_json(dict(self.kernel)) if self.kernel else None,
            conditions=(ConditionsBody.from_json(self.conditions.to_json())
                        if self.conditions else None),
            method=method, results=tuple(aggregated),
            samples=samples_ref(self.samples_blob()), trusted=self.trusted,
            notes=tuple(n[:2000] for n in self.notes()), faults=tuple(self.faults()),
            caveats=tuple(self.caveats()), device=first.device,
            device_conditions=combine([r.device_conditions for r in self.runs
                                       if r.device_conditions is not None]),
            torch=None if first.torch is None else TorchOp.from_json(dict(first.torch)))

    def caveats(self) -> list[BenchCaveat]:
        """Every run's typed caveats and the runs' disagreements, each (kind, shape) once;
        capped like the notes."""
        return _once_each([*(c for report in self.runs for c in report.caveats),
                           *self.disagreements()])

    def faults(self) -> list[BenchFault]:
        """Every run's typed kernel faults, each (kind, shape) once; capped like the notes."""
        return _once_each([f for report in self.runs for f in report.faults])


def _once_each(items: list[_Typed]) -> list[_Typed]:
    """The first of each (kind, shape), in order; at most MAX_NOTES."""
    out: list[_Typed] = []
    seen: set[tuple[str, str]] = set()
    for item in items:
        key = (item.kind, json.dumps(item.shape, sort_keys=True))
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out[:MAX_NOTES]


def _run_of(r: BenchmarkResult) -> BenchmarkRun:
    return BenchmarkRun(speedup=r.speedup, speedup_ci95=r.speedup_ci95, median_ns=r.median_ns,
                        baseline_median_ns=r.baseline_median_ns, n=r.n)


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else 0.5 * (s[mid - 1] + s[mid])


def over_runs(speedups: Sequence[float]) -> tuple[float, float, float]:
    """The runs' geometric mean speed-up and its 95 % t interval over runs (two runs at
    least): (speed-up, low, high). Pure."""
    logs = [math.log(max(x, 1e-300)) for x in speedups]
    k = len(logs)
    if k < 2:
        raise VerifierError("an interval over runs needs two runs at least")
    mu = math.fsum(logs) / k
    sd = math.sqrt(math.fsum((x - mu) ** 2 for x in logs) / (k - 1))
    half = student_t_quantile(0.975, k - 1) * sd / math.sqrt(k)
    speed = math.exp(mu)
    return speed, min(math.exp(mu - half), speed), max(math.exp(mu + half), speed)


def runs_disagree(op: str, shape: Mapping[str, int], speedups: Sequence[float]
                  ) -> BenchCaveat | None:
    """The `runs_disagree` caveat of one shape whose interval over runs (`over_runs`) is wider
    than +-RUNS_AGREE, whatever each run's own interval says; None when they agree (or there
    is one run). The one rule for a run set and for runs added to it by further looks. Pure."""
    if len(speedups) < 2:
        return None
    speed, lo, hi = over_runs(speedups)
    half = max(speed - lo, hi - speed) / speed if speed else 1.0
    if half <= RUNS_AGREE:
        return None
    return BenchCaveat(kind="runs_disagree", shape=dict(shape), detail=(
        f"{shape_key(op, shape)}: the {len(speedups)} runs read {min(speedups):.3g}x to "
        f"{max(speedups):.3g}x: the interval over runs [{lo:.3g}, {hi:.3g}] is "
        f"+-{100 * half:.0f} %, wider than +-{100 * RUNS_AGREE:.0f} %, however narrow each "
        "run's own interval; a quieter machine or more runs would decide"))


def _combine(per_run: Sequence[BenchmarkResult]) -> BenchmarkResult:
    """Geometric mean of the runs' speed-ups with a 95% t interval over runs (one run: its own)."""
    if len(per_run) >= 2:
        speed, lo, hi = over_runs([r.speedup for r in per_run])
    else:
        speed = per_run[0].speedup
        lo, hi = per_run[0].speedup_ci95
    med = _median([r.median_ns for r in per_run])
    known = [r.gflops * r.median_ns for r in per_run if r.gflops is not None]
    flops_per_ns = _median(known) if len(known) == len(per_run) else None
    return BenchmarkResult(
        shape=dict(per_run[0].shape), n=sum(r.n for r in per_run), median_ns=med,
        p5_ns=min(min(r.p5_ns for r in per_run), med), p95_ns=max(max(r.p95_ns for r in per_run), med),
        baseline_median_ns=_median([r.baseline_median_ns for r in per_run]),
        speedup=speed, speedup_ci95=(min(lo, speed), max(hi, speed)),
        gflops=None if flops_per_ns is None else derived_gflops(flops_per_ns, med),
        runs=tuple(_run_of(r) for r in per_run))


def bench_runs(directory: str | Path, runs: int = DEFAULT_RUNS,
               settings: BenchSettings | None = None, pin: bool = True,
               progress: Progress | None = None,
               like: Mapping[str, Any] | None = None) -> RunSet:
    """`runs` independent `bench` runs of the folder (same settings, shapes and seed, fresh
    processes), and, while they disagree, `runs` more at a time up to `settings.until_agree`
    in all (0: no more; `ktl publish` asks `PUBLISH_MAX_RUNS`).

    `settings.time_budget_s` is per run (None: `BenchSettings()`). Single-threaded runs are
    pinned to one CPU unless `pin` is False. `like`, the `conditions` a claim records, makes
    a reproducer measure under them where it can: its runs pinned and other CPUs kept busy
    by spinners of its own so that as many other CPUs are busy as the claim's were
    (`verifier.benchmark._conditions.place_like`, `_ballast`). Raises VerifierError for bad
    arguments (and what `bench` raises).
    """
    settings = settings or BenchSettings()
    if not 1 <= runs <= max_runs():
        raise VerifierError(f"runs must be between 1 and {max_runs()}, got {runs}")
    if settings.until_agree > max_runs():
        raise VerifierError(f"until_agree must be at most {max_runs()}, got "
                            f"{settings.until_agree}")
    progress = progress or quiet
    # The roofline's peaks are measured once, in this process, with every core: measured
    # while pinned they would halve and make honest kernels look faster than possible.
    machine_peaks()
    placed, before = _choose_cpu(pin and settings.threads == 1, like)
    cpu = None if placed is None else placed.cpu
    matched = None if placed is None else placed.why
    with Ballast(() if placed is None else placed.ballast) as ballast:
        if ballast.procs:  # the sitting's conditions are those with the spinners running
            progress(f"measuring under the claim's conditions: {matched}")
            before = probe(cpu)
        runner = _Runner(directory, settings, cpu, progress)
        reports = runner.until_agree(runner.each(runs), runs)
        after = probe(cpu)
        if ballast.running() < len(ballast.cpus):
            matched = f"{matched} (only {ballast.running()} of them still ran at the end)"
    return RunSet(tuple(reports), cpu, measured_kernel(directory), merge(before, after),
                  matched)


@dataclass(frozen=True)
class _Runner:
    """What every run of one set shares: the folder, the settings, the CPU, the progress."""

    directory: str | Path
    settings: BenchSettings
    cpu: int | None
    progress: Progress

    def each(self, runs: int, first: int = 0, seed: int | None = None) -> list[BenchReport]:
        """`runs` runs (numbered from `first` + 1), pinned to the CPU; the first untrusted
        one ends them. Every run after the first uses the first one's seed."""
        settings = self.settings if seed is None else \
            dataclasses.replace(self.settings, seed=seed)
        reports: list[BenchReport] = []
        for k in range(first, first + runs):
            self.progress(f"run {k + 1}/{first + runs}" + (
                f" (pinned to CPU {self.cpu})" if self.cpu is not None else ""))
            with _pinned(self.cpu):
                report = bench(self.directory, settings, progress=self.progress)
            settings = dataclasses.replace(settings, seed=report.seed)
            reports.append(report)
            if not report.trusted:  # the set is untrusted whatever later runs say: stop here
                break
        return reports

    def until_agree(self, reports: list[BenchReport], batch: int) -> list[BenchReport]:
        """`reports` and, while every run is trusted and the runs disagree on some shape
        (`RunSet.disagreements`), `batch` more at a time, up to `settings.until_agree` in
        all: a host whose runs swing is measured longer instead of yielding a claim its own
        spread cannot carry (issue 42). A run untrusted for any other reason ends it."""
        cap = self.settings.until_agree
        while len(reports) < cap and all(r.trusted for r in reports):
            apart = RunSet(tuple(reports), self.cpu).disagreements()
            if not apart:
                break
            more = min(max(batch, 1), cap - len(reports))
            self.progress(f"the {len(reports)} runs disagree ({len(apart)} shape(s) with an "
                          f"interval over runs wider than +-{100 * RUNS_AGREE:.0f} %): "
                          f"measuring {more} more, up to {cap} in all")
            reports = [*reports, *self.each(more, first=len(reports), seed=reports[0].seed)]
        return reports
