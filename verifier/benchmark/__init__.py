"""benchmark: `ktl bench`, the kernel timed against its baseline from outside.

Holds, in three levels (siblings never import each other; what they share lies below them):
- at the bottom, what every strategy reports and is given: `_report` (`BenchReport`,
  `Findings`, the bootstrap interval, the machine's peaks), `_settings` (`BenchSettings`, the
  one set of defaults), `_cost` (how a kernel's CPU was accounted), `_loop` (one shape's
  measurement loop: batches on the parent's clock, overhead subtracted), `_torch_pool` and
  `_torch_run` (the torch strategies' input sets, run and report), `_device_sides` (a torch
  process as a `DeviceSide`), `_conditions` (the machine's conditions, where a reproducer
  runs) and `_ballast` (the spinners that recreate a claim's other load);
- the strategies, one per module: `_host_bench` (a C-ABI kernel in the native worker against
  NumPy), `_torch_bench` (a torch/triton module against its reference in PyTorch eager),
  `_device_bench` (a torch/triton module against its reference on one device, through
  `verifier.device`) and `_cabi_bench` (a cuda kernel's C ABI on device pointers against
  PyTorch's op, built on `_device_bench`'s timing of a module);
- on top, `_route` (`bench`: picks the strategy), and `_runs` (a claim's k independent runs of
  `bench`, pinned to one CPU).

May import: the pure model, `sandbox`, `worker`, `runtimes` and `device`. Not `checks`
or `reproduce`.
"""

from __future__ import annotations

from verifier.benchmark._conditions import Apart, Conditions, conditions_differ, probe
from verifier.benchmark._conditions import merge as merge_conditions
from verifier.benchmark._report import BenchReport, machine_peaks
from verifier.benchmark._route import bench
from verifier.benchmark._runs import (
    DEFAULT_RUNS,
    PUBLISH_MAX_RUNS,
    RunSet,
    bench_runs,
    over_runs,
    runs_disagree,
)
from verifier.benchmark._settings import BenchSettings

__all__ = ["DEFAULT_RUNS", "PUBLISH_MAX_RUNS", "Apart", "BenchReport", "BenchSettings",
           "Conditions", "RunSet", "bench", "bench_runs", "conditions_differ", "machine_peaks", "merge_conditions", "over_runs",
           "probe", "runs_disagree"]
