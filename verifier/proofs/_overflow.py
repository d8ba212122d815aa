"""`proof.overflow`: Frama-C EVA over every dimension up to 2^31-1, after its self-test."""

from __future__ import annotations

from pathlib import Path

from attest.predicates import Check
from verifier.kernel import KernelSpec
from verifier.ops import OpSpec
from verifier.progress import Progress
from verifier.proofs._eva import Analysis, run_eva
from verifier.proofs._harness import (
    OVERFLOW_BOUNDS,
    PLANTED_ENTRY,
    overflow_harness,
    planted_overflow,
)
from verifier.proofs._rows import (
    HARNESS,
    OVERFLOW_ROW,
    PLANTED,
    SELF_TEST_CPU_S,
    ProofSettings,
    bound_text,
    make_record,
    make_row,
    stage_sources,
)
from verifier.proofs._tools import Tool

__all__ = ["overflow_row", "self_test"]


def self_test(tool: Tool, op: OpSpec, where: Path) -> Analysis:
    """EVA on a planted 32-bit index product of the same op; caught if it alarms there."""
    where.mkdir(parents=True, exist_ok=True)
    (where / HARNESS).write_text(overflow_harness(op, PLANTED_ENTRY), encoding="utf-8")
    (where / PLANTED).write_text(planted_overflow(op), encoding="utf-8")
    return run_eva(tool, where, (HARNESS, PLANTED), (PLANTED,), PLANTED_ENTRY, SELF_TEST_CPU_S)


def overflow_row(spec: KernelSpec, op: OpSpec, tool: Tool, settings: ProofSettings,
                 workdir: Path, progress: Progress) -> Check:
    """The `proof.overflow` row of a C kernel."""
    bounds = dict(OVERFLOW_BOUNDS[op.name])
    shapes = [dict(bounds)]
    progress("proof.overflow: self-test (planted 32-bit index product)")
    planted = self_test(tool, op, workdir / "proof-overflow-self-test")
    if planted.failed is not None or not any(a.kind == "signed_overflow" for a in planted.counted):
        why = planted.failed or "no alarm"
        return make_row(OVERFLOW_ROW, "error", f"Frama-C {tool.version} EVA missed the planted "
                        f"32-bit index overflow ({why}); the tool is not trusted on the kernel",
                        shapes, make_record(tool, bounds, "not_run", "missed", planted.cpu_s))
    where = workdir / "proof-overflow"
    files, reserved = stage_sources(spec, where, strip=True)
    if reserved:
        return make_row(OVERFLOW_ROW, "inconclusive", "the source declares or defines "
                        f"{', '.join(reserved)}, which the proof harness provides: not run",
                        shapes, make_record(tool, bounds, "inconclusive", "caught", 0.0))
    (where / HARNESS).write_text(overflow_harness(op, spec.entry), encoding="utf-8")
    progress(f"proof.overflow: Frama-C {tool.version} EVA, every shape with {bound_text(bounds)}")
    found = run_eva(tool, where, (HARNESS, *files), files, spec.entry, settings.cpu_s)
    if found.failed is not None:
        return make_row(OVERFLOW_ROW, "inconclusive", f"{found.failed} (never a pass)", shapes,
                        make_record(tool, bounds, "inconclusive", "caught", found.cpu_s))
    wide = (f" (not counted: {len(found.wide)} alarm(s) at a 64-bit limit, which a loop "
            "bounded by a dimension of at most 2^31-1 cannot reach: "
            + "; ".join(alarm.text() for alarm in found.wide) + ")") if found.wide else ""
    if found.counted:
        listed = "; ".join(alarm.text() for alarm in found.counted) + wide
        return make_row(OVERFLOW_ROW, "warn", f"{len(found.counted)} alarm(s) for every shape "
                        f"with 1 <= {bound_text(bounds).replace(', ', ', 1 <= ')}: {listed}",
                        shapes,
                        make_record(tool, bounds, "alarms", "caught", found.cpu_s,
                                    f"{found.counted[0].file}:{found.counted[0].line}"))
    return make_row(OVERFLOW_ROW, "pass", (
        f"for every shape with 1 <= {bound_text(bounds).replace(', ', ', 1 <= ')}, Frama-C "
        f"{tool.version} EVA finds no possible signed overflow, unsigned wrap, division by zero "
        "or invalid shift in the source's integer arithmetic (OpenMP pragmas removed: the "
        "sequential program; the self-test's planted 32-bit index was flagged); empty shapes "
        "are proof.memory's, and memory accesses and float values are not covered by this "
        f"row{wide}"), shapes,
        make_record(tool, bounds, "no_alarm", "caught", found.cpu_s))
