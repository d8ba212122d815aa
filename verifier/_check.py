"""`ktl check`: the verification suite, producing a `verification/v1` body.

The kernel runs first, in its own sandboxed child, on inputs the parent wrote;
the child dumps whole arenas (guard regions included); only then does the parent
compute the float64 reference and judge. Checks:

- build: the release build with the manifest's flags (relaxed math is recorded);
- correctness.random / correctness.edge / correctness.large: fresh random inputs
  (seed recorded), edge shapes (1, primes, non-multiples of 8/16/32/64, empty),
  large magnitudes; within the op's tolerance;
- special_values: NaN, +-Inf, denormals and +-0 handled as the reference does;
- inputs.unchanged, outputs.poisoned, guards.canaries: over every call;
- determinism: bitwise identical outputs for identical inputs;
- state.reuse: the same buffers called again with new contents;
- sanitizer.asan_ubsan and sanitizer.tsan (when the kernel uses threads).
"""

from __future__ import annotations

import re
import secrets
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from attest._errors import ValidationError
from attest.predicates import CHECK_OUTCOMES, CheckOutcome, Fault, FaultKind
from verifier._arena import Layout, Markers, guard_pattern, layout
from verifier._check_run import Case, Prefill, Step, run_cases
from verifier._errors import BuildError, RuntimeUnavailableError, VerifierError
from verifier._overflow import HUGE_SHAPES, index_overflow
from verifier.compare import Comparison, compare_output
from verifier.environment import environment_fingerprint
from verifier.kernel import KernelSpec
from verifier.ops import OPS, OpSpec
from verifier.runtime import Artifact, get_runtime, write_driver_cases
from verifier.sandbox import (
    ChildResult,
    Limits,
    base_env,
    run_sandboxed,
    sandbox_detail,
    sandbox_metrics,
)

__all__ = ["BUDGETS", "OUTCOMES", "CheckReport", "CheckResult", "check"]

OUTCOMES = CHECK_OUTCOMES
CASE_FAULTS: Mapping[str, FaultKind] = {"crash": "crash", "hang": "hang", "memory": "unbounded_alloc",
                                        "load": "load", "not_run": "not_run"}
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
    huge_index: bool = False


BUDGETS: Mapping[str, Budget] = {
    "quick": Budget(random=3, edge=7, large=1, special=2, repeats=2, state=1, asan_shapes=4,
                    tsan_shapes=1, step_wall_s=5.0, concurrency_shapes=1, concurrency_pairs=8),
    "full": Budget(random=10, edge=None, large=3, special=4, repeats=3, state=2, asan_shapes=12,
                   tsan_shapes=2, step_wall_s=20.0, concurrency_shapes=2, concurrency_pairs=16,
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


def _fault(kind: FaultKind, dims: Mapping[str, int] | None = None) -> Fault:
    return Fault(kind, None if dims is None else dict(dims))


@dataclass(frozen=True)
class CheckReport:
    """The outcome of `check`; `to_predicate()` is the verification/v1 body."""

    kernel: str
    op: str
    budget: str
    seed: int
    environment: dict[str, Any]
    checks: tuple[CheckResult, ...]

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
        return {"environment": self.environment, "budget": self.budget, "seed": self.seed,
                "checks": [c.to_json() for c in self.checks],
                "verdict": "pass" if self.passed else "fail"}

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "op": self.op, "predicate": self.to_predicate()}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> CheckReport:
        pred = obj["predicate"]
        return cls(str(obj["kernel"]), str(obj["op"]), str(pred["budget"]), int(pred["seed"]),
                   dict(pred["environment"]),
                   tuple(CheckResult.from_json(c) for c in pred["checks"]))


# -- the cases -----------------------------------------------------------------------


def _shape_text(dims: Mapping[str, int]) -> str:
    return "{" + ",".join(f"{k}={v}" for k, v in dims.items()) + "}"


def _aligned_shape(op: OpSpec) -> dict[str, int]:
    base = {"M": 64, "N": 64, "K": 128, "R": 16, "C": 256, "B": 1, "H": 2, "S": 64, "D": 32}
    return {d: base[d] for d in op.dims}


def _mid_shape(op: OpSpec) -> dict[str, int]:
    sizes = [(op.nbytes(s), i) for i, s in enumerate(op.edge_shapes) if op.nbytes(s)]
    return dict(op.edge_shapes[max(sizes)[1]])


PREFILLS: tuple[Prefill, ...] = ("poison", "poison", "poison", "zero", "garbage")
"""How outputs are prefilled before a call, drawn per call: mostly this run's random
poison (to see unwritten outputs), sometimes zeros or random values, so no prefill
is a signal that the harness is calling."""


def _plan(op: OpSpec, budget: Budget, rng: np.random.Generator) -> list[Case]:
    cases: list[Case] = []

    def step(arrays: list[F32], arena: int) -> Step:
        return Step(arrays, arena, PREFILLS[int(rng.integers(0, len(PREFILLS)))])

    def single(check: str, dims: Mapping[str, int], arrays: list[F32]) -> None:
        cases.append(Case(check, dict(dims), [step(arrays, 0)]))

    for dims in [_aligned_shape(op), *op.random_shapes(rng, budget.random)]:
        single("correctness.random", dims, op.random_inputs(dims, rng))
    edges = list(op.edge_shapes)
    if budget.edge is not None:
        empties = [s for s in edges if 0 in s.values()]
        edges = [s for s in edges if s not in empties][: budget.edge - 1] + empties[:1]
    for dims in edges:
        single("correctness.edge", dims, op.random_inputs(dims, rng))
    for dims in op.random_shapes(rng, budget.large):
        single("correctness.large", dims, op.random_inputs(dims, rng, scale=op.large_scale))
    for dims in op.random_shapes(rng, budget.special):
        single("special_values", dims, op.special_inputs(dims, rng))
    mid = _mid_shape(op)
    same = op.random_inputs(mid, rng)
    cases.append(Case("determinism", mid, [step(same, i) for i in range(budget.repeats)]))
    for dims in [mid, *op.random_shapes(rng, budget.state - 1)]:
        first, second = op.random_inputs(dims, rng), op.random_inputs(dims, rng)
        cases.append(Case("state.reuse", dict(dims), [step(first, 0), step(second, 0)]))
    for dims in [dict(op.bench_shapes[0]), mid][: budget.concurrency_shapes]:
        a, b = op.random_inputs(dims, rng), op.random_inputs(dims, rng)
        steps = [step(a, 0), step(b, 1)]
        for k in range(budget.concurrency_pairs):
            steps += [step(a, 2 + 2 * k), step(b, 3 + 2 * k)]
        cases.append(Case("concurrency", dict(dims), steps, pair_from=2))
    return cases


# -- judging ---------------------------------------------------------------------------


@dataclass
class _StepEval:
    comparisons: list[Comparison]
    outputs: list[F32]
    guard_damage: list[str]
    input_changes: list[str]
    poisoned: int


def _evaluate(op: OpSpec, case: Case, si: int, markers: Markers) -> _StepEval:
    lay: Layout = layout(op, case.dims)
    dump = case.dumps[si]
    step = case.steps[si]
    guards = lay.guard_mask()
    expected_guard = guard_pattern(lay.total, markers.guard)
    damage: list[str] = []
    changed = np.nonzero(guards & (dump != expected_guard))[0]
    if changed.size:
        for slot in lay.slots:
            before = changed[(changed < slot.offset) & (changed >= slot.offset - 256)]
            after = changed[(changed >= slot.offset + slot.nbytes) & (changed < slot.offset + slot.nbytes + 256)]
            kind = "output" if slot.is_output else "input"
            if before.size:
                damage.append(f"{before.size} guard bytes before {kind} {slot.name} "
                              f"(offsets -{slot.offset - int(before.min())}..-{slot.offset - int(before.max())})")
            if after.size:
                end = slot.offset + slot.nbytes
                damage.append(f"{after.size} guard bytes after {kind} {slot.name} "
                              f"(offsets +{int(after.min()) - end}..+{int(after.max()) - end})")
    input_changes: list[str] = []
    ins64: list[NDArray[np.float64]] = []
    for slot, given in zip([s for s in lay.slots if not s.is_output], step.inputs, strict=True):
        now = dump[slot.offset:slot.offset + slot.nbytes].view(np.float32).reshape(slot.shape)
        diff = np.nonzero(now.view(np.uint32).reshape(-1) != given.view(np.uint32).reshape(-1))[0]
        if diff.size:
            first = int(diff[0])
            input_changes.append(
                f"input {slot.name} changed at {diff.size} of {given.size} elements "
                f"(first flat index {first}: {float(given.reshape(-1)[first])!r} -> "
                f"{float(now.reshape(-1)[first])!r})")
        ins64.append(given.astype(np.float64))
    with np.errstate(all="ignore"):
        refs = op.reference(ins64, case.dims)
        tols = op.tolerance(ins64, refs, case.dims)
    comps: list[Comparison] = []
    outs: list[F32] = []
    poisoned = 0
    for slot, ref, tol in zip([s for s in lay.slots if s.is_output], refs, tols, strict=True):
        out = dump[slot.offset:slot.offset + slot.nbytes].view(np.float32).reshape(slot.shape)
        outs.append(out)
        word = markers.poison if step.prefill == "poison" else None
        comps.append(compare_output(out, ref, tol, word))
        if word is not None:
            poisoned += int(np.count_nonzero((out.view(np.uint32) == word) & ~np.isnan(ref)))
    return _StepEval(comps, outs, damage, input_changes, poisoned)


def _merge_metrics(comps: Sequence[Comparison]) -> dict[str, float]:
    if not comps:
        return {}
    return {
        "max_abs_err": max(c.max_abs_err for c in comps),
        "max_rel_err": max(c.max_rel_err for c in comps),
        "max_ulp": float(max(c.max_ulp for c in comps)),
        "tolerance": max((c.tolerance for c in comps), default=0.0),
        "max_err_over_tol": max(c.max_err_over_tol for c in comps),
    }


def _describe_bad(op: OpSpec, dims: Mapping[str, int], comp: Comparison, name: str) -> str:
    where = f"{name}{list(comp.worst_index or ())}"
    return (f"wrong on shape {_shape_text(dims)}: {comp.bad} of {comp.elements} elements out of "
            f"tolerance (worst {where} = {comp.worst_value!r}, expected {comp.worst_expected!r}, "
            f"tol {comp.tolerance:.3g})")


def _aligned(shape: Mapping[str, int], block: int) -> bool:
    return all(v % block == 0 for v in shape.values())


def _block_hint(op: OpSpec, good: list[dict[str, int]], bad: list[dict[str, int]]) -> str:
    if not bad or not good:
        return ""
    for b in (4, 8, 16, 32, 64):
        if all(_aligned(s, b) for s in good if op.nbytes(s)) and not any(_aligned(s, b) for s in bad):
            return (f"; wrong only on shapes that are not multiples of {b} "
                    "(a missing remainder loop after a block of that size?)")
    return ""


def _correctness(op: OpSpec, name: str, cases: list[Case], evals: dict[int, list[_StepEval]],
                 idx: list[int], what: str, normal_ok: bool = False) -> CheckResult:
    shapes = [cases[i].dims for i in idx]
    crashed = [(cases[i].dims, cases[i].failure) for i in idx if cases[i].failure]
    comps = [c for i in idx for e in evals.get(i, []) for c in e.comparisons]
    bad: list[tuple[dict[str, int], Comparison]] = []
    good: list[dict[str, int]] = []
    for i in idx:
        if cases[i].failure:
            continue
        worst = [c for e in evals[i] for c in e.comparisons if not c.ok]
        if worst:
            bad.append((cases[i].dims, worst[0]))
        else:
            good.append(cases[i].dims)
    metrics = _merge_metrics(comps)
    inputs = {"shapes": shapes}
    if crashed:
        dims, why = crashed[0]
        first = next(cases[i].fault for i in idx if cases[i].failure)
        return CheckResult(name, "fail", f"{why} on shape {_shape_text(dims)}", inputs, metrics,
                           _fault(CASE_FAULTS[first or "crash"], dims))
    if bad:
        dims, comp = bad[0]
        out_name = op.outputs[0].name
        detail = _describe_bad(op, dims, comp, out_name)
        kind: FaultKind = "wrong"
        if len(bad) > 1:
            detail += f"; {len(bad)} of {len(idx)} shapes wrong"
        if name == "correctness.large" and normal_ok:
            detail = (f"overflow or lost range on large inputs ({what}) while correct at normal "
                      f"magnitudes ({comp.nonfinite_mismatches} non-finite outputs); " + detail)
            kind = "overflow"
        elif name == "special_values" and normal_ok:
            detail = ("special values (NaN/Inf/denormals) not handled as the reference does while "
                      "correct on finite inputs; " + detail)
            kind = "special_values"
        elif name.startswith("correctness") and comp.poisoned == 0:
            hint = _block_hint(op, good, [d for d, _ in bad])
            detail += hint
            kind = "unaligned_remainder" if hint else "wrong"
            if comp.max_err_over_tol < 1e3 and not comp.nonfinite_mismatches:
                detail += (f"; error {comp.max_err_over_tol:.3g}x the tolerance: a loose "
                           "approximation or poor accumulation")
                kind = "loose" if not hint else kind
        return CheckResult(name, "fail", detail, inputs, metrics, _fault(kind, dims))
    return CheckResult(
        name, "pass",
        f"max rel err {metrics.get('max_rel_err', 0.0):.3g}, max {metrics.get('max_ulp', 0):.0f} ULP, "
        f"worst err/tol {metrics.get('max_err_over_tol', 0.0):.3g} on {len(idx)} shapes ({what})",
        inputs, metrics)


def _judge(op: OpSpec, cases: list[Case], budget: Budget, markers: Markers) -> list[CheckResult]:
    evals: dict[int, list[_StepEval]] = {}
    for i, case in enumerate(cases):
        evals[i] = [_evaluate(op, case, si, markers) for si in range(len(case.dumps))]
    by_check: dict[str, list[int]] = {}
    for i, case in enumerate(cases):
        by_check.setdefault(case.check, []).append(i)
    rows = [
        _correctness(op, "correctness.random", cases, evals, by_check["correctness.random"],
                     "random normal inputs"),
        _correctness(op, "correctness.edge", cases, evals, by_check["correctness.edge"],
                     "1, primes, non-multiples of 8/16/32/64, empty"),
    ]
    normal_ok = all(r.outcome == "pass" for r in rows)
    rows += [
        _correctness(op, "correctness.large", cases, evals, by_check["correctness.large"],
                     f"magnitude {op.large_scale:g}", normal_ok),
        _correctness(op, "special_values", cases, evals, by_check["special_values"],
                     "NaN, +-Inf, denormals, +-0 planted in the first input", normal_ok),
    ]
    all_steps = [(cases[i].dims, e) for i in evals for e in evals[i]]
    shapes_all = {"shapes": [c.dims for c in cases]}
    changes = [(d, c) for d, e in all_steps for c in e.input_changes]
    rows.append(CheckResult(
        "inputs.unchanged",
        "fail" if changes else "pass",
        (f"mutates its inputs: {changes[0][1]} on shape {_shape_text(changes[0][0])}"
         f" ({len(changes)} calls)") if changes else f"inputs bit-identical after {len(all_steps)} calls",
        shapes_all, {"calls": float(len(all_steps)), "mutating_calls": float(len(changes))},
        _fault("input_mutated", changes[0][0]) if changes else None))
    poisoned = [(d, e.poisoned) for d, e in all_steps if e.poisoned]
    rows.append(CheckResult(
        "outputs.poisoned",
        "fail" if poisoned else "pass",
        (f"{poisoned[0][1]} outputs still hold this run's poison NaN on shape "
         f"{_shape_text(poisoned[0][0])}: the kernel relies on zeroed output memory (reads "
         "outputs before writing them) or leaves outputs unwritten") if poisoned else
        f"outputs prefilled with a random NaN (or zeros, or random values) before each of "
        f"{len(all_steps)} calls; every output written",
        shapes_all, {"calls": float(len(all_steps)), "poisoned_calls": float(len(poisoned))},
        _fault("unwritten", poisoned[0][0]) if poisoned else None))
    damage = [(d, g) for d, e in all_steps for g in e.guard_damage]
    rows.append(CheckResult(
        "guards.canaries",
        "fail" if damage else "pass",
        (f"out-of-bounds write: {damage[0][1]} on shape {_shape_text(damage[0][0])} "
         f"({len(damage)} damaged guards)") if damage else
        f"256-byte random NaN guards around every buffer intact after {len(all_steps)} calls",
        shapes_all, {"damaged_guards": float(len(damage))},
        _fault("oob_write", damage[0][0]) if damage else None))
    rows.append(_determinism(cases, evals, by_check["determinism"]))
    rows.append(_state(op, cases, evals, by_check["state.reuse"]))
    rows.append(_concurrency(cases, evals, by_check["concurrency"]))
    rows.append(_escape(cases))
    return rows


def _concurrency(cases: list[Case], evals: dict[int, list[_StepEval]], idx: list[int]) -> CheckResult:
    """Two threads calling at once on different buffers must get the single-threaded answers."""
    inputs = {"shapes": [cases[i].dims for i in idx], "threads": 2}
    pairs = 0
    for i in idx:
        case = cases[i]
        if case.failure:
            return CheckResult("concurrency", "fail", f"{case.failure} while two threads called "
                               f"the kernel at once on shape {_shape_text(case.dims)}", inputs, {},
                               _fault(CASE_FAULTS[case.fault or "crash"], case.dims))
        alone = evals[i][:2]
        for k, ev in enumerate(evals[i][2:]):
            pairs += k % 2
            ref = alone[k % 2]  # the pair's steps alternate: first thread, second thread
            for a, b in zip(ref.outputs, ev.outputs, strict=True):
                differ = int(np.count_nonzero(a.view(np.uint32) != b.view(np.uint32)))
                if differ:
                    return CheckResult(
                        "concurrency", "fail",
                        f"not reentrant: called from two threads at once on different buffers, "
                        f"it answered differently from a single-threaded call at {differ} of "
                        f"{a.size} elements (call {k // 2 + 1} of its thread) on shape {_shape_text(case.dims)}; "
                        "shared static state? (processes serving several models call kernels "
                        "concurrently)", inputs, {"differing_elements": float(differ)},
                        _fault("not_reentrant", case.dims))
    return CheckResult("concurrency", "pass",
                       f"2 threads x {pairs} calls at once matched single-threaded calls "
                       "bit for bit", inputs, {"pairs": float(pairs)})


def _escape(cases: list[Case]) -> CheckResult:
    """Nothing a call started may outlive it: threads, processes, writes to its buffers."""
    for case in cases:
        if case.escaped:
            return CheckResult(
                "escape", "fail",
                f"work escaping the call: {case.escaped[0]} on shape {_shape_text(case.dims)} "
                f"({case.check})", {"shapes": [case.dims]},
                {"findings": float(sum(len(c.escaped) for c in cases))}, _fault("escaped", case.dims))
    calls = sum(len(c.dumps) for c in cases)
    return CheckResult("escape", "pass",
                       f"after each of {calls} calls no thread kept using CPU, no process the "
                       "kernel started was alive and its buffers did not change during a pause",
                       {}, {"calls": float(calls)})


def _determinism(cases: list[Case], evals: dict[int, list[_StepEval]], idx: list[int]) -> CheckResult:
    for i in idx:
        case = cases[i]
        inputs = {"shapes": [case.dims], "repeats": len(case.steps)}
        if case.failure:
            return CheckResult("determinism", "fail", f"{case.failure}", inputs, {},
                               _fault(CASE_FAULTS[case.fault or "crash"], case.dims))
        outs = [e.outputs for e in evals[i]]
        for k in range(1, len(outs)):
            for a, b in zip(outs[0], outs[k], strict=True):
                differ = np.nonzero(a.view(np.uint32) != b.view(np.uint32))
                if differ[0].size:
                    return CheckResult(
                        "determinism", "fail",
                        f"nondeterministic: call {k + 1} on identical inputs differs from call 1 at "
                        f"{differ[0].size} of {a.size} elements (a race between threads?) "
                        f"on shape {_shape_text(case.dims)}",
                        inputs, {"differing_elements": float(differ[0].size)},
                        _fault("nondeterministic", case.dims))
    return CheckResult("determinism", "pass",
                       f"bit-identical outputs over {len(cases[idx[0]].steps)} calls on identical inputs",
                       {"shapes": [cases[i].dims for i in idx]})


def _state(op: OpSpec, cases: list[Case], evals: dict[int, list[_StepEval]], idx: list[int]) -> CheckResult:
    inputs = {"shapes": [cases[i].dims for i in idx]}
    for i in idx:
        case = cases[i]
        if case.failure:
            return CheckResult("state.reuse", "fail", case.failure, inputs, {},
                               _fault(CASE_FAULTS[case.fault or "crash"], case.dims))
        first, second = evals[i]
        bad = [c for c in second.comparisons if not c.ok]
        if bad:
            stale = all(np.array_equal(a.view(np.uint32), b.view(np.uint32))
                        for a, b in zip(first.outputs, second.outputs, strict=True))
            why = ("returned the previous call's answer" if stale else "answered wrong")
            return CheckResult(
                "state.reuse", "fail",
                f"state kept between calls: called again on the same buffers with new contents, "
                f"it {why} ({bad[0].bad} of {bad[0].elements} elements wrong) on shape "
                f"{_shape_text(case.dims)}; kernels must not cache by pointer or keep state",
                inputs, _merge_metrics(second.comparisons), _fault("stateful", case.dims))
    return CheckResult("state.reuse", "pass",
                       "second call on the same buffers with new contents matched the reference",
                       inputs)


# -- sanitizers ------------------------------------------------------------------------

_ASAN_ERR = re.compile(r"ERROR: AddressSanitizer: ([\w-]+)")
_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+)", re.M)
_UBSAN_ERR = re.compile(r"([\w./-]+:\d+:\d+): runtime error: (.*)")
_FRAME = re.compile(r"#\d+ 0x[0-9a-f]+ in (\S+) (\S+)")
_TSAN_FRAME0 = re.compile(r"#0 (\S+) ")


def _sanitizer_cases(op: OpSpec, rng: np.random.Generator, count: int) -> list[tuple[dict[str, int], list[F32]]]:
    shapes = [*[dict(s) for s in op.edge_shapes][: max(count - 1, 1)], _aligned_shape(op)]
    return [(s, op.random_inputs(s, rng)) for s in shapes[:count]]


def _sanitizer_limits(wall_s: float, step_wall_s: float) -> Limits:
    return Limits(cpu_s=int(wall_s), wall_s=wall_s, address_space=None, file_size=64 * 2**20,
                  open_files=64, step_wall_s=step_wall_s)


def _run_sanitizer(
    runtime_name: str, spec: KernelSpec, op: OpSpec, variant: str, workdir: Path,
    cases: list[tuple[dict[str, int], list[F32]]], wall_s: float, step_wall_s: float,
) -> tuple[str, str, ChildResult | None]:
    art = get_runtime(runtime_name).build(spec, variant, workdir)
    data = workdir / f"{variant}-cases.bin"
    write_driver_cases(data, op, cases)
    env = base_env({
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=66:allocator_may_return_null=1:"
                        "hard_rss_limit_mb=1536:detect_stack_use_after_return=0",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=67",
        "TSAN_OPTIONS": "halt_on_error=0:exitcode=0:report_signal_unsafe=0:history_size=2",
        "OMP_NUM_THREADS": "4",
    })
    limits = _sanitizer_limits(wall_s, step_wall_s)
    result = run_sandboxed([str(art.path), str(data)], art.path.parent, limits, env,
                           readable=[workdir], gpu=art.gpu)
    shown = [line for _, line in result.lines if line.startswith("KTL-CASE ")]
    case_no = int(shown[-1].split()[1]) if shown else 0
    shape = _shape_text(cases[min(case_no, len(cases) - 1)][0])
    return shape, result.stderr, result if not result.ok else None


def _asan_check(runtime_name: str, spec: KernelSpec, op: OpSpec, workdir: Path,
                cases: list[tuple[dict[str, int], list[F32]]], wall_s: float,
                step_wall_s: float) -> CheckResult:
    inputs = {"shapes": [c[0] for c in cases]}
    name = "sanitizer.asan_ubsan"
    try:
        shape, stderr, failed = _run_sanitizer(runtime_name, spec, op, "asan", workdir, cases, wall_s,
                                               step_wall_s)
    except BuildError as exc:
        return CheckResult(name, "error", f"sanitizer build failed: {exc}"[:500], inputs)
    except RuntimeUnavailableError as exc:
        return CheckResult(name, "skip", f"not run: {exc}"[:500], inputs)
    if "rss limit exhausted" in stderr or "out of memory" in stderr:
        return CheckResult(name, "fail", "unbounded allocation: AddressSanitizer's memory limit "
                           f"(1536 MiB RSS) exhausted on shape {shape}", inputs, {},
                           _fault("unbounded_alloc"))
    asan = _ASAN_ERR.search(stderr)
    if asan:
        access = _ACCESS.search(stderr)
        frames = [f"{fn} ({loc.rsplit('/', 1)[-1]})" for fn, loc in _FRAME.findall(stderr)[:2]]
        what = f"{access.group(1)} of size {access.group(2)}" if access else ""
        read = bool(access and access.group(1) == "READ")
        found: FaultKind = "oob_read" if read else "oob_write"
        kind = "out-of-bounds read" if read else "out-of-bounds write"
        if "overflow" not in asan.group(1):
            kind, found = "memory error", "memory_error"
        return CheckResult(name, "fail",
                           f"{kind}: AddressSanitizer {asan.group(1)} {what} in "
                           f"{', '.join(frames) or '?'} on shape {shape}", inputs, {}, _fault(found))
    ub = _UBSAN_ERR.search(stderr)
    if ub:
        return CheckResult(name, "fail", f"undefined behaviour: UBSan at {ub.group(1).rsplit('/', 1)[-1]}: "
                           f"{ub.group(2)[:200]} on shape {shape}", inputs, {},
                           _fault("undefined_behaviour"))
    if "KTL-INPUT-MUTATED" in stderr:
        return CheckResult(name, "fail", f"mutates its inputs (seen by the sanitizer driver) on shape {shape}",
                           inputs, {}, _fault("input_mutated"))
    if failed is not None:
        return CheckResult(name, "fail", f"{failed.describe(_sanitizer_limits(wall_s, step_wall_s))} "
                           f"under ASan+UBSan on shape {shape}",
                           inputs, {}, _fault("crash"))
    return CheckResult(name, "pass", f"no AddressSanitizer or UBSan report on {len(cases)} shapes",
                       inputs)


def _tsan_races(stderr: str, openmp: bool) -> list[str]:
    """The functions of the races ThreadSanitizer reports that are real.

    Without OpenMP every report counts (TSan sees pthread create/join). With OpenMP
    only races both of whose accesses are in the same region body count: libgomp is
    not built with ThreadSanitizer, so its barriers are invisible to it and every
    write in a parallel region that the main thread reads after the region is
    reported. Those reports always have one side outside the region body; a real
    race inside a region has both sides in the same `*._omp_fn.N`.
    """
    races = []
    for block in stderr.split("WARNING: ThreadSanitizer: data race")[1:]:
        block = block.split("SUMMARY:")[0]
        tops = _TSAN_FRAME0.findall(block)
        same_region = len(tops) >= 2 and tops[0] == tops[1] and "._omp_fn." in tops[0]
        if tops and (not openmp or same_region):
            races.append(tops[0])
    return races


def _tsan_check(runtime_name: str, spec: KernelSpec, op: OpSpec, workdir: Path,
                cases: list[tuple[dict[str, int], list[F32]]], wall_s: float,
                step_wall_s: float) -> CheckResult:
    name = "sanitizer.tsan"
    if not spec.uses_threads:
        return CheckResult(name, "skip", "the kernel does not use threads (no -fopenmp, no "
                           "pthread_create/thrd_create in its sources)")
    inputs = {"shapes": [c[0] for c in cases], "threads": 4}
    try:
        shape, stderr, failed = _run_sanitizer(runtime_name, spec, op, "tsan", workdir, cases, wall_s,
                                               step_wall_s)
    except BuildError as exc:
        return CheckResult(name, "error", f"sanitizer build failed: {exc}"[:500], inputs)
    races = _tsan_races(stderr, "-fopenmp" in spec.flags)
    if races:
        return CheckResult(name, "fail", f"data race between threads: ThreadSanitizer reports "
                           f"{len(races)} race(s) inside {races[0]} on shape {shape}", inputs,
                           {"races": float(len(races))}, _fault("race"))
    if failed is not None:
        if "unexpected memory mapping" in stderr or "FATAL: ThreadSanitizer" in stderr:
            return CheckResult(name, "skip", "ThreadSanitizer cannot run on this kernel/OS "
                               f"configuration: {stderr.strip().splitlines()[-1][:200]}", inputs)
        why = failed.describe(_sanitizer_limits(wall_s, step_wall_s))
        return CheckResult(name, "fail", f"{why} under TSan on shape {shape}", inputs, {},
                           _fault("crash"))
    where = "inside parallel regions " if "-fopenmp" in spec.flags else ""
    return CheckResult(name, "pass", f"no data race {where}on {len(cases)} shapes "
                       "(OMP_NUM_THREADS=4)", inputs)


def _index_overflow_row(artifact: Artifact, spec: KernelSpec, op: OpSpec, plan: Budget,
                        work: Path, markers: Markers, say: Progress) -> CheckResult:
    shapes = {"shapes": [dict(s) for s in HUGE_SHAPES.get(op.name, ())]}
    if not plan.huge_index:
        return CheckResult("index.overflow", "skip", "run with --budget full (it maps inputs of "
                           "8-12 GiB lazily and takes seconds to minutes)", shapes)
    say("32-bit index overflow: shapes past 2^31 elements")
    outcome, detail, metrics = index_overflow(
        artifact.path, artifact.entry_symbol or spec.entry, op, work, markers,
        [artifact.path.parent], artifact.gpu, say)
    return CheckResult("index.overflow", outcome, detail, shapes, metrics,
                       _fault("index_overflow") if outcome == "fail" else None)


# -- entry point -----------------------------------------------------------------------


def check(
    directory: str | Path,
    budget: str = "quick",
    seed: int | None = None,
    progress: Progress | None = None,
) -> CheckReport:
    """Run the verification suite on the kernel folder; never raises for kernel faults.

    Raises KernelSpecError for a malformed folder and VerifierError for a bad budget.
    """
    if budget not in BUDGETS:
        raise VerifierError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    say: Progress = progress or (lambda _msg: None)
    spec = KernelSpec.load(directory)
    op = OPS[spec.op]
    plan = BUDGETS[budget]
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    if not 0 <= seed < 2**63:
        raise VerifierError("seed must be between 0 and 2**63 - 1")
    rng = np.random.default_rng(seed)
    env = environment_fingerprint(spec.runtime)

    def report(rows: Sequence[CheckResult]) -> CheckReport:
        return CheckReport(spec.name, spec.op, budget, seed, env, tuple(rows))

    runtime = get_runtime(spec.runtime)
    reason = runtime.unavailable_reason()
    if reason:
        return report([CheckResult("build", "error", f"runtime {spec.runtime!r} unavailable: {reason}")])
    compiler, version = runtime.compiler()
    with tempfile.TemporaryDirectory(prefix="ktl-check-") as tmp:
        work = Path(tmp)
        say("building the kernel")
        try:
            artifact = runtime.build(spec, "release", work)
        except (BuildError, RuntimeUnavailableError) as exc:
            return report([CheckResult("build", "fail", str(exc)[:1000], {}, {}, _fault("build"))])
        relaxed = " (relaxed floating point recorded: results may differ from IEEE)" if spec.relaxed_math else ""
        rows = [CheckResult("build", "pass",
                            f"{compiler} {version} {' '.join(spec.flags)}{relaxed}".strip(),
                            {"flags": list(spec.flags)},
                            {"relaxed_math": 1.0 if spec.relaxed_math else 0.0})]
        cases = _plan(op, plan, rng)
        limits = Limits(cpu_s=120, wall_s=300.0, address_space=CHECK_ADDRESS_SPACE,
                        step_wall_s=plan.step_wall_s)
        markers = Markers.draw()
        layers = run_cases(artifact.path, artifact.entry_symbol or spec.entry, op, cases, work,
                           limits, markers, rng, say, readable=[artifact.path.parent],
                           gpu=artifact.gpu)
        say("comparing with the float64 reference")
        rows.extend(_judge(op, cases, plan, markers))
        rows.append(CheckResult("sandbox", "pass", sandbox_detail(layers), {},
                                sandbox_metrics(layers)))
        hung = next((c.failure for c in cases if c.fault == "hang"), None)
        if hung:
            why = f"not run: the kernel already failed ({hung})"
            rows += [CheckResult(row, "fail", why, {}, {}, _fault("not_run"))
                     for row in ("index.overflow", "sanitizer.asan_ubsan", "sanitizer.tsan")]
            return report(rows)
        rows.append(_index_overflow_row(artifact, spec, op, plan, work, markers, say))
        say("AddressSanitizer + UBSan build")
        san_cases = _sanitizer_cases(op, rng, plan.asan_shapes)
        san_wall = 60.0 if budget == "quick" else 150.0
        rows.append(_asan_check(spec.runtime, spec, op, work, san_cases, san_wall,
                                3 * plan.step_wall_s))
        say("ThreadSanitizer build")
        tsan_cases = [(_mid_shape(op), op.random_inputs(_mid_shape(op), rng))]
        if plan.tsan_shapes > 1:
            tsan_cases.append((_aligned_shape(op), op.random_inputs(_aligned_shape(op), rng)))
        rows.append(_tsan_check(spec.runtime, spec, op, work, tsan_cases, san_wall,
                                3 * plan.step_wall_s))
    return report(rows)
