"""`ktl check`'s report: the budgets, one row per check, the verification/v1 body."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from attest import ValidationError
from attest.predicates import (
    CHECK_OUTCOMES,
    Check,
    CheckInputs,
    CheckOutcome,
    Environment,
    Fault,
    FaultKind,
    MeasuredKernel,
    TorchOp,
    VerificationPredicate,
)
from verifier.errors import VerifierError

__all__ = [
    "BUDGETS", "CASE_FAULTS", "CHECK_ADDRESS_SPACE", "F32", "MAX_DETAIL", "OUTCOMES", "Budget",
    "CheckReport", "check_row", "make_fault", "shape_text",
]


OUTCOMES = CHECK_OUTCOMES
CASE_FAULTS: Mapping[str, FaultKind] = {
    "crash": "crash", "hang": "hang", "memory": "unbounded_alloc", "load": "load",
    "not_run": "not_run", "bad_answer": "bad_answer", "oob_read": "oob_read",
    "oob_write": "oob_write", "input_mutated": "input_mutated",
    "sandbox_violation": "sandbox_violation", "output_flood": "output_flood"}
F32 = NDArray[np.float32]


@dataclass(frozen=True)
class Budget:
    random: int
    edge: int | None
    large: int
    special: int
    repeats: int
    state: int
    asan_shapes: int
    tsan_shapes: int
    step_wall_s: float
    concurrency_shapes: int = 1
    concurrency_pairs: int = 4
    """Rounds whose two calls must have overlapped in time for the concurrency row to pass."""
    concurrency_commands: int = 4
    """Two-thread commands (of `concurrency_pairs` rounds each) tried per shape to see them."""
    huge_index: bool = False


BUDGETS: Mapping[str, Budget] = {
    "quick": Budget(random=3, edge=7, large=1, special=2, repeats=2, state=1, asan_shapes=4,
                    tsan_shapes=1, step_wall_s=5.0, concurrency_shapes=1, concurrency_pairs=8),
    "full": Budget(random=10, edge=None, large=3, special=4, repeats=3, state=2, asan_shapes=12,
                   tsan_shapes=2, step_wall_s=20.0, concurrency_shapes=2, concurrency_pairs=16,
                   concurrency_commands=6,
                   huge_index=True),
}
MAX_DETAIL = 1500
CHECK_ADDRESS_SPACE = 1024**3
"""Address-space limit of a check child: check shapes are small (the worker needs ~150 MiB)."""


def check_row(name: str, outcome: CheckOutcome, detail: str,
              inputs: Mapping[str, Any] | None = None, metrics: Mapping[str, float] | None = None,
              fault: Fault | None = None) -> Check:
    """One row of the report, as attest's `Check` (validated when built): a check, its
    outcome, its evidence, and what a failed check found, typed in `fault` (decide on that,
    never on `detail`). The detail may quote the kernel's output: it is made printable and
    cut to MAX_DETAIL characters."""
    clean = "".join(ch if ch.isprintable() else " " for ch in detail)[:MAX_DETAIL]
    return Check(name=name, outcome=outcome, detail=clean,
                 inputs=CheckInputs.from_json(dict(inputs or {}), f"check {name}: inputs"),
                 metrics=dict(metrics or {}), fault=fault)


def make_fault(kind: FaultKind, dims: Mapping[str, int] | None = None) -> Fault:
    return Fault(kind=kind, shape=None if dims is None else dict(dims))


@dataclass(frozen=True)
class CheckReport:
    """The outcome of `check`; `to_predicate()` is the verification/v1 body."""

    kernel: str
    op: str
    budget: str
    seed: int
    environment: Environment
    checks: tuple[Check, ...]
    torch: TorchOp | None = None
    """For op 'torch': the reference's digest, torch's version, dtype, tolerance and weight
    seeds."""
    kernel_ref: MeasuredKernel | None = None
    """The folder checked: name, version, source_sha256 (verification/v1 `kernel`)."""

    @property
    def passed(self) -> bool:
        return all(c.outcome in ("pass", "skip") for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.outcome in ("fail", "error")]

    def get(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_predicate(self) -> VerificationPredicate:
        from attest.ops import CATALOGUE_VERSION

        return VerificationPredicate(environment=self.environment, budget=self.budget,
                                     seed=self.seed, checks=self.checks,
                                     verdict="pass" if self.passed else "fail", torch=self.torch,
                                     catalogue_version=CATALOGUE_VERSION, kernel=self.kernel_ref)

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "op": self.op, "predicate": self.to_predicate().to_json()}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> CheckReport:
        try:
            pred = VerificationPredicate.from_json(obj["predicate"])
        except ValidationError as exc:
            raise VerifierError(f"bad check report: {exc}") from exc
        return cls(str(obj["kernel"]), str(obj["op"]), pred.budget, pred.seed, pred.environment,
                   pred.checks, pred.torch, pred.kernel)


def shape_text(dims: Mapping[str, int]) -> str:
    return "{" + ",".join(f"{k}={v}" for k, v in dims.items()) + "}"
