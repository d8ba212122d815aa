"""`ktl check`'s report: the budgets, one row per check, the verification/v1 body."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from attest._errors import ValidationError
from attest.predicates import CHECK_OUTCOMES, CheckOutcome, Fault, FaultKind
from verifier.errors import VerifierError

__all__ = [
    "BUDGETS", "CASE_FAULTS", "CHECK_ADDRESS_SPACE", "F32", "MAX_DETAIL", "OUTCOMES", "Budget",
    "CheckReport", "CheckResult", "Progress", "make_fault", "shape_text",
]


OUTCOMES = CHECK_OUTCOMES
CASE_FAULTS: Mapping[str, FaultKind] = {
    "crash": "crash", "hang": "hang", "memory": "unbounded_alloc", "load": "load",
    "not_run": "not_run", "bad_answer": "bad_answer", "oob_read": "oob_read",
    "oob_write": "oob_write", "input_mutated": "input_mutated",
    "sandbox_violation": "sandbox_violation", "output_flood": "output_flood"}
F32 = NDArray[np.float32]
Progress = Callable[[str], None]


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


@dataclass(frozen=True)
class CheckResult:
    """One row of the report: a check, its outcome and its evidence."""

    name: str
    outcome: CheckOutcome
    detail: str
    inputs: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    fault: Fault | None = None
    """What a failed check found, typed (decide on this, never on `detail`)."""

    def __post_init__(self) -> None:
        clean = "".join(ch if ch.isprintable() else " " for ch in self.detail)
        object.__setattr__(self, "detail", clean[:MAX_DETAIL])

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "outcome": self.outcome, "detail": self.detail,
               "inputs": self.inputs, "metrics": self.metrics}
        if self.fault is not None:
            out["fault"] = self.fault.to_json()
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> CheckResult:
        outcome = obj.get("outcome")
        if outcome not in OUTCOMES:
            raise VerifierError(f"check outcome must be one of {OUTCOMES}")
        fault = obj.get("fault")
        try:
            parsed = None if fault is None else Fault.from_json(fault)
        except ValidationError as exc:
            raise VerifierError(f"check {obj.get('name')!r}: bad fault record: {exc}") from exc
        return cls(str(obj["name"]), outcome, str(obj["detail"]),
                   dict(obj.get("inputs", {})), dict(obj.get("metrics", {})), parsed)


def make_fault(kind: FaultKind, dims: Mapping[str, int] | None = None) -> Fault:
    return Fault(kind=kind, shape=None if dims is None else dict(dims))


@dataclass(frozen=True)
class CheckReport:
    """The outcome of `check`; `to_predicate()` is the verification/v1 body."""

    kernel: str
    op: str
    budget: str
    seed: int
    environment: dict[str, Any]
    checks: tuple[CheckResult, ...]
    torch: Mapping[str, Any] | None = None
    """For op 'torch': the reference's digest, torch's version, dtype, tolerance and weight
    seeds (attest.predicates.TorchOp)."""
    kernel_ref: Mapping[str, Any] | None = None
    """The folder checked: name, version, source_sha256 (verification/v1 `kernel`)."""

    @property
    def passed(self) -> bool:
        return all(c.outcome in ("pass", "skip") for c in self.checks)

    @property
    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if c.outcome in ("fail", "error")]

    def get(self, name: str) -> CheckResult:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_predicate(self) -> dict[str, Any]:
        body: dict[str, Any] = {"environment": self.environment, "budget": self.budget, "seed": self.seed,
                "checks": [c.to_json() for c in self.checks],
                "verdict": "pass" if self.passed else "fail"}
        if self.torch is not None:
            body["torch"] = dict(self.torch)
        from attest.ops import CATALOGUE_VERSION

        body["catalogue_version"] = CATALOGUE_VERSION
        if self.kernel_ref is not None:
            body["kernel"] = dict(self.kernel_ref)
        return body

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "op": self.op, "predicate": self.to_predicate()}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> CheckReport:
        pred = obj["predicate"]
        return cls(str(obj["kernel"]), str(obj["op"]), str(pred["budget"]), int(pred["seed"]),
                   dict(pred["environment"]),
                   tuple(CheckResult.from_json(c) for c in pred["checks"]),
                   dict(pred["torch"]) if pred.get("torch") is not None else None,
                   dict(pred["kernel"]) if isinstance(pred.get("kernel"), dict) else None)



def shape_text(dims: Mapping[str, int]) -> str:
    return "{" + ",".join(f"{k}={v}" for k, v in dims.items()) + "}"
