"""Can `ktl reproduce` tell an inflated speed-up from noise? Four experiments on this machine.

1. spread: the between-run coefficient of variation of the speed-up per example kernel,
   with runs as before (not pinned) and after (pinned to one CPU), interleaved so both
   see the same machine load; plus one variant with a longer warm-up.
2. cycles: per kernel, N publish -> reproduce cycles. Each cycle measures twice,
   independently (k runs to publish, k fresh runs to reproduce); the honest claim is
   the published body, and inflated claims multiply it (every run's speed-up and
   interval and the baseline medians) by 1.10, 1.25 and 1.5. Each claim is judged by
   the real `verifier.reproduce.compare_benchmark` under the default policy. Also the
   simulated false-refutation and detection rates of the test at the measured spread.
3. cross (issue 25): claims published while a second process keeps one core busy and
   reproduced without it, and the reverse, through the real `reproduce_kernel` (between-
   sitting allowance, conditions, sequential looks within the time budget): every honest
   claim of the example kernels and the 1.25x-inflated sum-rows claim, with the verdicts,
   the times, and the between-sitting component (the log speed-up's shift from one
   sitting to the other beyond the runs' own spread).
4. shift (issue 42): how far each kind of load a reproducer can recreate (a spinner on the
   runs' CPU, one on the other CPU, both) moves an honest speed-up from quiet, one run of
   each in turn: the mean log shift and the 99 % bound of its size, which `MARGIN_FOR`
   allows where that difference is left between two sittings.
5. estimators (issue 42): whether another reading of each run's raw samples would move less
   from run to run than the claim's (the ratio of the medians): low percentiles, the minima,
   the median of adjacent kernel/baseline pairs; and how much of the spread the run's own
   baseline time explains (a covariate a claimant writes: a lie that slows its baseline x1.25
   would be credited slope x log 1.25 of it).

    .venv/bin/python benchmarks/bench_reproduce_stats.py            # the full run (~15-25 min)
    .venv/bin/python benchmarks/bench_reproduce_stats.py --tiny     # a smoke run in seconds
    .venv/bin/python benchmarks/bench_reproduce_stats.py --only cross --cycles 10   # issue 25
    .venv/bin/python benchmarks/bench_reproduce_stats.py --only shift --kernels sum-rows,softmax-rows
    .venv/bin/python benchmarks/bench_reproduce_stats.py --only cross --kernels sum-rows,softmax-rows \
        --lies sum-rows,softmax-rows --busy all --cycles 10                        # issue 42
    .venv/bin/python benchmarks/bench_reproduce_stats.py --only estimators --kernels sum-rows --rounds 30

Prints markdown tables (docs/performance.md, "Reproduce") and the machine's load.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attest.predicates import (
    BENCHMARK_V1,
    BenchmarkPredicate,
    ReproductionPredicate,
    ReproductionTarget,
)
from demo.run import inflate_benchmark
from verifier.benchmark._report import machine_peaks
from verifier.benchmark._runs import DEFAULT_RUNS, PUBLISH_MAX_RUNS, RunSet, bench_runs
from verifier.benchmark._settings import BenchSettings
from verifier.reproduce import compare_benchmark
from verifier.stats import simulated_rates

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ("sum-rows", "matmul-blocked", "softmax-rows")
CROSS_KERNELS = ("sum-rows", "matmul-blocked", "softmax-rows", "rmsnorm-rows", "attention",
                 "attention-causal")
LIE = 1.25
FACTORS = (1.0, 1.10, 1.25, 1.5)
Say = Callable[[str], None]


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def _cv(xs: Sequence[float]) -> float:
    return statistics.stdev(xs) / statistics.fmean(xs) if len(xs) > 1 else 0.0


def _speedups(rs: RunSet) -> list[float]:
    return rs.speedups()[0]


def spread(kernels: Sequence[str], runs: int, shapes: list[dict[str, int]] | None,
           budget: float, say: Say, warmup_variant: bool = True) -> list[dict[str, Any]]:
    """Between-run CV per kernel per setting, measured round-robin (one run each in turn)."""
    settings: dict[str, dict[str, Any]] = {
        "not pinned (before)": {"pin": False},
        "pinned to one CPU (after)": {"pin": True},
    }
    if warmup_variant:
        settings["pinned, warm-up 50"] = {"pin": True, "warmup": 50}

    def one(name: str, k: int, opts: dict[str, Any]) -> list[float]:
        return _speedups(bench_runs(
            ROOT / "examples" / name, runs=1,
            settings=BenchSettings(shapes=shapes, seed=7, time_budget_s=budget,
                                   warmup=int(opts.get("warmup", 5))), pin=bool(opts["pin"])))

    return [{"kernel": name, **{label: (statistics.fmean(v), _cv(v), min(v), max(v))
                                for label, v in got.items()}}
            for name, got in _round_robin("spread", kernels, runs, settings, one, say).items()]


SHIFT_SETTINGS: dict[str, dict[str, float] | None] = {
    "quiet": None,
    "pinned_cpu_busy": {"pinned_cpu_busy": 1.0, "runnable": 1.0},
    "runnable": {"pinned_cpu_busy": 0.0, "runnable": 1.0},
    "both": {"pinned_cpu_busy": 1.0, "runnable": 2.0},
}
"""The loads of experiment 4, as a claim's `conditions` the reproducer recreates (its own
spinners, `place_like`): none; one sharing the runs' CPU; one on the other CPU; both."""


def shift(kernels: Sequence[str], rounds: int, budget: float, say: Say) -> list[dict[str, Any]]:
    """Per kernel, `rounds` round-robin rounds of one run in each of `SHIFT_SETTINGS`: how
    far each load moves the speed-up from quiet (what `MARGIN_FOR` allows for one kind of
    difference left between two sittings). Pure measurement; the table is `_shift_table`."""
    cores = os.cpu_count() or 1

    def one(name: str, k: int, like: dict[str, float] | None) -> list[float]:
        return _speedups(bench_runs(
            ROOT / "examples" / name, runs=1,
            settings=BenchSettings(seed=7 + k, time_budget_s=budget),
            like=None if like is None else {**like, "cores": cores}))[:1]

    return [{"kernel": name, "speedups": got}
            for name, got in _round_robin("shift", kernels, rounds, SHIFT_SETTINGS, one,
                                          say).items()]


ESTIMATORS: dict[str, Callable[[Any, Any], float]] = {
    "ratio of medians (the claim's)": lambda k, b: float(np.median(b) / np.median(k)),
    "ratio of 5th percentiles": lambda k, b: float(np.percentile(b, 5) / np.percentile(k, 5)),
    "ratio of 25th percentiles": lambda k, b: float(np.percentile(b, 25) / np.percentile(k, 25)),
    "ratio of minima": lambda k, b: float(b.min() / k.min()),
    "median of adjacent pairs": lambda k, b: float(np.exp(np.median(
        np.log(b[:min(k.size, b.size)]) - np.log(k[:min(k.size, b.size)])))),
}
"""Readings of one run's per-batch times (kernel k, baseline b, in the order timed)."""


def estimator_spreads(runs: Sequence[tuple[Sequence[float], Sequence[float]]]
                      ) -> dict[str, float]:
    """Per reading (`ESTIMATORS`), the between-run spread (sd of its log over `runs`, each
    a run's kernel and baseline batch times). Pure."""
    if len(runs) < 2:
        raise ValueError("need at least two runs")
    arrays = [(np.asarray(k, dtype=float), np.asarray(b, dtype=float)) for k, b in runs]
    return {name: statistics.stdev(math.log(f(k, b)) for k, b in arrays)
            for name, f in ESTIMATORS.items()}


def baseline_regression(runs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(slope, residual sd) of log speed-up on log baseline median over runs given as
    (baseline median, speed-up): how much of the spread the run's own baseline time
    explains. Pure."""
    if len(runs) < 3:
        raise ValueError("need at least three runs")
    x = np.log([b for b, _ in runs])
    y = np.log([s for _, s in runs])
    slope, icpt = np.polyfit(x, y, 1)
    resid = y - (slope * x + icpt)
    return float(slope), float(math.sqrt(float(np.sum(resid ** 2)) / (len(runs) - 2)))


def estimators(kernel: str, rounds: int, shapes: list[dict[str, int]] | None, budget: float,
               say: Say) -> str:
    """`rounds` runs of `kernel`, one at a time, each read every way of `ESTIMATORS`: the
    table of their between-run spreads and the baseline regression."""
    runs: list[tuple[list[float], list[float]]] = []
    for r in range(rounds):
        rs = bench_runs(ROOT / "examples" / kernel, runs=1,
                        settings=BenchSettings(shapes=shapes, seed=7 + r, time_budget_s=budget))
        sample = rs.runs[0].samples[0]
        runs.append(([float(x) for x in sample["kernel_ns"][1:]],
                     [float(x) for x in sample["baseline_ns"][1:]]))
        say(f"estimators: {kernel} run {r + 1}/{rounds}: {_speedups(rs)[0]:.3f}x")
    out = ["| reading of a run's samples | between-run spread (sd of log) |", "|---|---|"]
    out += [f"| {name} | {100 * sd:.1f} % |" for name, sd in estimator_spreads(runs).items()]
    slope, resid = baseline_regression([(float(np.median(b)), float(np.median(b) / np.median(k)))
                                        for k, b in runs])
    out.append(f"\nlog speed-up on log baseline median: slope {slope:.2f}, residual spread "
               f"{100 * resid:.1f} %; a lie slowing its baseline x{LIE:g} would be credited "
               f"{100 * (LIE ** slope - 1):.0f} % of its {100 * (LIE - 1):.0f} %")
    return "\n".join(out)


def _round_robin(what: str, kernels: Sequence[str], rounds: int, settings: dict[str, Any],
                 one: Callable[[str, int, Any], list[float]], say: Say
                 ) -> dict[str, dict[str, list[float]]]:
    """Per kernel, `rounds` rounds of one run in each setting in turn (so every setting sees
    the same machine): the speed-ups `one(kernel, round, setting)` returned, by setting."""
    out: dict[str, dict[str, list[float]]] = {}
    for name in kernels:
        got: dict[str, list[float]] = {label: [] for label in settings}
        for k in range(rounds):
            for label, opts in settings.items():
                say(f"{what}: {name} round {k + 1}/{rounds}, {label}")
                got[label] += one(name, k, opts)
        out[name] = got
    return out


def log_shift(quiet: Sequence[float], busy: Sequence[float], confidence: float = 0.99
              ) -> tuple[float, float]:
    """The mean log shift of `busy` from `quiet` speed-ups (round by round) and the upper
    `confidence` bound of its size: |mean| + t * sd / sqrt(n). Pure."""
    from verifier.stats import student_t_quantile

    d = [math.log(b) - math.log(q) for q, b in zip(quiet, busy, strict=False)]
    if len(d) < 2:
        return (d[0] if d else 0.0), math.inf
    mean = statistics.fmean(d)
    half = student_t_quantile(confidence, len(d) - 1) * statistics.stdev(d) / math.sqrt(len(d))
    return mean, abs(mean) + half


def _shift_table(rows: list[dict[str, Any]]) -> str:
    labels = [k for k in SHIFT_SETTINGS if k != "quiet"]
    out = ["| kernel | quiet: mean speed-up, CV | " + " | ".join(
        f"{lab}: mean shift [99 % bound of its size]" for lab in labels) + " |",
        "|---|---|" + "---|" * len(labels)]
    for r in rows:
        got = r["speedups"]
        q = got["quiet"]
        cells = []
        for lab in labels:
            mean, bound = log_shift(q, got[lab])
            cells.append(f"{100 * (math.exp(mean) - 1):+.1f} % [{100 * (math.exp(bound) - 1):.1f} %]")
        out.append(f"| {r['kernel']} | {statistics.fmean(q):.3f}x, {100 * _cv(q):.1f} % | "
                   + " | ".join(cells) + " |")
    return "\n".join(out)


def sitting_shift(claimed: Sequence[float], fresh: Sequence[float]) -> tuple[float, float]:
    """One honest cycle's shift between its two sittings: the difference of the two mean
    log speed-ups, and the part of its square the runs' own spread explains (each
    sitting's sample variance of the log speed-up over its run count)."""
    a = [math.log(x) for x in claimed]
    b = [math.log(x) for x in fresh]
    noise = sum(statistics.variance(v) / len(v) for v in (a, b) if len(v) > 1)
    return statistics.fmean(a) - statistics.fmean(b), noise


def between_line(shifts: Sequence[tuple[float, float]]) -> str:
    """The between-sitting component over honest cycles: the shifts' median, rms and max,
    and the rms left once the runs' spread is taken out (what SIGMA_BETWEEN stands for)."""
    if not shifts:
        return "no honest cycle measured: no between-sitting estimate"
    size = [abs(d) for d, _ in shifts]
    rms = math.sqrt(statistics.fmean(d * d for d, _ in shifts))
    beyond = math.sqrt(max(0.0, statistics.fmean(d * d - v for d, v in shifts)))
    return (f"between-sitting shift of honest claims (log units): median "
            f"{100 * statistics.median(size):.1f} %, rms {100 * rms:.1f} %, max "
            f"{100 * max(size):.1f} % over {len(shifts)} cycles; beyond the runs' own "
            f"spread {100 * beyond:.1f} % (rms)")


def cycles(kernels: Sequence[str], n: int, runs: int, shapes: list[dict[str, int]] | None,
           budget: float, say: Say
           ) -> tuple[list[dict[str, Any]], list[float], list[float], list[tuple[float, float]]]:
    """Verdict counts per kernel and factor; the measured spreads; reproduction times; the
    honest cycles' shifts between sittings (`sitting_shift`)."""
    rows: list[dict[str, Any]] = []
    sigmas: list[float] = []
    times: list[float] = []
    shifts: list[tuple[float, float]] = []
    for name in kernels:
        counts = {f: {"confirmed": 0, "refuted": 0, "unsupported": 0, "inconclusive": 0,
                      "faults": 0}
                  for f in FACTORS}
        for c in range(n):
            say(f"cycles: {name} cycle {c + 1}/{n}: publishing ({runs} runs)")
            machine_peaks.cache_clear()  # publisher and reproducer are separate processes
            published = bench_runs(ROOT / "examples" / name, runs=runs,
                                   settings=BenchSettings(shapes=shapes, seed=11 + c,
                                                          time_budget_s=budget)).to_predicate().to_json()
            say(f"cycles: {name} cycle {c + 1}/{n}: reproducing ({runs} fresh runs)")
            machine_peaks.cache_clear()
            t0 = time.perf_counter()
            fresh = bench_runs(ROOT / "examples" / name, runs=runs,
                               settings=BenchSettings(shapes=shapes, seed=11 + c,
                                                      time_budget_s=budget)).to_predicate()
            times.append(time.perf_counter() - t0)
            if not (published["results"] and fresh.results):
                say(f"cycles: {name} cycle {c + 1}: no results (a run failed): "
                    f"{(published['notes'] + list(fresh.notes))[-1:]}")
                for f in FACTORS:
                    counts[f]["faults"] += 1
                continue
            for f in FACTORS:
                claim = published if f == 1.0 else inflate_benchmark(published, f)
                for row in compare_benchmark(BenchmarkPredicate.from_json(claim), fresh):
                    verdict = row.to_json()
                    counts[f][verdict["verdict"]] += 1
                    if "statistics" not in verdict:  # not decided by the test: a distrusted run
                        counts[f]["faults"] += 1
                        if f == 1.0:
                            say(f"cycles: {name} cycle {c + 1}: {verdict['verdict']} without the "
                                f"test: {verdict['reason'][:300]}")
                    elif f == 1.0:
                        sigmas.append(verdict["statistics"]["sigma"])
            for mine, theirs in zip(fresh.results, published["results"], strict=False):
                if "runs" in theirs and mine.runs:
                    shifts.append(sitting_shift([float(r["speedup"]) for r in theirs["runs"]],
                                                mine.run_speedups()))
        rows.append({"kernel": name, "counts": counts})
    return rows, sigmas, times, shifts


@contextmanager
def busy_core(on: bool, cpus: Sequence[int]) -> Iterator[None]:
    """A second process spinning on each of `cpus` while `on`: the reproducer's own spinner
    (`verifier.benchmark._ballast`), which dies with this process (a spinner left by a killed
    run kept a core busy through the next run's quiet sittings)."""
    if not on:
        yield
        return
    from verifier.benchmark._ballast import Ballast

    with Ballast(list(cpus)):
        time.sleep(0.2)
        yield


def busy_cpus(which: str) -> list[int]:
    """The CPUs a busy sitting keeps busy: ``pinned`` the runs' own CPU (or the last one),
    ``all`` every CPU this process may run on (issue 42: both cores of this machine)."""
    from verifier.benchmark._runs import pinned_cpu

    if which == "all":
        return sorted(os.sched_getaffinity(0))
    cpu = pinned_cpu()
    return [cpu if cpu is not None else max(os.sched_getaffinity(0))]


Publish = Callable[[str, int, bool], BenchmarkPredicate]
"""(kernel, seed, busy) -> the published benchmark claim of one sitting."""
Reproduce = Callable[[str, BenchmarkPredicate, bool], ReproductionPredicate]
"""(kernel, claim, busy) -> the reproduction of that claim in the other sitting."""


def real_publish(runs: int, shapes: list[dict[str, int]] | None, budget: float,
                 cpus: Sequence[int], until_agree: int = PUBLISH_MAX_RUNS) -> Publish:
    """Publishing as `ktl publish` measures: `runs` fresh bench runs of the example, more while
    they disagree, up to `until_agree` in all."""

    def publish(name: str, seed: int, busy: bool) -> BenchmarkPredicate:
        machine_peaks.cache_clear()  # publisher and reproducer are separate processes
        with busy_core(busy, cpus):
            return bench_runs(ROOT / "examples" / name, runs=runs,
                              settings=BenchSettings(shapes=shapes, seed=seed,
                                                     time_budget_s=budget,
                                                     until_agree=until_agree)).to_predicate()
    return publish


def real_reproduce(runs: int, budget: float, sequential_s: float, say: Say,
                   cpus: Sequence[int]) -> Reproduce:
    """Reproducing as `ktl reproduce` does: the real `reproduce_kernel` (between-sitting
    allowance, conditions, sequential looks within `sequential_s`)."""
    from verifier.reproduce import ReproduceSettings, reproduce_kernel

    settings = ReproduceSettings(time_budget_s=budget, runs=runs, progress=say,
                                 sequential_budget_s=sequential_s)

    def reproduce(name: str, claim: BenchmarkPredicate, busy: bool) -> ReproductionPredicate:
        machine_peaks.cache_clear()
        with busy_core(busy, cpus):
            return reproduce_kernel(ROOT / "examples" / name, [claim], CROSS_TARGET, settings)
    return reproduce


CROSS_TARGET = ReproductionTarget(origin="bench.local/log", index=0, leaf_hash="00" * 32,
                                  predicate_type=BENCHMARK_V1, subject_sha256="00" * 32)
DIRECTIONS = (("busy -> quiet", (True, False)), ("quiet -> busy", (False, True)))


def cross(kernels: Sequence[str], n: int, publish: Publish, reproduce: Reproduce, say: Say, *,
          clock: Callable[[], float] = time.perf_counter,
          lies: Collection[str] = ("sum-rows",)) -> dict[str, Any]:
    """Publish busy / reproduce quiet and the reverse, `n` cycles per kernel and direction:
    the verdicts (every honest claim; for the kernels in `lies` also the 1.25x-inflated
    one), the reproduction times and the honest claims' shifts between sittings."""
    rows = [{"kernel": name, "direction": direction, "busy": busy,
             "verdicts": {"honest": [], "inflated": []}, "times": []}
            for name in kernels for direction, busy in DIRECTIONS]
    shifts: list[float] = []
    # cycle by cycle over every row: a run cut short still leaves every row about as full
    for c in range(n):
        for row in rows:
            name, direction, (pub_busy, rep_busy) = row["kernel"], row["direction"], row["busy"]
            got, times = row["verdicts"], row["times"]
            say(f"cross: {name} {direction} cycle {c + 1}/{n}: publishing")
            published = publish(name, 31 + c, pub_busy)
            if not published.results:
                got["honest"].append("no results")
                continue
            claims = [("honest", published)]
            if name in lies:
                claims.append(("inflated", BenchmarkPredicate.from_json(
                    inflate_benchmark(published.to_json(), LIE))))
            for label, claim in claims:
                say(f"cross: {name} {direction} cycle {c + 1}/{n}: reproducing the "
                    f"{label} claim")
                t0 = clock()
                body = reproduce(name, claim, rep_busy)
                times.append(clock() - t0)
                for v in body.claims:
                    got[label].append(v.verdict)
                    if label == "honest" and v.statistics is not None:
                        # the shift between sittings, beyond what the runs explain
                        shifts.append(abs(math.log(v.statistics.inflation)))
                    if v.verdict != "confirmed":
                        say(f"cross: {name} {label}: {v.verdict}: {v.reason}")
            row["time_median"] = statistics.median(times) if times else 0.0
            row["time_max"] = max(times) if times else 0.0
        say(f"cross: after cycle {c + 1}/{n}:\n{_cross_table({'rows': rows, 'shifts': shifts})}")
    return {"rows": rows, "shifts": shifts}


VERDICT_WORDS = ("refuted", "confirmed", "unsupported", "inconclusive", "no results")


def _cross_table(found: dict[str, Any]) -> str:
    out = ["| kernel | published -> reproduced | honest claims | 1.25x-inflated claim | "
           "reproduce time, median / max |", "|---|---|---|---|---|"]
    for r in found["rows"]:
        def count(vs: list[str]) -> str:
            if not vs:
                return "—"
            return ", ".join(f"{vs.count(w)} {w}" for w in VERDICT_WORDS if vs.count(w))
        out.append(f"| {r['kernel']} | {r['direction']} | {count(r['verdicts']['honest'])} | "
                   f"{count(r['verdicts']['inflated'])} | {r.get('time_median', 0.0):.0f} s / "
                   f"{r.get('time_max', 0.0):.0f} s |")
    honest = [v for r in found["rows"] for v in r["verdicts"]["honest"]]
    lied = [v for r in found["rows"] for v in r["verdicts"]["inflated"]]
    out.append(f"\nhonest claims refuted: {honest.count('refuted')} of {len(honest)}; "
               f"{LIE:g}x lies refuted: {lied.count('refuted')} of {len(lied)}, confirmed: "
               f"{lied.count('confirmed')} of {len(lied)}")
    shifts = found["shifts"]
    if shifts:
        rms = math.sqrt(statistics.fmean(x * x for x in shifts))
        out.append(f"\nbetween-sitting shift of honest claims (|log inflation|): median "
                   f"{100 * statistics.median(shifts):.1f} %, rms {100 * rms:.1f} %, max "
                   f"{100 * max(shifts):.1f} % over {len(shifts)} claims")
    return "\n".join(out)


def _spread_table(rows: list[dict[str, Any]]) -> str:
    labels = [k for k in rows[0] if k != "kernel"]
    head = "| kernel | " + " | ".join(f"{lab}: mean speed-up, CV [min, max]" for lab in labels) + " |"
    out = [head, "|---|" + "---|" * len(labels)]
    for r in rows:
        cells = [f"{m:.3f}x, **{100 * cv:.1f} %** [{lo:.3f}, {hi:.3f}]" for m, cv, lo, hi in
                 (r[lab] for lab in labels)]
        out.append(f"| {r['kernel']} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def _cycles_table(rows: list[dict[str, Any]], n: int) -> str:
    out = ["| kernel | " + " | ".join(
        "honest" if f == 1.0 else f"inflated {f:g}x" for f in FACTORS) + " |",
        "|---|" + "---|" * len(FACTORS)]
    for r in rows:
        cells = []
        for f in FACTORS:
            c = r["counts"][f]
            cells.append(f"{c['refuted']}/{n} refuted ({c['confirmed']} conf., "
                         f"{c['unsupported']} unsup., {c['inconclusive']} inc.; "
                         f"{c['faults']} not by the test)")
        out.append(f"| {r['kernel']} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def _simulated(sigmas: Sequence[float], runs: int, trials: int) -> str:
    levels = sorted({round(s, 3) for s in (0.01, 0.03, statistics.median(sigmas) if sigmas else 0.03,
                                           max(sigmas) if sigmas else 0.05, 0.08)})
    out = ["| between-run spread | " + " | ".join(
        "honest: refuted" if f == 1.0 else f"{f:g}x: refuted" for f in FACTORS) + " |",
        "|---|" + "---|" * len(FACTORS)]
    for s in levels:
        cells = [f"{100 * simulated_rates(f, s, runs, trials, seed=5)['refuted']:.1f} %"
                 for f in FACTORS]
        out.append(f"| {100 * s:.1f} % | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="one kernel, one tiny shape, 1 cycle")
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="runs per claim and reproduction")
    ap.add_argument("--spread-runs", type=int, default=8, help="runs per setting in experiment 1")
    ap.add_argument("--only", choices=("spread", "cycles", "cross", "shift", "estimators"),
                    default=None)
    ap.add_argument("--rounds", type=int, default=12, help="shift: rounds per kernel")
    ap.add_argument("--five-only", action="store_true",
                    help="cross: publish exactly --runs runs (before issue 42's more runs "
                         "while they disagree)")
    ap.add_argument("--time-budget", type=float, default=180.0,
                    help="cross: reproduce's sequential time budget per claim (default 180 s)")
    ap.add_argument("--kernels", default=",".join(KERNELS), help="example kernels, comma-separated")
    ap.add_argument("--lies", default="sum-rows",
                    help="cross: kernels whose 1.25x-inflated claim is reproduced too")
    ap.add_argument("--busy", choices=("pinned", "all"), default="pinned",
                    help="cross: what the busy sitting keeps busy: the runs' own CPU, or "
                         "every CPU (issue 42's check: both cores of a 2-core machine)")
    args = ap.parse_args(argv)
    kernels: Sequence[str] = [k for k in args.kernels.split(",") if k]
    shapes = None
    budget = 10.0
    trials = 20000
    if args.tiny:
        kernels, shapes, budget, trials = ("sum-rows",), [{"R": 16, "C": 256}], 0.3, 200
        args.cycles, args.runs, args.spread_runs = 1, 2, 2

    def say(msg: str) -> None:
        print(f"  [{time.strftime('%H:%M:%S')} load {_load()}] {msg}", file=sys.stderr, flush=True)

    print(f"machine: {os.cpu_count()} cores, load average (1/5/15 min) at start {_load()}")
    started = time.perf_counter()
    if args.only in (None, "spread"):
        print(f"\n### Between-run spread ({args.spread_runs} runs per setting, one shape per kernel)\n")
        print(_spread_table(spread(kernels, args.spread_runs, shapes, budget, say,
                                   warmup_variant=not args.tiny)))
        print(f"\n(load average after: {_load()})")
    if args.only == "shift":
        print(f"\n### The shift each recreated load moves a speed-up by ({args.rounds} rounds, "
              "one run per setting each, round-robin; log units, 99 % t bound)\n")
        print(_shift_table(shift(kernels, 1 if args.tiny else args.rounds, budget, say)))
        print(f"\n(load average after: {_load()})\n\ntotal {time.perf_counter() - started:.0f} s")
        return 0
    if args.only == "estimators":
        name = kernels[0]
        print(f"\n### Readings of each run's samples ({name}, {args.rounds} runs one at a time)\n")
        print(estimators(name, 3 if args.tiny else args.rounds, shapes, budget, say))
        print(f"\n(load average after: {_load()})\n\ntotal {time.perf_counter() - started:.0f} s")
        return 0
    if args.only == "cross":
        kernels = [k for k in args.kernels.split(",") if k] if args.kernels != ",".join(
            KERNELS) else list(CROSS_KERNELS)
        if args.tiny:
            kernels = ["sum-rows"]
        cpus = busy_cpus(args.busy)
        lies = [k for k in args.lies.split(",") if k]
        print(f"\n### Busy / quiet sittings ({args.cycles} cycles, {args.runs} runs a side, "
              f"time budget {args.time_budget:g} s; a second process spins on CPU "
              f"{', '.join(map(str, cpus))} in the busy sitting; {LIE:g}x lies of "
              f"{', '.join(lies) or 'none'})\n")
        print(_cross_table(cross(kernels, args.cycles,
                                 real_publish(args.runs, shapes, budget, cpus,
                                              0 if args.five_only else PUBLISH_MAX_RUNS),
                                 real_reproduce(args.runs, budget, args.time_budget, say, cpus),
                                 say, lies=lies)))
        print(f"\n(load average after: {_load()})")
        print(f"\ntotal {time.perf_counter() - started:.0f} s")
        return 0
    if args.only in (None, "cycles"):
        rows, sigmas, times, shifts = cycles(kernels, args.cycles, args.runs, shapes, budget,
                                             say)
        print(f"\n### Publish -> reproduce cycles ({args.cycles} per kernel, {args.runs} runs a side)\n")
        print(_cycles_table(rows, args.cycles))
        if sigmas:
            print(f"\nbetween-run spread measured in the reproductions: median "
                  f"{100 * statistics.median(sigmas):.1f} %, max {100 * max(sigmas):.1f} %")
        if times:
            print(f"reproduction bench time per kernel ({args.runs} runs): median "
                  f"{statistics.median(times):.1f} s, max {max(times):.1f} s")
        print(between_line(shifts))
        print(f"\n### Simulated rates of the test ({args.runs} runs a side, {trials} trials, "
              "default policy)\n")
        print(_simulated(sigmas, args.runs, trials))
        print(f"\n(load average after: {_load()})")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
