"""benchmark: `ktl bench`, the kernel timed against its baseline from outside.

Holds one bench run (`_bench`: interleaved kernel and baseline processes, the
roofline floor, outputs of timed calls re-checked), one shape's measurement loop
(`_loop`: batches on the parent's clock, overhead subtracted) and a claim's k
independent runs pinned to one CPU (`_runs`).

May import: the pure model, `sandbox`, `worker` and `runtimes`. Not `checks` or
`reproduce`.
"""

from __future__ import annotations

from verifier.benchmark._bench import BenchReport, ShapeResult, bench, machine_peaks
from verifier.benchmark._conditions import Conditions, conditions_differ, probe
from verifier.benchmark._runs import DEFAULT_RUNS, RunSet, bench_runs

__all__ = ["DEFAULT_RUNS", "BenchReport", "Conditions", "RunSet", "ShapeResult", "bench",
           "bench_runs", "conditions_differ", "machine_peaks", "probe"]
