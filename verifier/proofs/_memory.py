"""`proof.memory`: ESBMC on the catalogue's harness, after its self-test on a planted bug."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from attest.predicates import Check, Fault, FaultKind
from verifier.kernel import KernelSpec
from verifier.ops import OpSpec
from verifier.progress import Progress
from verifier.proofs._esbmc import READ_ONLY, Finding, Run, run_esbmc
from verifier.proofs._harness import (
    PLANTED_ENTRY,
    defined_names,
    memory_harness,
    planted_memory,
)
from verifier.proofs._preprocess import origin, preprocess
from verifier.proofs._rows import (
    HARNESS,
    MEMORY_ROW,
    PLANTED,
    SELF_TEST_CPU_S,
    ProofSettings,
    bound_text,
    make_record,
    make_row,
    shape_text,
    stage_sources,
)
from verifier.proofs._tools import Tool

__all__ = ["FALSIFY_SHARE", "memory_row", "prove", "self_test"]

FALSIFY_SHARE = 0.25
"""Of the kernel's CPU limit, the share the bug search may use before the full unwinding."""


def _located(found: Finding, where: Path) -> Finding:
    """`found` with its place in the kernel's own file, read back from the .i's line markers
    (the parent wrote nothing there since; the .i is the preprocessor's output, read once)."""
    if found.file is None or found.line is None or not found.file.endswith(".i"):
        return found
    unit = where / found.file
    if unit.is_symlink() or not unit.is_file():
        return dataclasses.replace(found, file=None, line=None)
    place = origin(unit.read_text(encoding="utf-8", errors="replace"), found.line)
    if place is None:
        return dataclasses.replace(found, file=None, line=None)
    return dataclasses.replace(found, file=place[0], line=place[1])


def prove(run: Run, cpu_s: int) -> Finding:
    """Bug search first (incremental unwinding), then the full unwinding with what is left
    (also when the search ran out of its share: it only looks for bugs)."""
    first = run_esbmc(run, "falsify", max(1, int(cpu_s * FALSIFY_SHARE)))
    if first.verdict not in ("unknown", "out_of_time"):
        return _located(first, run.workdir)
    left = max(1, int(cpu_s - first.cpu_s))
    second = run_esbmc(run, "prove", left)
    return _located(Finding(second.verdict, second.why, first.cpu_s + second.cpu_s,
                            second.shape, second.file, second.line, second.function),
                    run.workdir)


def self_test(tool: Tool, op: OpSpec, bounds: Mapping[str, int], where: Path,
              flags: Sequence[str]) -> Finding:
    """The planted off-by-one through the same generator, preprocessor, tool and flags; the
    caller trusts the tool only if this is refuted at exactly the bounds, in the planted
    file."""
    where.mkdir(parents=True, exist_ok=True)
    (where / HARNESS).write_text(memory_harness(op, PLANTED_ENTRY, bounds), encoding="utf-8")
    (where / PLANTED).write_text(planted_memory(op, bounds), encoding="utf-8")
    units, failed = preprocess(where, [PLANTED], flags, READ_ONLY)
    if failed is not None:
        return Finding("inconclusive", failed, 0.0)
    run = Run(tool, where, (HARNESS, *units), op.dims, bounds)
    return prove(run, SELF_TEST_CPU_S)


def caught(found: Finding, bounds: Mapping[str, int]) -> bool:
    return (found.verdict == "refuted" and found.file == PLANTED
            and found.shape is not None and dict(found.shape) == dict(bounds))


def _fault_kind(found: Finding) -> FaultKind:
    what = found.why.lower()
    if "division by zero" in what or "shift" in what:
        return "undefined_behaviour"
    return "memory_error"


def memory_row(spec: KernelSpec, op: OpSpec, tool: Tool, settings: ProofSettings,
               workdir: Path, progress: Progress) -> Check:
    """The `proof.memory` row of a C kernel."""
    bounds = settings.bounds_of(op)
    shapes = [dict(bounds)]
    progress(f"proof.memory: self-test (planted off-by-one at {shape_text(bounds)})")
    planted = self_test(tool, op, bounds, workdir / "proof-memory-self-test", spec.flags)
    if not caught(planted, bounds):
        return make_row(MEMORY_ROW, "error", f"ESBMC {tool.version} missed the planted "
                        f"off-by-one at {shape_text(bounds)} ({planted.verdict}: {planted.why}); "
                        "the tool is not trusted on the kernel", shapes,
                        make_record(tool, bounds, "not_run", "missed", planted.cpu_s))
    spent = planted.cpu_s
    files, reserved = stage_sources(spec, workdir / "proof-memory", strip=False)
    if reserved:
        return make_row(MEMORY_ROW, "inconclusive", "the source declares or defines "
                        f"{', '.join(reserved)}, which the proof harness provides: not run",
                        shapes, make_record(tool, bounds, "inconclusive", "caught", spent))
    where = workdir / "proof-memory"
    units, failed = preprocess(where, files, spec.flags, READ_ONLY)
    hidden = sorted({name for unit in units
                     for name in defined_names((where / unit).read_text(errors="replace"))})
    if failed is not None or hidden:
        why = failed or (f"the preprocessed source defines {', '.join(hidden)}, which the "
                         "proof harness provides")
        return make_row(MEMORY_ROW, "inconclusive", f"not run: {why}", shapes,
                        make_record(tool, bounds, "inconclusive", "caught", spent))
    (where / HARNESS).write_text(memory_harness(op, spec.entry, bounds), encoding="utf-8")
    progress(f"proof.memory: ESBMC {tool.version}, every shape with {bound_text(bounds)}")
    run = Run(tool, where, (HARNESS, *units), op.dims, bounds)
    found = prove(run, settings.cpu_s)
    return _memory_outcome(found, tool, bounds, shapes)


def _memory_outcome(found: Finding, tool: Tool, bounds: Mapping[str, int],
                    shapes: list[dict[str, int]]) -> Check:
    if found.verdict == "proved":
        return make_row(MEMORY_ROW, "pass", (
            f"for every shape with {bound_text(bounds)} and every float input, the source run "
            "sequentially makes no out-of-bounds or invalid access, no division by zero and no "
            f"undefined shift (ESBMC {tool.version}, every loop fully unwound; libm "
            "over-approximated; the self-test's planted off-by-one was caught); nothing is "
            "claimed about larger shapes, the optimised binary, parallel execution or the "
            "values"), shapes, make_record(tool, bounds, "proved", "caught", found.cpu_s))
    if found.verdict == "refuted":
        at = f"{found.file}:{found.line}" if found.file else "an unknown place"
        shape = f" at shape {shape_text(found.shape)}" if found.shape else ""
        return make_row(MEMORY_ROW, "fail", f"counterexample{shape}: {found.why} at {at}"
                        + (f" (function {found.function})" if found.function else ""),
                        shapes, make_record(tool, bounds, "refuted", "caught", found.cpu_s, found),
                        Fault(kind=_fault_kind(found),
                              shape=dict(found.shape) if found.shape else None))
    return make_row(MEMORY_ROW, "inconclusive", f"no proof within {bound_text(bounds)}: "
                    f"{found.why} (never a pass)", shapes,
                    make_record(tool, bounds, "inconclusive", "caught", found.cpu_s))
