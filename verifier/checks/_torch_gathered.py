"""What a torch check gathers for its rows: the outcomes of its calls by group, the groups
that failed (`SessionFailure`), the escapes and overlaps seen, the weight seeds used. The
bottom of the torch check: `_torch_suite` fills a `Gathered`, `_torch_rows` judges it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attest.predicates import FaultKind
from verifier.runtimes import (
    Call,
    CallOutcome,
    Footprint,
    SizeConstant,
    TorchBuild,
    TorchKernel,
    TorchSession,
)
from verifier.tensors import draw_input, draw_large, draw_spread
from verifier.worker import (
    BadAnswer,
    Escape,
    KernelRaised,
    WorkerGone,
    WorkerHung,
    WorkerOverMemory,
)

__all__ = ["CALL_TIMEOUT_S", "LARGE", "Gathered", "Recipe", "SessionFailure"]

CALL_TIMEOUT_S = 60.0
"""The least time a group of calls is given before it is called a hang."""
HANG_FACTOR = 20.0
"""A group of calls is given this many times the slowest call seen so far in the check, each
(`Gathered.timeout_s`): on a loaded machine a big problem's calls are slow, not hung (a
level-1 max-pooling solution was failed as a hang at 60 s while other work held the CPUs)."""
MAX_CALL_TIMEOUT_S = 900.0
LARGE = "large-squares"
"""`Gathered.draw`'s spread for correctness.large."""


@dataclass(frozen=True)
class SessionFailure:
    """A group of calls that ended in a crash, hang, bad answer or exception."""

    kind: FaultKind
    detail: str

    @classmethod
    def of(cls, exc: Exception, session: TorchSession) -> SessionFailure:
        child = session.candidate
        limits = session.limits
        if isinstance(exc, WorkerHung):
            return cls("hang", f"hang: no answer within {exc.limit_s:g} s")
        if isinstance(exc, WorkerOverMemory):
            return cls("unbounded_alloc", f"unbounded allocation: {exc}")
        if isinstance(exc, BadAnswer):
            return cls("bad_answer", f"malformed answer from the kernel's process: {exc}")
        if isinstance(exc, KernelRaised):
            return cls("crash", f"the module raised: {exc}")
        result = exc.result if isinstance(exc, WorkerGone) else None
        if result is None and child is not None:
            child.close()
            result = child.result
        why = (result.describe(limits) if result is not None
               else "the process ended")
        return cls("crash", f"the kernel's process ended: {why}")



@dataclass(frozen=True)
class Recipe:
    """What starts a torch session of this check again at other sizes: the kernel, its built
    extensions, the check's work folder, the reference's size constants."""

    kernel: TorchKernel
    build: TorchBuild
    work: Path
    constants: tuple[SizeConstant, ...] = ()
    past: Mapping[str, Footprint | None] = field(default_factory=dict)
    """The probe's footprints with one constant set past 4,608 (`ProblemProbe.past`)."""


@dataclass
class Gathered:
    """Everything a torch check gathered, for the rows."""

    session: TorchSession
    rng: np.random.Generator
    escapes: list[Escape] = field(default_factory=list)
    outcomes: dict[str, list[tuple[str, CallOutcome]]] = field(default_factory=dict)
    failures: dict[str, SessionFailure] = field(default_factory=dict)
    init_seeds: list[int] = field(default_factory=list)
    loaded: list[dict[str, Any]] = field(default_factory=list)
    overlaps: int = 0
    reference_in_threads: str = ""
    """Why the problem's own module cannot be held to answering two threads as one: "random"
    (its answer depends on torch's generator, `draws_randomly`) or "not_reentrant" (its own
    two-thread answers differ, `reference_alike_in_threads`); asked only where the
    candidate's two-thread answers differed from its one-thread ones."""
    restarts: int = 0
    recipe: Recipe | None = None
    per_call_s: float = 0.0
    """The slowest wall time per call (candidate and reference) of a group run so far."""
    notes: dict[str, list[str]] = field(default_factory=dict)
    """Per row, what it could not exercise and why ("dim held at 2,048: ...")."""

    def draw(self, shapes: list[tuple[int, ...]] | None = None,
             spread: str | None = None) -> list[Any]:
        """One call's inputs at `shapes` (default the example's), drawn like the example or,
        with `spread`, from that distribution (`verifier.tensors.DISTRIBUTIONS`: a kernel
        wrong outside the example's range, e.g. [0, 1) of torch.rand, is caught there), or
        `LARGE` (`verifier.tensors.draw_large`, for correctness.large)."""
        problem = self.session.problem
        out: list[Any] = []
        for i, spec in enumerate(problem.inputs):
            if spec.kind == "value":
                out.append(spec.value)
                continue
            shape = spec.shape if shapes is None else shapes[i]
            out.append(draw_input(spec.stats, shape, spec.dtype, self.rng) if spread is None
                       else draw_large(spec.stats, shape, spec.dtype, self.rng)
                       if spread == LARGE else
                       draw_spread(spec.stats, shape, spec.dtype, spread, self.rng))
        return out

    def timeout_s(self, calls: int) -> float:
        """How long a group of `calls` may take before it is a hang: CALL_TIMEOUT_S at least,
        HANG_FACTOR times the slowest call seen so far each, MAX_CALL_TIMEOUT_S at most."""
        return min(MAX_CALL_TIMEOUT_S,
                   max(CALL_TIMEOUT_S, HANG_FACTOR * self.per_call_s * max(1, calls)))

    def calls(self, group: str, calls: list[Call], label: str, threads: int = 1) -> list[CallOutcome]:
        start = time.monotonic()
        got = self.session.run(calls, self.timeout_s(len(calls)), threads, self.escapes)
        self.per_call_s = max(self.per_call_s, (time.monotonic() - start) / max(1, len(calls)))
        self.outcomes.setdefault(group, []).extend((label, o) for o in got)
        return got
