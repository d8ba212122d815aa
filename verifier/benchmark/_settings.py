"""`BenchSettings`: what one benchmark run measures and how, with the one set of defaults.

`bench`, `bench_runs`, the torch bench, `reproduce_kernel` and `ktl bench` all take or
build this object; none declares a default of its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from verifier.errors import VerifierError

__all__ = ["BenchSettings"]


@dataclass(frozen=True)
class BenchSettings:
    """The shapes (None: the op's bench shapes) and seed (None: fresh, recorded); the seconds
    of measuring per run, split across the shapes; the target half-width of the speed-up's
    95% interval and the widest one still trusted; the bounds on timed pairs; warm-up calls;
    the least seconds per shape before the interval may stop the loop; the threads each side
    (OpenMP and BLAS; None: every core) and, for op 'torch', whether torch.compile's baseline
    is timed too. Where it runs: `device` auto (a GPU where usable, else the host path), cuda
    (the GPU, refused without one) or cpu (a torch/triton kernel on the device path on
    torch's CPU build); `cold`: the L2 flushed between calls (the device path only).
    VerifierError when a value is out of range."""

    shapes: Sequence[Mapping[str, int]] | None = None
    seed: int | None = None
    time_budget_s: float = 10.0
    target: float = 0.05
    max_halfwidth: float = 0.15
    min_reps: int = 20
    max_reps: int = 5000
    warmup: int = 5
    min_time_s: float = 1.0
    threads: int | None = 1
    compile_baseline: bool = False
    device: Literal["auto", "cuda", "cpu"] = "auto"
    cold: bool = False
    until_agree: int = 0
    """`bench_runs` only: while its runs disagree, as many more as it was asked for at a time,
    up to this many in all (0: never; `ktl publish` asks `PUBLISH_MAX_RUNS`)."""

    def __post_init__(self) -> None:
        if self.device not in ("auto", "cuda", "cpu"):
            raise VerifierError(f"device must be auto, cuda or cpu, got {self.device!r}")
        if self.threads is not None and not 1 <= self.threads <= 1024:
            raise VerifierError("threads must be between 1 and 1024")
        if not (0 < self.target < 1 and 0 < self.time_budget_s <= 3600
                and 2 <= self.min_reps <= self.max_reps <= 10**6 and 0 <= self.warmup <= 1000
                and 0 <= self.until_agree <= 1000):
            raise VerifierError("bench parameters out of range")

    @property
    def cores(self) -> int:
        """Threads each side: `threads`, or every core of this machine where it is None."""
        return self.threads or os.cpu_count() or 1
