"""`ktl check`'s plan: which cases run, on which shapes and inputs, with which prefill."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from verifier.checks._report import F32, Budget
from verifier.kernel import KernelSpec
from verifier.ops import OpSpec
from verifier.runtimes import Artifact
from verifier.worker import Abut, Escape, Layout, Markers, layout

__all__ = ["PREFILLS", "Case", "CaseFailure", "KernelRun", "Prefill", "Step", "aligned_shape",
           "case_layout", "mid_shape", "plan_cases"]

Prefill = Literal["poison", "zero", "garbage"]
CaseFailure = Literal["crash", "hang", "memory", "load", "not_run", "bad_answer", "oob_read",
                    "oob_write", "input_mutated", "sandbox_violation", "output_flood"]
"""How one case's call went wrong in the harness (`Case.fault`); the row reports it as one of
attest's `FaultKind` values (`checks._report.CASE_FAULTS`), the only set named FaultKind."""


@dataclass(frozen=True)
class KernelRun:
    """A built kernel as the checks run it: its library and entry symbol, its op, the folder
    its sandboxed children work in, the run's markers (guard and poison values), the folders
    the sandbox may read and whether it runs on a GPU."""

    library: Path
    entry: str
    op: OpSpec
    workdir: Path
    markers: Markers
    readable: tuple[Path, ...] = ()
    gpu: bool = False

    @classmethod
    def of(cls, artifact: Artifact, spec: KernelSpec, op: OpSpec, workdir: Path,
           markers: Markers) -> KernelRun:
        """The run of `artifact` (built from `spec`): it may read its own folder only."""
        return cls(artifact.path, artifact.entry_symbol or spec.entry, op, workdir, markers,
                   (artifact.path.parent,), artifact.gpu)


@dataclass
class Step:
    """One call: its inputs, which of the case's arenas it uses, how outputs are prefilled."""

    inputs: list[F32]
    arena: int
    prefill: Prefill = "poison"


@dataclass
class Case:
    check: str
    dims: dict[str, int]
    steps: list[Step]
    pair_from: int | None = None
    """Steps from this index on run in one command from two threads started together:
    even ones on the first thread, odd ones on the second."""
    overlaps_needed: int = 0
    """The paired command is repeated (same inputs, its steps appended) until this many
    pairs of calls overlapped in time, or `pair_commands` commands ran."""
    pair_commands: int = 1
    overlaps: int = 0
    """Pairs of calls (one per thread) seen overlapping in time, over every paired command."""
    paired_calls: int = 0
    dumps: list[NDArray[np.uint8]] = field(default_factory=list)
    failure: str | None = None
    fault: CaseFailure | None = None
    escaped: list[Escape] = field(default_factory=list)
    abut: Abut | None = None
    """Which end of every buffer touches a guard page in the kernel's process (None: no
    guard pages, as on a GPU runtime whose wrapper copies the canaries too)."""

    def fail(self, kind: CaseFailure, why: str) -> None:
        self.fault, self.failure = kind, why


def case_layout(op: OpSpec, case: Case) -> Layout:
    """The arena layout of each of `case`'s calls."""
    return layout(op, case.dims, case.abut)




def aligned_shape(op: OpSpec) -> dict[str, int]:
    base = {"M": 64, "N": 64, "K": 128, "R": 16, "C": 256, "B": 1, "H": 2, "S": 64, "D": 32}
    return {d: base[d] for d in op.dims}


def mid_shape(op: OpSpec) -> dict[str, int]:
    sizes = [(op.nbytes(s), i) for i, s in enumerate(op.edge_shapes) if op.nbytes(s)]
    return dict(op.edge_shapes[max(sizes)[1]])


PREFILLS: tuple[Prefill, ...] = ("poison", "poison", "poison", "zero", "garbage")
"""How outputs are prefilled before a call, drawn per call: mostly this run's random
poison (to see unwritten outputs), sometimes zeros or random values, so no prefill
is a signal that the harness is calling."""


def plan_cases(op: OpSpec, budget: Budget, rng: np.random.Generator) -> list[Case]:
    cases: list[Case] = []

    def step(arrays: list[F32], arena: int) -> Step:
        return Step(arrays, arena, PREFILLS[int(rng.integers(0, len(PREFILLS)))])

    def single(check: str, dims: Mapping[str, int], arrays: list[F32]) -> None:
        cases.append(Case(check, dict(dims), [step(arrays, 0)]))

    for dims in [aligned_shape(op), *op.random_shapes(rng, budget.random)]:
        single("correctness.random", dims, op.random_inputs(dims, rng))
    edges = list(op.edge_shapes)
    if budget.edge is not None:
        empties = [s for s in edges if 0 in s.values()]
        edges = [s for s in edges if s not in empties][: budget.edge - 1] + empties[:1]
    for dims in edges:
        single("correctness.edge", dims, op.random_inputs(dims, rng))
    for dims in op.random_shapes(rng, budget.large):
        single("correctness.large", dims, op.random_inputs(dims, rng, scale=op.large_scale))
    for dims in [*op.bench_shapes, *op.long_shapes]:  # where speed is claimed; long reductions
        single("correctness.claimed", dims, op.random_inputs(dims, rng))
    n_in = len(op.inputs)
    plants = [[i] for i in range(n_in)] + ([list(range(n_in))] if n_in > 1 else [])
    for k, dims in enumerate(op.random_shapes(rng, max(budget.special, len(plants)))):
        single("special_values", dims, op.special_inputs(dims, rng, plants[k % len(plants)]))
    mid = mid_shape(op)
    same = op.random_inputs(mid, rng)
    cases.append(Case("determinism", mid, [step(same, i) for i in range(budget.repeats)]))
    for dims in [mid, *op.random_shapes(rng, budget.state - 1)]:
        first, second = op.random_inputs(dims, rng), op.random_inputs(dims, rng)
        again = step(second, 0)
        # the second inputs also at another buffer (no draw: the plan's draws stay as they
        # were): a wrong answer there too is a wrong kernel, not state kept (issue 42)
        cases.append(Case("state.reuse", dict(dims), [step(first, 0), again,
                                                      Step(second, 1, again.prefill)]))
    for dims in [dict(op.bench_shapes[0]), mid][: budget.concurrency_shapes]:
        a, b = op.random_inputs(dims, rng), op.random_inputs(dims, rng)
        steps = [step(a, 0), step(b, 1)]
        for k in range(budget.concurrency_pairs):
            steps += [step(a, 2 + 2 * k), step(b, 3 + 2 * k)]
        cases.append(Case("concurrency", dict(dims), steps, pair_from=2,
                          overlaps_needed=budget.concurrency_pairs,
                          pair_commands=budget.concurrency_commands))
    for dims in op.long_shapes:  # drawn last: the draws above stay as they were
        # same-sign terms: the tolerance, tied to the sum of the terms' magnitudes, is then
        # tied to the result itself (zero-mean terms cancel to about sqrt(n) of it, which
        # left room for float16 running sums at 131,072 terms)
        single("correctness.claimed", dims, [np.abs(a) for a in op.random_inputs(dims, rng)])
    for i, case in enumerate(cases):  # both ends of every buffer meet a guard page somewhere
        case.abut = "end" if i % 2 == 0 else "start"
    return cases
