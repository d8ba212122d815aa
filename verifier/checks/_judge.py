"""`ktl check`'s judging: the parent compares the dumped arenas with the float64 reference
and turns what it saw into typed rows (correctness, inputs, outputs, guards, concurrency,
escape, determinism, state)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from attest.predicates import Check, FaultKind
from attest.text import plural
from verifier.checks._plan import Case, case_layout
from verifier.checks._report import CASE_FAULTS, F32, Budget, check_row, make_fault, shape_text
from verifier.compare_outputs import (
    Comparison,
    common_remainder,
    common_tail,
    compare_output,
)
from verifier.ops import OpSpec
from verifier.worker import Layout, Markers, guard_pattern

__all__ = ["judge"]


@dataclass
class _StepEval:
    comparisons: list[Comparison]
    outputs: list[F32]
    guard_damage: list[str]
    input_changes: list[str]
    poisoned: int
    poison_tail: tuple[int | None, int] = (None, 0)
    """(first column still holding the poison, the output's last extent)."""


def _evaluate(op: OpSpec, case: Case, si: int, markers: Markers) -> _StepEval:
    lay: Layout = case_layout(op, case)
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
    tail: tuple[int | None, int] = (None, 0)
    for slot, ref, tol in zip([s for s in lay.slots if s.is_output], refs, tols, strict=True):
        out = dump[slot.offset:slot.offset + slot.nbytes].view(np.float32).reshape(slot.shape)
        outs.append(out)
        word = markers.poison if step.prefill == "poison" else None
        comps.append(compare_output(out, ref, tol, word))
        if word is not None:
            left = (out.view(np.uint32) == word) & ~np.isnan(ref)
            count = int(np.count_nonzero(left))
            poisoned += count
            if count and out.ndim and tail[0] is None:
                cols = np.nonzero(left.reshape(-1, out.shape[-1]).any(axis=0))[0]
                tail = (int(cols.min()), int(out.shape[-1]))
    return _StepEval(comps, outs, damage, input_changes, poisoned, tail)


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
    return (f"wrong on shape {shape_text(dims)}: {comp.bad} of {comp.elements} elements out of "
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


def _not_run(cases: list[Case]) -> str:
    """Why no call was judged: the first case's failure (a crash, a kill, a build)."""
    for case in cases:
        if case.failure:
            return f"{case.failure} on shape {shape_text(case.dims)}"
    return "no call of the kernel completed"


def _calls_row(name: str, cases: list[Case], inputs: dict[str, Any],
               metrics: dict[str, float]) -> Check:
    """A row whose evidence is the calls it saw, when it saw none: not run, never pass."""
    return check_row(name, "skip", f"not run ({_not_run(cases)}): 0 calls to judge",
                       inputs, metrics)


def _bad_and_good(judged: list[tuple[Case, list[_StepEval]]]
                  ) -> tuple[list[tuple[dict[str, int], Comparison]], list[dict[str, int]]]:
    """The shapes that ran with a wrong output (each with its first failing comparison) and
    those that ran right."""
    bad: list[tuple[dict[str, int], Comparison]] = []
    good: list[dict[str, int]] = []
    for case, steps in judged:
        if case.failure:
            continue
        worst = [c for e in steps for c in e.comparisons if not c.ok]
        if worst:
            bad.append((case.dims, worst[0]))
        else:
            good.append(case.dims)
    return bad, good


def _correctness(op: OpSpec, name: str, judged: list[tuple[Case, list[_StepEval]]], what: str,
                 normal_ok: bool = False) -> Check:
    """The row of check `name` from its cases, each with its steps' evaluations."""
    shapes = [case.dims for case, _ in judged]
    crashed = [(case.dims, case.failure) for case, _ in judged if case.failure]
    comps = [c for _, steps in judged for e in steps for c in e.comparisons]
    bad, good = _bad_and_good(judged)
    metrics = _merge_metrics(comps)
    inputs = {"shapes": shapes}
    if crashed:
        dims, why = crashed[0]
        first = next(case.fault for case, _ in judged if case.failure)
        return check_row(name, "fail", f"{why} on shape {shape_text(dims)}", inputs, metrics,
                           make_fault(CASE_FAULTS[first or "crash"], dims))
    if bad:
        tail = common_remainder([c for _, c in bad])
        dims, comp = bad[0]
        out_name = op.outputs[0].name
        detail = _describe_bad(op, dims, comp, out_name)
        kind: FaultKind = "wrong"
        if len(bad) > 1:
            detail += f"; {len(bad)} of {plural(len(judged), 'shape')} wrong"
        if name == "correctness.large" and normal_ok:
            detail = (f"overflow or lost range on large inputs ({what}) while correct at normal "
                      f"magnitudes ({comp.nonfinite_mismatches} non-finite outputs); " + detail)
            kind = "overflow"
        elif name == "special_values" and normal_ok:
            detail = ("special values (NaN/Inf/denormals) not handled as the reference does while "
                      "correct on finite inputs; " + detail)
            kind = "special_values"
        elif name == "correctness.claimed" and normal_ok:  # shapes far apart: no block hints
            detail = ("wrong where speed is claimed or at long reductions while right at every "
                      "shape drawn (arithmetic that changes with the shape?); " + detail)
            kind = ("loose" if comp.max_err_over_tol < 1e3 and not comp.nonfinite_mismatches
                    else "wrong")
        elif name.startswith("correctness") and tail is not None:
            detail += _block_hint(op, good, [d for d, _ in bad]) + "; " + tail.describe()
            kind = "unaligned_remainder"
        elif name.startswith("correctness") and comp.poisoned == 0:
            hint = _block_hint(op, good, [d for d, _ in bad])
            detail += hint
            kind = "unaligned_remainder" if hint else "wrong"
            if comp.max_err_over_tol < 1e3 and not comp.nonfinite_mismatches:
                detail += (f"; error {comp.max_err_over_tol:.3g}x the tolerance: a loose "
                           "approximation or poor accumulation")
                kind = "loose" if not hint else kind
        return check_row(name, "fail", detail, inputs, metrics, make_fault(kind, dims))
    return check_row(
        name, "pass",
        f"max rel err {metrics.get('max_rel_err', 0.0):.3g}, max {metrics.get('max_ulp', 0):.0f} ULP, "
        f"worst err/tol {metrics.get('max_err_over_tol', 0.0):.3g} on {plural(len(judged), 'shape')} ({what})",
        inputs, metrics)


def judge(op: OpSpec, cases: list[Case], budget: Budget, markers: Markers) -> list[Check]:
    evals: dict[int, list[_StepEval]] = {}
    for i, case in enumerate(cases):
        evals[i] = [_evaluate(op, case, si, markers) for si in range(len(case.dumps))]
    by_check: dict[str, list[int]] = {}
    for i, case in enumerate(cases):
        by_check.setdefault(case.check, []).append(i)
    def of(name: str) -> list[tuple[Case, list[_StepEval]]]:
        return [(cases[i], evals[i]) for i in by_check[name]]

    rows = [
        _correctness(op, "correctness.random", of("correctness.random"), "random normal inputs"),
        _correctness(op, "correctness.edge", of("correctness.edge"),
                     "1, primes, non-multiples of 8/16/32/64, empty"),
    ]
    normal_ok = all(r.outcome == "pass" for r in rows)
    rows.append(_correctness(op, "correctness.claimed", of("correctness.claimed"),
                             "the shapes ktl bench claims by default, and reductions of "
                             + ", ".join(shape_text(d) for d in op.long_shapes)
                             + " with normal and with same-sign inputs", normal_ok))
    rows += [
        _correctness(op, "correctness.large", of("correctness.large"),
                     f"magnitude {op.large_scale:g}", normal_ok),
        _correctness(op, "special_values", of("special_values"),
                     "NaN, +-Inf, denormals, +-0 planted in the first input", normal_ok),
    ]
    all_steps = [(cases[i].dims, e) for i in evals for e in evals[i]]
    shapes_all = {"shapes": [c.dims for c in cases]}
    changes = [(d, c) for d, e in all_steps for c in e.input_changes]
    changes += [(c.dims, c.failure or "") for c in cases if c.fault == "input_mutated"]
    rows += _call_rows(cases, all_steps, shapes_all, changes)
    rows.append(_determinism(cases, evals, by_check["determinism"]))
    rows.append(_state(op, cases, evals, by_check["state.reuse"]))
    rows.append(_concurrency(cases, evals, by_check["concurrency"], budget.concurrency_pairs))
    rows.append(_escape(cases))
    return rows


def _call_rows(cases: list[Case], all_steps: list[tuple[dict[str, int], _StepEval]],
               shapes_all: dict[str, Any], changes: list[tuple[dict[str, int], str]]
               ) -> list[Check]:
    """inputs.unchanged, outputs.poisoned, guards.canaries: judged over every call made."""
    if not all_steps and not changes and not any(c.fault in ("oob_read", "oob_write")
                                                 for c in cases):
        return [_calls_row(n, cases, shapes_all, {"calls": 0.0})
                for n in ("inputs.unchanged", "outputs.poisoned", "guards.canaries")]
    rows: list[Check] = []
    rows.append(check_row(
        "inputs.unchanged",
        "fail" if changes else "pass",
        (f"mutates its inputs: {changes[0][1]} on shape {shape_text(changes[0][0])}"
         f" ({len(changes)} calls)") if changes else f"inputs bit-identical after {len(all_steps)} calls",
        shapes_all, {"calls": float(len(all_steps)), "mutating_calls": float(len(changes))},
        make_fault("input_mutated", changes[0][0]) if changes else None))
    poisoned = [(d, e.poisoned, e.poison_tail) for d, e in all_steps if e.poisoned]
    tail = common_tail(t for _, _, t in poisoned)
    rows.append(check_row(
        "outputs.poisoned",
        "fail" if poisoned else "pass",
        (f"{poisoned[0][1]} outputs still hold this run's poison NaN on shape "
         f"{shape_text(poisoned[0][0])}: the kernel relies on zeroed output memory (reads "
         "outputs before writing them) or leaves outputs unwritten"
         + ("" if tail is None else f"; {tail.describe()}")) if poisoned else
        f"outputs prefilled with a random NaN (or zeros, or random values) before each of "
        f"{len(all_steps)} calls; every output written",
        shapes_all, {"calls": float(len(all_steps)), "poisoned_calls": float(len(poisoned))},
        make_fault("unaligned_remainder" if tail is not None else "unwritten", poisoned[0][0])
        if poisoned else None))
    rows.append(_guards(cases, all_steps, shapes_all))
    return rows


def _guards(cases: list[Case], all_steps: list[tuple[dict[str, int], _StepEval]],
            shapes_all: dict[str, Any]) -> Check:
    """Canaries intact after every call, and no call touched a guard page (a crash the
    runner placed on one: `verifier.checks._run`)."""
    paged = [c for c in cases if c.fault in ("oob_read", "oob_write")]
    damage = [(d, g) for d, e in all_steps for g in e.guard_damage]
    metrics = {"calls": float(len(all_steps)), "damaged_guards": float(len(damage)),
               "guard_page_faults": float(len(paged))}
    if paged:
        case = paged[0]
        return check_row("guards.canaries", "fail", f"{case.failure} on shape "
                           f"{shape_text(case.dims)} ({case.check})", shapes_all, metrics,
                           make_fault(CASE_FAULTS[case.fault or "crash"], case.dims))
    if damage:
        return check_row("guards.canaries", "fail",
                           f"out-of-bounds write: {damage[0][1]} on shape {shape_text(damage[0][0])} "
                           f"({len(damage)} damaged guards)", shapes_all, metrics,
                           make_fault("oob_write", damage[0][0]))
    return check_row("guards.canaries", "pass",
                       f"256-byte random NaN guards around every buffer intact after "
                       f"{len(all_steps)} calls; no read or write reached the guard page that "
                       "ends (or starts) each buffer", shapes_all, metrics)


def _concurrency(cases: list[Case], evals: dict[int, list[_StepEval]], idx: list[int],
                 needed: int) -> Check:
    """Two threads calling at once on different buffers must get the single-threaded answers,
    with at least `needed` pairs of calls seen overlapping in time (`verifier.worker._overlap`)."""
    inputs = {"shapes": [cases[i].dims for i in idx], "threads": 2}
    calls = sum(cases[i].paired_calls for i in idx)
    overlapping = sum(cases[i].overlaps for i in idx)
    metrics = {"calls": float(calls), "overlapping_pairs": float(overlapping)}
    for i in idx:
        case = cases[i]
        if case.failure:
            return check_row("concurrency", "fail", f"{case.failure} while two threads called "
                               f"the kernel at once on shape {shape_text(case.dims)}", inputs, metrics,
                               make_fault(CASE_FAULTS[case.fault or "crash"], case.dims))
        alone = evals[i][:2]
        for k, ev in enumerate(evals[i][2:]):
            ref = alone[k % 2]  # the paired steps alternate: first thread, second thread
            for a, b in zip(ref.outputs, ev.outputs, strict=True):
                differ = int(np.count_nonzero(a.view(np.uint32) != b.view(np.uint32)))
                if differ:
                    return check_row(
                        "concurrency", "fail",
                        f"not reentrant: called from two threads at once on different buffers, "
                        f"it answered differently from a single-threaded call at {differ} of "
                        f"{a.size} elements (call {k // 2 + 1} of its thread) on shape {shape_text(case.dims)}; "
                        "shared static state? (processes serving several models call kernels "
                        "concurrently)", inputs, {**metrics, "differing_elements": float(differ)},
                        make_fault("not_reentrant", case.dims))
    if overlapping < needed:
        return check_row("concurrency", "error",
                           f"not established: of {calls} calls from 2 threads started together, "
                           f"only {overlapping} pairs overlapped in time (at least {needed} "
                           "needed); the machine was too busy to run them at once, or the "
                           "worker's timing words were not credible", inputs, metrics)
    return check_row("concurrency", "pass",
                       f"{overlapping} pairs of calls overlapping in time (of {calls} calls from "
                       "2 threads started together) matched single-threaded calls bit for bit",
                       inputs, metrics)


def _escape(cases: list[Case]) -> Check:
    """Nothing a call started may outlive it: threads, processes, writes to its buffers.

    A failing row counts its findings per kind in `escaped_<EscapeKind>` metrics."""
    kinds: dict[str, float] = {}
    for found in (e for c in cases for e in c.escaped):
        kinds[f"escaped_{found.kind}"] = kinds.get(f"escaped_{found.kind}", 0.0) + 1.0
    for case in cases:
        if case.escaped:
            return check_row(
                "escape", "fail",
                f"work escaping the call: {case.escaped[0]} on shape {shape_text(case.dims)} "
                f"({case.check})", {"shapes": [case.dims]},
                {"findings": float(sum(len(c.escaped) for c in cases)), **kinds},
                make_fault("escaped", case.dims))
    calls = sum(len(c.dumps) for c in cases)
    if not calls:
        return _calls_row("escape", cases, {}, {"calls": 0.0})
    return check_row("escape", "pass",
                       f"after each of {calls} calls no thread kept using CPU, no thread a "
                       "call started was still running at its answer (beyond one thread pool), "
                       "no process the kernel started was alive and its buffers did not change "
                       "during a pause",
                       {}, {"calls": float(calls)})


def _determinism(cases: list[Case], evals: dict[int, list[_StepEval]], idx: list[int]) -> Check:
    for i in idx:
        case = cases[i]
        inputs = {"shapes": [case.dims], "repeats": len(case.steps)}
        if case.failure:
            return check_row("determinism", "fail", f"{case.failure}", inputs, {},
                               make_fault(CASE_FAULTS[case.fault or "crash"], case.dims))
        outs = [e.outputs for e in evals[i]]
        for k in range(1, len(outs)):
            for a, b in zip(outs[0], outs[k], strict=True):
                differ = np.nonzero(a.view(np.uint32) != b.view(np.uint32))
                if differ[0].size:
                    tail = common_tail([(int(differ[-1].min()), int(a.shape[-1]))]
                                       if a.ndim else [])
                    if tail is not None:
                        return check_row(
                            "determinism", "fail",
                            f"call {k + 1} on identical inputs differs from call 1 at "
                            f"{differ[0].size} of {a.size} elements on shape "
                            f"{shape_text(case.dims)}: {tail.describe()} (what differs is "
                            "whatever the tail held before the call)",
                            inputs, {"differing_elements": float(differ[0].size)},
                            make_fault("unaligned_remainder", case.dims))
                    return check_row(
                        "determinism", "fail",
                        f"nondeterministic: call {k + 1} on identical inputs differs from call 1 at "
                        f"{differ[0].size} of {a.size} elements (a race between threads?) "
                        f"on shape {shape_text(case.dims)}",
                        inputs, {"differing_elements": float(differ[0].size)},
                        make_fault("nondeterministic", case.dims))
    return check_row("determinism", "pass",
                       f"bit-identical outputs over {len(cases[idx[0]].steps)} calls on identical inputs",
                       {"shapes": [cases[i].dims for i in idx]})


def _state(op: OpSpec, cases: list[Case], evals: dict[int, list[_StepEval]], idx: list[int]) -> Check:
    inputs = {"shapes": [cases[i].dims for i in idx]}
    for i in idx:
        case = cases[i]
        if case.failure:
            return check_row("state.reuse", "fail", case.failure, inputs, {},
                               make_fault(CASE_FAULTS[case.fault or "crash"], case.dims))
        first, second, *elsewhere = evals[i]
        bad = [c for c in second.comparisons if not c.ok]
        if bad:
            stale = _same_bits(first.outputs, second.outputs)
            why = ("returned the previous call's answer" if stale else "answered wrong")
            tail = common_remainder(bad)
            if tail is not None:
                return check_row(
                    "state.reuse", "fail",
                    f"called again on the same buffers with new contents, it answered wrong "
                    f"({bad[0].bad} of {bad[0].elements} elements) on shape "
                    f"{shape_text(case.dims)}: {tail.describe()} (the stale values are the "
                    "previous call's, left in the unwritten tail)",
                    inputs, _merge_metrics(second.comparisons),
                    make_fault("unaligned_remainder", case.dims))
            fresh_bad = [c for e in elsewhere for c in e.comparisons if not c.ok]
            if fresh_bad and not stale:
                # wrong at a fresh buffer too: a wrong kernel (issue 42: reuse is blamed only
                # where the evidence shows it)
                return check_row(
                    "state.reuse", "fail",
                    f"the second inputs were answered wrong at a fresh buffer too "
                    f"({fresh_bad[0].bad} of {fresh_bad[0].elements} elements) on shape "
                    f"{shape_text(case.dims)}: a wrong kernel, not state kept between calls",
                    inputs, _merge_metrics(fresh_bad),
                    make_fault("loose" if fresh_bad[0].max_err_over_tol < 1e3
                               and not fresh_bad[0].nonfinite_mismatches else "wrong",
                               case.dims))
            return check_row(
                "state.reuse", "fail",
                f"state kept between calls: called again on the same buffers with new contents, "
                f"it {why} ({bad[0].bad} of {bad[0].elements} elements wrong) on shape "
                f"{shape_text(case.dims)}; kernels must not cache by pointer or keep state",
                inputs, _merge_metrics(second.comparisons), make_fault("stateful", case.dims))
    return check_row("state.reuse", "pass",
                       "second call on the same buffers with new contents matched the reference",
                       inputs)


def _same_bits(a: Sequence[F32], b: Sequence[F32]) -> bool:
    """Whether two calls' outputs are bit-for-bit the same."""
    return len(a) == len(b) and all(np.array_equal(x.view(np.uint32), y.view(np.uint32))
                                    for x, y in zip(a, b, strict=True))
