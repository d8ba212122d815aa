"""The rows of a torch kernel's check, from the outcomes the parent gathered (pure judging)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from attest.predicates import Check, FaultKind
from verifier.checks._report import check_row, make_fault
from verifier.checks._torch_gathered import Gathered
from verifier.compare_outputs import Comparison
from verifier.runtimes import FAILING_KINDS, CallOutcome, Finding, TorchKernel, TorchSession
from verifier.sandbox import names_summary
from verifier.tensors import Tolerance, compare_tensor, dtype_slack, elements_off

__all__ = ["FAILING_FINDINGS", "INTERPRETER_ONLY", "correctness_row", "exercised_row", "large_row",
           "outcome_faults",
           "reference_row", "static_row", "torch_statement"]

FAILING_FINDINGS = FAILING_KINDS
"""Static findings that fail the check (declared beside the kinds, `verifier.runtimes`):
a fallback hands the op back to PyTorch, patching a module or the worker's own code rewrites
the harness's tools in the candidate's process, and code the audit cannot see could be
either. The other kinds are evidence shown beside the verdict."""


INTERPRETER_ONLY = ("interpreter path only: runtime triton on a CPU runs every @triton.jit "
                    "kernel through Triton's interpreter (TRITON_INTERPRET=1); the compiled "
                    "kernel a GPU runs was not exercised")


def exercised_row(findings: Sequence[Finding], runtime: str, gpu: bool) -> Check:
    """What this run did not exercise: the other side of device-dependent branches, and the
    compiled Triton path where only the interpreter ran. `skip` (a pass says nothing about
    what did not run) when anything was left out; `pass` when nothing was."""
    branches = [f for f in findings if f.kind == "device_branch"]
    where = "GPU" if gpu else "CPU"
    parts: list[str] = []
    if runtime == "triton" and not gpu:
        parts.append(INTERPRETER_ONLY)
    if branches:
        lines = ", ".join(f"line {f.line} ({f.detail.split(':')[0].removeprefix('branches on ')})"
                          for f in branches[:8])
        more = f" and {len(branches) - 8} more" if len(branches) > 8 else ""
        parts.append(f"device-dependent branches ran only their {where} side: {lines}{more}")
    metrics = {"device_branches": float(len(branches)),
               "interpreter_only": 1.0 if runtime == "triton" and not gpu else 0.0}
    if not parts:
        return check_row("exercised", "pass", f"no device-dependent branch in the solution's "
                         f"source; ran on the {where}", {}, metrics)
    return check_row("exercised", "skip", "not exercised by this run: " + "; ".join(parts),
                     {}, metrics)


def _shape_dims(outcome: CallOutcome) -> dict[str, int]:
    """A shape record for the report: the first output's sizes as o0..o7 ({"scalar": 1} for a
    0-dim output such as a loss: a shape record names at least one size)."""
    shape = outcome.expected[0].shape if outcome.expected else ()
    return {f"o{i}": int(d) for i, d in enumerate(shape[:8])} or {"scalar": 1}


def _compare(o: CallOutcome, dtype: str) -> tuple[Comparison | None, str | None, FaultKind | None]:
    """(worst comparison, why it is not a comparison, fault) for one call."""
    if o.answer.bad is not None:
        return None, f"returned something other than a plain tensor: {o.answer.bad}", "bad_output"
    worst: Comparison | None = None
    for i, (got, want, odtype) in enumerate(zip(o.outputs, o.expected, o.expected_dtypes, strict=True)):
        if got is None:
            said = o.answer.outputs[i] if i < len(o.answer.outputs) else None
            what = "no output" if said is None else f"shape {list(said[0])} dtype {said[1]}"
            return None, (f"output {i}: {what}, expected shape {list(want.shape)} dtype "
                          f"{odtype}"), "bad_output"
        comp = compare_tensor(got, want, odtype if odtype != dtype else dtype)
        if worst is None or (not comp.ok and worst.ok) or comp.max_err_over_tol > worst.max_err_over_tol:
            worst = comp
    if len(o.answer.outputs) > len(o.expected):
        return None, (f"{len(o.answer.outputs)} outputs, the reference has "
                      f"{len(o.expected)}"), "bad_output"
    return worst, None, None


def _fail_kind(comp: Comparison) -> FaultKind:
    if comp.nonfinite_mismatches:
        return "non_finite"
    if comp.max_err_over_tol < 1e3:
        return "loose"
    return "wrong"


def _where_dtype_reaches(o: CallOutcome, dtype: str) -> tuple[Comparison, int] | None:
    """The candidate judged only where the reference module's own outputs at the kernel's
    dtype reach the float64 answer: elsewhere (GELU's NaN at +inf in float32, a sum of
    squares PyTorch itself overflows) its elements are taken as right. The worst comparison
    left and how many elements were set aside; None where no second reference was asked."""
    if o.at_dtype is None or len(o.at_dtype) != len(o.outputs):
        return None
    worst: Comparison | None = None
    aside = 0
    for got, want, mine, odtype in zip(o.outputs, o.expected, o.at_dtype, o.expected_dtypes,
                                       strict=True):
        if got is None:
            return None
        kind = odtype if odtype != dtype else dtype
        off = elements_off(mine, want, kind)
        aside += int(np.count_nonzero(off))
        # elsewhere, the dtype reference's own error (times DTYPE_SLACK) widens the bound:
        # another honest summation order at that dtype errs by as much
        comp = compare_tensor(np.where(off, want, got), want, kind, dtype_slack(mine, want))
        if worst is None or (not comp.ok and worst.ok) or comp.max_err_over_tol > worst.max_err_over_tol:
            worst = comp
    return (worst, aside) if worst is not None else None


def correctness_row(name: str, run: Gathered, dtype: str, groups: Sequence[str]) -> Check:
    """A correctness row over the calls of `groups` (their labels say which seeds/shapes).

    A call whose outputs differ from the float64 reference but match the reference module's
    own at the kernel's dtype (asked for by `Call.at_dtype`: special values, distributions)
    is reported, not failed: `F.gelu` itself gives NaN at +inf in float32."""
    failure = next((run.failures[g] for g in groups if g in run.failures), None)
    calls = [(label, o) for g in groups for label, o in run.outcomes.get(g, [])]
    inputs: dict[str, Any] = {"shapes": [_shape_dims(o) for _, o in calls][:64]}
    comps: list[Comparison] = []
    dtype_only: list[str] = []
    for label, o in calls:
        comp, why, kind = _compare(o, dtype)
        if why is not None and kind is not None:
            return check_row(name, "fail", f"{why} ({label})", inputs, {}, make_fault(kind))
        assert comp is not None
        judged = None if comp.ok else _where_dtype_reaches(o, dtype)
        if judged is not None and judged[0].ok:
            dtype_only.append(f"{label}: {comp.bad} of {comp.elements} elements differ from "
                              f"the float64 reference (worst {comp.worst_value!r}, float64 "
                              f"{comp.worst_expected!r}) where the reference module's own at "
                              f"{dtype} does too ({judged[1]} elements set aside)")
            comps.append(judged[0])
            continue
        comp = judged[0] if judged is not None else comp
        comps.append(comp)
        if not comp.ok:
            kind = _fail_kind(comp)
            detail = (f"wrong ({label}): {comp.bad} of {comp.elements} elements out of tolerance "
                      f"(worst at {list(comp.worst_index or ())}: {comp.worst_value!r}, "
                      f"expected {comp.worst_expected!r}, bound {comp.tolerance:.3g})")
            if kind == "loose":
                detail += (f"; {comp.max_err_over_tol:.3g}x the tolerance: reduced precision or "
                           "a loose approximation")
            if kind == "non_finite":
                detail += f"; {comp.nonfinite_mismatches} NaN/Inf where the reference differs"
            return check_row(name, "fail", detail, inputs, _metrics(comps), make_fault(kind))
    if failure is not None:
        return check_row(name, "fail", failure.detail, inputs, _metrics(comps),
                           make_fault(failure.kind))
    held = run.notes.get(name, [])
    held_note = f"; not varied: {'; '.join(held)[:900]}" if held else ""
    if not calls:
        why = ("no variant of get_inputs' shapes is accepted by the reference"
               if name == "correctness.shapes" else "no floating-point input to plant values in"
               if name == "special_values" else "no floating-point input to draw otherwise")
        return check_row(name, "skip", why + held_note, inputs,
                         {"dimensions_held": float(len(held))} if held else {})
    labels = sorted({label for label, _ in calls})
    m = _metrics(comps)
    if dtype_only:
        m["dtype_reference_only"] = float(len(dtype_only))
    if held:
        m["dimensions_held"] = float(len(held))
    note = (f"; reported, not failed: {len(dtype_only)} call(s) where only the float64 "
            f"reference differs ({dtype_only[0]})" if dtype_only else "")
    return check_row(name, "pass", f"{len(calls)} calls within tolerance (worst err/tol "
                       f"{m.get('max_err_over_tol', 0.0):.3g}; {'; '.join(labels)[:600]})"
                       + note + held_note, inputs, m)


def large_row(run: Gathered, dtype: str, normal_ok: bool) -> Check:
    """correctness.large: a wrong answer on large magnitudes while correctness.random passed
    is an overflow of the kernel's intermediates (the C path's typed `overflow`)."""
    row = correctness_row("correctness.large", run, dtype, ["correctness.large"])
    if (row.outcome != "fail" or not normal_ok or row.fault is None
            or row.fault.kind not in ("wrong", "loose", "non_finite")):
        return row
    return check_row(row.name, "fail", "overflow or lost range on large inputs while correct "
                     "at normal magnitudes; " + row.detail, row.inputs.to_json(),
                     dict(row.metrics), make_fault("overflow"))


def _metrics(comps: Sequence[Comparison]) -> dict[str, float]:
    if not comps:
        return {}
    return {"max_abs_err": max(c.max_abs_err for c in comps),
            "max_rel_err": max(c.max_rel_err for c in comps),
            "max_err_over_tol": max(c.max_err_over_tol for c in comps),
            "calls": float(len(comps))}


def reference_row(kernel: TorchKernel, session: TorchSession, init_seeds: Sequence[int],
                  loaded: Sequence[dict[str, Any]], tol: Tolerance) -> Check:
    """What the op is: the reference's digest, torch, the dtype, tolerance, weight seeds."""
    shapes = [{f"d{i}": int(d) for i, d in enumerate(s.shape[:8])}
              for s in session.problem.inputs if s.kind == "tensor" and s.shape]
    first: dict[str, Any] = dict(loaded[0]) if loaded else {
        "loaded": 0, "own": 0, "reference": 0, "unmatched": []}
    unmatched: list[str] = list(first.get("unmatched") or [])
    detail = (f"{session.sizes.describe()}; "
              f"reference {kernel.reference} sha256 {kernel.reference_digest}, torch "
              f"{session.torch_version}, dtype {kernel.dtype}, the reference's answers computed "
              f"in {session.precision}, tolerance |out-ref| <= "
              f"{tol.atol:g}*rms(ref) + {tol.rtol:g}*|ref|; weights from torch.manual_seed of "
              f"{', '.join(map(str, init_seeds))} in both processes, then {first['loaded']} of "
              f"the candidate's {first['own']} state entries loaded from the reference's "
              f"{first['reference']}"
              + (f" (not matched by name/shape: {names_summary(unmatched, 'entries')}; the "
                 "names are the candidate's words and never quoted)" if unmatched else ""))
    return check_row("reference", "pass", detail, {"shapes": shapes[:64]},
                       {"rtol": tol.rtol, "atol": tol.atol, "weight_inits": float(len(init_seeds)),
                        "state_loaded": float(first["loaded"]),
                        "scaled": 1.0 if session.sizes.scaled else 0.0})


def torch_statement(kernel: TorchKernel, torch_version: str, tol: Tolerance,
                    init_seeds: Sequence[int], baselines: Sequence[str] = ()) -> dict[str, Any]:
    """The `torch` object of a statement about this kernel (attest.predicates.TorchOp)."""
    body: dict[str, Any] = {"reference_sha256": kernel.reference_digest,
                            "torch_version": torch_version[:64], "dtype": kernel.dtype,
                            "rtol": tol.rtol, "atol": tol.atol, "init_seeds": list(init_seeds)}
    if baselines:
        body["baselines"] = list(baselines)
    return body


def static_row(findings: Sequence[Finding]) -> Check:
    """The static findings on the solution's source (verifier.runtimes.audit_solution)."""
    counts: dict[str, float] = {}
    for f in findings:
        counts[f"finding_{f.kind}"] = counts.get(f"finding_{f.kind}", 0.0) + 1.0
    listed = "; ".join(f"{f.kind} (line {f.line}): {f.detail}" for f in findings[:12])
    failing = [f for f in findings if f.kind in FAILING_FINDINGS]
    if failing:
        return check_row("static", "fail", f"the solution's source: {listed}", {}, counts,
                           make_fault("static_finding"))
    if findings:
        return check_row("static", "pass", f"evidence for a reader (not failing): {listed}",
                           {}, counts)
    return check_row("static", "pass", "no static findings on the solution's source", {}, {})


def _inputs_row(run: Gathered) -> Check:
    calls = [(label, o) for g in run.outcomes.values() for label, o in g]
    changed = [(label, c) for label, o in calls for c in o.input_changes]
    if changed:
        return check_row("inputs.unchanged", "fail", f"mutates its inputs: {changed[0][1]} "
                           f"({changed[0][0]}; {len(changed)} in all)", {},
                           {"mutating_calls": float(len(changed))}, make_fault("input_mutated"))
    return check_row("inputs.unchanged", "pass", f"inputs byte-identical after {len(calls)} calls",
                       {}, {"calls": float(len(calls))})


def _fresh_row(run: Gathered, dtype: str) -> Check:
    calls = [(label, o) for g in run.outcomes.values() for label, o in g]
    for label, o in calls:
        _, why, kind = _compare(o, dtype)
        if kind == "bad_output" and why is not None:
            return check_row("outputs.fresh", "fail", f"{why} ({label})", {}, {},
                               make_fault("bad_output"))
    return check_row("outputs.fresh", "pass",
                       f"each of {len(calls)} calls returned plain tensors of the reference's "
                       "shapes and dtypes, copied into a region the parent chose for that call "
                       "and prefilled with poison", {}, {"calls": float(len(calls))})


def _bitwise_equal(a: CallOutcome, b: CallOutcome) -> int:
    """How many bytes differ between two calls' outputs (-1: one has no outputs)."""
    if a.answer.bad or b.answer.bad or any(not r for r in a.raw + b.raw) or len(a.raw) != len(b.raw):
        return -1
    return sum(int(np.count_nonzero(np.frombuffer(x, np.uint8) != np.frombuffer(y, np.uint8)))
               for x, y in zip(a.raw, b.raw, strict=True))


def _simple(name: str, run: Gathered, verdict: tuple[str, FaultKind] | None, passed: str) -> Check:
    failure = run.failures.get(name)
    if verdict is not None:
        return check_row(name, "fail", verdict[0], {}, {}, make_fault(verdict[1]))
    if failure is not None:
        return check_row(name, "fail", failure.detail, {}, {}, make_fault(failure.kind))
    if not run.outcomes.get(name):
        return check_row(name, "fail", "not run: the kernel already failed", {}, {},
                           make_fault("not_run"))
    return check_row(name, "pass", passed)


def _determinism(run: Gathered) -> Check:
    got = [o for _, o in run.outcomes.get("determinism", [])]
    verdict: tuple[str, FaultKind] | None = None
    for k, o in enumerate(got[1:], start=2):
        differ = _bitwise_equal(got[0], o)
        if differ != 0:
            verdict = (f"nondeterministic: call {k} on identical inputs differs from call 1 "
                       f"({'no output' if differ < 0 else f'{differ} bytes'})", "nondeterministic")
            break
    return _simple("determinism", run, verdict,
                   f"bit-identical outputs over {len(got)} calls on identical inputs")


def _state(run: Gathered, dtype: str) -> Check:
    """Inputs A then B at one buffer, then A and B each at a fresh buffer. State kept is
    blamed only where the evidence shows it: B got bit-for-bit A's answer, or B was answered
    wrong at A's buffer and right at a fresh one, or A's or B's answer moved with its buffer.
    B answered wrong at a fresh buffer too is a wrong kernel, named so (issue 42). Right and
    wrong are judged as the correctness rows judge them (`_judge`: the reference's own error
    at the kernel's dtype counted): an honest float32 norm over 9 million elements is off
    from float64 by 1.4x the bound, as PyTorch's own is, and is no wrong kernel."""
    got = [o for _, o in run.outcomes.get("state.reuse", [])]
    verdict: tuple[str, FaultKind] | None = None
    if len(got) == 4:
        verdict = _state_verdict(*got, dtype=dtype)
    return _simple("state.reuse", run, verdict, "other inputs at the same buffer matched the "
                   "reference; the same inputs at another buffer gave the same bits")


def _state_verdict(a_here: CallOutcome, b_here: CallOutcome, a_fresh: CallOutcome,
                   b_fresh: CallOutcome, *, dtype: str) -> tuple[str, FaultKind] | None:
    comp = _judge(b_here, dtype)
    if comp is None or not comp.ok:
        if _bitwise_equal(a_here, b_here) == 0:
            return ("state kept between calls: other inputs at the same buffer got "
                    "bit-for-bit the previous call's answer (caching by data_ptr or keeping "
                    "state?)", "stateful")
        fresh = _judge(b_fresh, dtype)
        if fresh is not None and fresh.ok:
            return ("state kept between calls: other inputs at the same buffer got a wrong "
                    "answer, and the right one at a fresh buffer (caching by data_ptr or "
                    "keeping state?)", "stateful")
        _, _, fresh_kind = _compare(b_fresh, dtype)
        return ("the second inputs were answered wrong at a fresh buffer too: a wrong kernel, "
                "not state kept between calls",
                _fail_kind(fresh) if fresh is not None else fresh_kind or "wrong")
    if _bitwise_equal(a_here, a_fresh) != 0:
        return ("the same inputs at another buffer gave another answer (depends on where "
                "its inputs lie)", "stateful")
    return None


def _judge(o: CallOutcome, dtype: str) -> Comparison | None:
    """One call's worst comparison as the correctness rows judge it: against the float64
    answer, and where that fails, with the reference module's own error at the kernel's
    dtype counted (`_where_dtype_reaches`); None when it is no comparison (no output)."""
    comp, _, _ = _compare(o, dtype)
    if comp is None or comp.ok:
        return comp
    judged = _where_dtype_reaches(o, dtype)
    return judged[0] if judged is not None else comp


REFERENCE_IN_THREADS = {
    "random": (
        "not decidable: the problem's own module answers by torch's random generator (two "
        "calls seeded differently gave different answers: dropout in training mode), which "
        "two threads share, so two threads' answers depend on their interleaving; one-thread "
        "calls are seeded alike in both processes and judged by the other rows"),
    "not_reentrant": (
        "not decidable: the problem's own module is not reentrant (called from two threads "
        "at once it answered differently from one thread, as the candidate did: it keeps "
        "state between calls), so the candidate cannot be held to more"),
}


def _concurrency(run: Gathered, needed: int) -> Check:
    single = [o for _, o in run.outcomes.get("concurrency.single", [])]
    paired = [o for _, o in run.outcomes.get("concurrency", [])]
    verdict: tuple[str, FaultKind] | None = None
    if len(single) == 2:
        for k, o in enumerate(paired):
            if _bitwise_equal(single[k % 2], o) != 0:
                verdict = (f"not reentrant: call {k + 1} from two threads at once answered "
                           "differently from the same inputs on one thread", "not_reentrant")
                break
    if verdict is not None and run.reference_in_threads in REFERENCE_IN_THREADS:
        return check_row("concurrency", "skip", REFERENCE_IN_THREADS[run.reference_in_threads],
                         {"threads": 2}, {"overlapping_pairs": float(run.overlaps)})
    row = _simple("concurrency", run, verdict, f"{run.overlaps} pairs of calls overlapping in "
                  f"time (of {len(paired)} calls from 2 threads) matched one-thread calls bit "
                  "for bit")
    if row.outcome == "pass" and run.overlaps < needed:
        return check_row("concurrency", "error", f"not established: only {run.overlaps} pairs "
                           f"of calls overlapped in time (at least {needed} needed)", {"threads": 2},
                           {"overlapping_pairs": float(run.overlaps)})
    return check_row(row.name, row.outcome, row.detail, {"threads": 2},
                       {"overlapping_pairs": float(run.overlaps)}, row.fault)


def _escape(run: Gathered) -> Check:
    if run.escapes:
        kinds: dict[str, float] = {}
        for e in run.escapes:
            kinds[f"escaped_{e.kind}"] = kinds.get(f"escaped_{e.kind}", 0.0) + 1.0
        return check_row("escape", "fail", f"work escaping the call: {run.escapes[0]}", {},
                           kinds, make_fault("escaped"))
    calls = sum(len(g) for g in run.outcomes.values())
    return check_row("escape", "pass", f"after each of {calls} calls no thread kept using CPU, "
                       "no thread or process a call started was alive and no input or output "
                       "changed during a pause", {}, {"calls": float(calls)})


def outcome_faults(run: Gathered, pairs: int) -> list[Check]:
    dtype = run.session.kernel.dtype
    return [_inputs_row(run), _fresh_row(run, dtype), _determinism(run), _state(run, dtype),
            _concurrency(run, pairs), _escape(run)]
