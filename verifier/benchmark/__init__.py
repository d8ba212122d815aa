"""benchmark: `ktl bench`, the kernel timed against its baseline from outside.

Holds one bench run (`_bench`: interleaved kernel and baseline processes, the
roofline floor, outputs of timed calls re-checked), one shape's measurement loop
(`_loop`: batches on the parent's clock, overhead subtracted) and a claim's k
independent runs pinned to one CPU (`_runs`), the machine's conditions around them and
where a reproducer runs to measure under a claim's (`_conditions`), the spinners that
recreate a claim's other load (`_ballast`), and what every run is given: `BenchSettings`
(`_settings`, the one set of defaults). On a GPU: `_device_bench` (a torch/triton
kernel against its reference on the same device, through `verifier.device`),
`_device_sides` (a torch process as a `DeviceSide`), `_cabi_bench` (a cuda kernel's C
ABI on device pointers against PyTorch's built-in op).

May import: the pure model, `sandbox`, `worker`, `runtimes` and `device`. Not `checks`
or `reproduce`.
"""

from __future__ import annotations

from verifier.benchmark._bench import BenchReport, bench, machine_peaks
from verifier.benchmark._conditions import Apart, Conditions, conditions_differ, probe
from verifier.benchmark._runs import DEFAULT_RUNS, RunSet, bench_runs
from verifier.benchmark._settings import BenchSettings

__all__ = ["DEFAULT_RUNS", "Apart", "BenchReport", "BenchSettings", "Conditions", "RunSet", "bench",
           "bench_runs", "conditions_differ", "machine_peaks", "probe"]
