"""benchmarks/bench_reproduce_stats.py --tiny: the experiment behind docs/performance.md still runs."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from attest import examples
from attest.predicates import BenchmarkPredicate, Environment, ReproductionPredicate
from verifier.reproduce import Fresh, compare

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_tiny_experiment_runs_and_prints_its_tables() -> None:
    """Eight tiny bench runs: ~15 s on an idle 2-core machine."""
    out = subprocess.run([sys.executable, "benchmarks/bench_reproduce_stats.py", "--tiny"],
                         capture_output=True, text=True, cwd=ROOT, timeout=240, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "load average (1/5/15 min) at start" in text
    assert "| sum-rows | " in text and "not pinned (before)" in text
    assert "| kernel | honest | inflated 1.1x | inflated 1.25x | inflated 1.5x |" in text
    row = next(line for line in text.splitlines() if line.startswith("| sum-rows | ")
               and "refuted (" in line)
    assert row.count("/1 refuted") == 4
    assert "| between-run spread | honest: refuted |" in text
    assert "between-sitting shift of honest claims (log units): median " in text


def _bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_reproduce_stats", ROOT / "benchmarks" / "bench_reproduce_stats.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _claim(runs: tuple[float, ...]) -> BenchmarkPredicate:
    return BenchmarkPredicate.from_json(examples.benchmark_runs(runs))


#: The busy sitting's runs (a second process on the pinned core) and the quiet one's.
BUSY = (2.02, 2.05, 2.0, 2.04, 2.03)
QUIET = (2.1, 2.08, 2.12, 2.09, 2.11)


def test_cross_experiment_on_injected_measurements_counts_the_real_verdicts() -> None:
    """The busy/quiet experiment's bookkeeping on injected sittings, judged by the real
    `compare` under the default policy: honest claims never refuted (confirmed where the whole
    interval is within the tolerance), the 1.25x-inflated one refuted, one row per kernel and direction, the shifts recorded."""
    bench = _bench_module()
    env = Environment.from_json(examples.environment())
    published: list[tuple[str, int, bool]] = []

    def publish(name: str, seed: int, busy: bool) -> BenchmarkPredicate:
        published.append((name, seed, busy))
        return _claim(BUSY if busy else QUIET)

    def reproduce(name: str, claim: BenchmarkPredicate, busy: bool) -> ReproductionPredicate:
        return compare([claim], bench.CROSS_TARGET, env,
                       Fresh(benchmark=_claim(BUSY if busy else QUIET)))

    ticks = iter(range(100))
    found = bench.cross(["sum-rows", "softmax-rows"], 2, publish, reproduce, lambda _m: None,
                        clock=lambda: float(next(ticks)))
    table = bench._cross_table(found)
    # cycle by cycle over every row (a run cut short leaves every row about as full)
    assert published[:3] == [("sum-rows", 31, True), ("sum-rows", 31, False),
                             ("softmax-rows", 31, True)]
    assert [(r["kernel"], r["direction"]) for r in found["rows"]] == [
        ("sum-rows", "busy -> quiet"), ("sum-rows", "quiet -> busy"),
        ("softmax-rows", "busy -> quiet"), ("softmax-rows", "quiet -> busy")]
    assert "| sum-rows | busy -> quiet | 2 confirmed | 2 refuted | 1 s / 1 s |" in table
    # quiet -> busy the honest claim reads 3.4 % overstated: its estimate is within the 5 %
    # tolerance but not its whole interval, which a confirmation needs since issue 42
    # (item 6), so inconclusive, never refuted
    assert "| sum-rows | quiet -> busy | 2 inconclusive | 2 refuted |" in table
    # only sum-rows carries the inflated claim
    assert "| softmax-rows | busy -> quiet | 2 confirmed | — |" in table
    # every honest claim's shift: |log(geomean(BUSY) / geomean(QUIET))|, about 3.4 %
    assert len(found["shifts"]) == 8
    assert 0.03 < min(found["shifts"]) <= max(found["shifts"]) < 0.04
    assert "over 8 claims" in table
    assert "honest claims refuted: 0 of 8; 1.25x lies refuted: 4 of 4, confirmed: 0 of 4" \
        in table


def test_cross_experiment_lies_about_every_kernel_asked() -> None:
    """`--lies sum-rows,softmax-rows`: each kernel named carries the 1.25x-inflated claim too
    (issue 42's check), and the totals count them all."""
    bench = _bench_module()
    env = Environment.from_json(examples.environment())

    def reproduce(name: str, claim: BenchmarkPredicate, busy: bool) -> ReproductionPredicate:
        return compare([claim], bench.CROSS_TARGET, env,
                       Fresh(benchmark=_claim(BUSY if busy else QUIET)))

    found = bench.cross(["sum-rows", "softmax-rows"], 1,
                        lambda _n, _s, busy: _claim(BUSY if busy else QUIET), reproduce,
                        lambda _m: None, lies=("sum-rows", "softmax-rows"))
    table = bench._cross_table(found)
    assert "| softmax-rows | busy -> quiet | 1 confirmed | 1 refuted |" in table
    assert "1.25x lies refuted: 4 of 4, confirmed: 0 of 4" in table
    assert bench.busy_cpus("all") == sorted(os.sched_getaffinity(0))
    assert len(bench.busy_cpus("pinned")) == 1


def test_cross_experiment_counts_a_sitting_without_results() -> None:
    bench = _bench_module()
    empty = examples.benchmark_runs()
    empty["results"] = []

    def reproduce(name: str, claim: BenchmarkPredicate, busy: bool) -> ReproductionPredicate:
        raise AssertionError("nothing to reproduce")

    found = bench.cross(["sum-rows"], 1, lambda *_a: BenchmarkPredicate.from_json(empty),
                        reproduce, lambda _m: None)
    assert "| sum-rows | busy -> quiet | 1 no results | — |" in bench._cross_table(found)


@pytest.mark.slow
def test_tiny_cross_experiment_runs_and_prints_its_table() -> None:
    """Issue 25's busy/quiet experiment, tiny, for real: the command runs and its table has
    one row per direction, each accounting for every claim (1 honest, 1 inflated). Which
    verdict each gets depends on the machine's load, so only the counts are checked; the
    verdicts' bookkeeping is tested on injected measurements above."""
    out = subprocess.run([sys.executable, "benchmarks/bench_reproduce_stats.py", "--only",
                          "cross", "--tiny", "--time-budget", "2"],
                         capture_output=True, text=True, cwd=ROOT, timeout=400, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "| kernel | published -> reproduced | honest claims | 1.25x-inflated claim |" \
        in out.stdout
    word = r"(\d+) (?:refuted|confirmed|unsupported|inconclusive)"
    for direction in ("busy -> quiet", "quiet -> busy"):
        row = next(line for line in out.stdout.splitlines()
                   if line.startswith(f"| sum-rows | {direction} |"))
        honest, inflated = row.split(" | ")[2:4]
        assert sum(map(int, re.findall(word, honest))) == 1, row
        assert sum(map(int, re.findall(word, inflated))) == 1, row


def test_performance_page_gives_the_thresholds_the_code_uses_and_the_full_runs_command() -> None:
    """docs/performance.md says where each threshold comes from, with the code's own values, and
    gives the command of the busy/quiet table, which the bench's parser accepts."""
    from verifier import stats
    from verifier.benchmark import _conditions as cond

    text = (ROOT / "docs" / "performance.md").read_text()
    table = text[text.index("\n### Where the thresholds come from\n"):]
    row = {line.split(" | ")[0].strip("| `"): line for line in table.splitlines()
           if line.startswith("| `")}
    assert f"| {100 * stats.DEFAULT_TOLERANCE:g} % |" in row["verifier.stats.DEFAULT_TOLERANCE"]
    assert f"| {100 * stats.DEFAULT_CONFIDENCE:g} % |" in row["verifier.stats.DEFAULT_CONFIDENCE"]
    assert f"| {100 * stats.SIGMA_BETWEEN:g} % (log units) |" in row["verifier.stats.SIGMA_BETWEEN"]
    assert f"| {100 * stats.SIGMA_FLOOR:g} % |" in row["verifier.stats.SIGMA_FLOOR"]
    assert f"| {stats.MAX_LOOKS} |" in row["verifier.stats.MAX_LOOKS"]
    conditions = next(v for k, v in row.items() if k.startswith("verifier.benchmark._conditions"))
    assert (f"{100 * cond.BUSY_APART:g} % pinned-CPU load, {cond.RUNNABLE_APART:g} runnable "
            f"task, {100 * cond.FREQ_APART:g} % frequency, {100 * cond.STEAL_APART:g} % steal"
            ) in conditions
    full = "benchmarks/bench_reproduce_stats.py --only cross --cycles 10"
    assert full in text
    assert full.split("py ")[1] in (_bench_module().__doc__ or "")  # the bench documents it
    issue42 = "--lies sum-rows,softmax-rows --busy all --cycles 10"  # both cores busy
    assert issue42 in text and issue42 in (_bench_module().__doc__ or "")


def test_sitting_shift_estimate_on_injected_sittings() -> None:
    """The between-sitting estimate on made-up sittings: a pure shift of 10 % between two
    noiseless sittings is all between-sitting; runs whose own spread explains the shift
    leave (about) nothing beyond it."""
    import math

    m = _bench_module()
    shift, noise = m.sitting_shift([1.1] * 5, [1.0] * 5)
    assert shift == pytest.approx(math.log(1.1)) and noise == 0.0
    line = m.between_line([(shift, noise), (-shift, noise)])
    assert f"rms {100 * math.log(1.1):.1f} %" in line and "spread 9.5 % (rms)" in line
    wide = [1.3, 0.7, 1.2, 0.8, 1.0]
    d, v = m.sitting_shift(wide, [1.0] * 5)
    assert v > d * d  # the runs' spread explains this shift
    assert "spread 0.0 % (rms)" in m.between_line([(d, v)])
    assert "no honest cycle" in m.between_line([])


def test_shift_bound_and_table_on_injected_speedups() -> None:
    """Experiment 4's arithmetic: the mean log shift of busy from quiet, round by round, and
    the 99 % t bound of its size (what a `MARGIN_FOR` value must cover)."""
    import math

    bench = _bench_module()
    quiet = [1.0, 1.1, 0.9, 1.0]
    busy = [1.1, 1.21, 0.99, 1.1]  # every round 10 % higher: no spread, the bound is the shift
    mean, bound = bench.log_shift(quiet, busy)
    assert math.isclose(mean, math.log(1.1)) and math.isclose(bound, math.log(1.1))
    mean, bound = bench.log_shift(quiet, [1.0, 1.2, 0.9, 1.05])  # rounds disagree
    assert 0 < mean < bound
    # one round: no spread to bound it by
    assert bench.log_shift([1.0], [1.1])[1] == math.inf
    rows = [{"kernel": "sum-rows", "speedups": {"quiet": quiet, "pinned_cpu_busy": busy,
                                                "runnable": quiet, "both": busy}}]
    table = bench._shift_table(rows)
    assert "| sum-rows | 1.000x, 8.2 % | +10.0 % [10.0 %] | +0.0 % [0.0 %] | +10.0 % [10.0 %] |" \
        in table
    # the loads are those a reproducer recreates from a claim's conditions
    assert bench.SHIFT_SETTINGS["quiet"] is None
    assert bench.SHIFT_SETTINGS["pinned_cpu_busy"] == {"pinned_cpu_busy": 1.0, "runnable": 1.0}


def test_estimator_spreads_against_a_naive_reference() -> None:
    """Every reading of runs whose baseline is c times the kernel at every batch is c, so
    their spread is the sd of log c over the runs (a naive statistics.stdev), whatever the
    batches' own noise; the baseline regression finds a planted slope with no residual."""
    import math
    import statistics

    mod = _bench_module()
    factors = (0.70, 0.80, 0.95, 1.05)
    runs = []
    for i, c in enumerate(factors):
        kernel = [100.0 + 7 * ((j * (i + 3)) % 11) for j in range(40)]
        runs.append((kernel, [c * k for k in kernel]))
    want = statistics.stdev(math.log(c) for c in factors)
    got = mod.estimator_spreads(runs)
    assert set(got) == set(mod.ESTIMATORS)
    assert all(abs(v - want) < 1e-9 for v in got.values()), got
    planted = [(b, math.exp(0.1 + 0.48 * math.log(b))) for b in (300.0, 350.0, 420.0, 520.0)]
    slope, resid = mod.baseline_regression(planted)
    assert abs(slope - 0.48) < 1e-9 and resid < 1e-9
    with pytest.raises(ValueError):
        mod.estimator_spreads(runs[:1])


@pytest.mark.slow
def test_tiny_estimators_experiment_runs_and_prints_its_table() -> None:
    out = subprocess.run([sys.executable, "benchmarks/bench_reproduce_stats.py", "--only",
                          "estimators", "--tiny"],
                         capture_output=True, text=True, cwd=ROOT, timeout=240, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "| ratio of medians (the claim's) | " in out.stdout
    assert "log speed-up on log baseline median: slope " in out.stdout
