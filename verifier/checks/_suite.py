"""`ktl check`: the verification suite, producing a `verification/v1` body.

The kernel runs first, in its own sandboxed child, on inputs the parent wrote;
the child dumps whole arenas (guard regions included); only then does the parent
compute the float64 reference and judge. Checks:

- build: the release build with the manifest's flags (relaxed math is recorded);
- audit.library: the built library's imports, strings and instructions against the
  runtime's allowlist (findings fail unless kernel.toml declares them with a reason);
- correctness.random / correctness.edge / correctness.large: fresh random inputs
  (seed recorded), edge shapes (1, primes, non-multiples of 8/16/32/64, empty),
  large magnitudes; within the op's tolerance;
- correctness.claimed: the op's default bench shapes and its long reductions, within the same
  tolerance (whose reduction term is what float32 reaches there: `verifier.ops.growth`);
- special_values: NaN, +-Inf, denormals and +-0 handled as the reference does;
- inputs.unchanged, outputs.poisoned, guards.canaries: over every call (inputs read-only
  and a guard page after, or before, every buffer in the kernel's process);
- determinism: bitwise identical outputs for identical inputs;
- state.reuse: the same buffers called again with new contents, and those contents at a fresh
  buffer (state is blamed only where that one is answered right, or the answer is stale);
- sanitizer.asan_ubsan and sanitizer.tsan (when the built library starts threads).
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from attest.predicates import Check, Environment, MeasuredKernel, limit_metrics
from verifier.checks._judge import judge
from verifier.checks._overflow import HUGE_SHAPES, index_overflow, room, shapes_to_run
from verifier.checks._plan import KernelRun, plan_cases
from verifier.checks._report import (
    BUDGETS,
    CHECK_ADDRESS_SPACE,
    MAX_DETAIL,
    OUTCOMES,
    Budget,
    CheckReport,
    check_row,
    make_fault,
)
from verifier.checks._run import run_cases
from verifier.checks._sanitizers import Sanitizing, sanitizer_rows
from verifier.checks._static import audit_row
from verifier.checks._torch_suite import torch_check
from verifier.environment import environment_fingerprint
from verifier.errors import BuildError, RuntimeUnavailableError, VerifierError
from verifier.kernel import KernelSpec, measured_kernel
from verifier.ops import OPS
from verifier.progress import Progress, quiet
from verifier.proofs import OVERFLOW_ROW, proof_rows
from verifier.runtimes import get_runtime
from verifier.sandbox import (
    Limits,
    sandbox_detail,
    sandbox_metrics,
    scratch_dir,
)
from verifier.worker import Markers

__all__ = ["BUDGETS", "OUTCOMES", "CheckReport", "check"]


def _index_overflow_row(run: KernelRun, plan: Budget, rng: np.random.Generator,
                        progress: Progress) -> Check:
    shapes = {"shapes": [dict(s) for s in HUGE_SHAPES.get(run.op.name, ())]}
    if not plan.huge_index:
        return check_row("index.overflow", "skip", "run with --budget full (it maps inputs of "
                           "16-24 GiB lazily and takes seconds to minutes)", shapes)
    progress("32-bit index overflow: shapes past 2^32 elements")
    here = room()
    ran = shapes_to_run(run.op, here)[0]
    if ran:  # what this machine runs (past 2^31 only, where past 2^32 does not fit)
        shapes = {"shapes": [dict(s) for s in ran]}
    outcome, detail, metrics = index_overflow(run, progress, rng, here)
    return check_row("index.overflow", outcome, detail, shapes, metrics,
                       make_fault("index_overflow") if outcome == "fail" else None)


# -- entry point -----------------------------------------------------------------------


def check(
    directory: str | Path,
    budget: str = "quick",
    seed: int | None = None,
    progress: Progress | None = None,
) -> CheckReport:
    """Run the verification suite on the kernel folder; never raises for kernel faults.

    Raises KernelSpecError for a malformed folder and VerifierError for a bad budget. The
    report names the folder it checked (name, version, source digest).
    """
    report = _check(directory, budget, seed, progress)
    measured = measured_kernel(directory)
    return dataclasses.replace(
        report, kernel_ref=None if measured is None else MeasuredKernel.from_json(measured))


def _check(
    directory: str | Path,
    budget: str,
    seed: int | None,
    progress: Progress | None,
) -> CheckReport:
    if budget not in BUDGETS:
        raise VerifierError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    progress = progress or quiet
    spec = KernelSpec.load(directory)
    if spec.is_torch:
        return torch_check(spec, budget, seed, progress)
    plan = BUDGETS[budget]
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    if not 0 <= seed < 2**63:
        raise VerifierError("seed must be between 0 and 2**63 - 1")
    rng = np.random.default_rng(seed)
    env = Environment.from_json(environment_fingerprint(spec.runtime))

    def report(rows: Sequence[Check]) -> CheckReport:
        return CheckReport(spec.name, spec.op, budget, seed, env, tuple(rows))

    runtime = get_runtime(spec.runtime)
    reason = runtime.unavailable_reason()
    if reason:
        return report([check_row("build", "error", f"runtime {spec.runtime!r} unavailable: {reason}",
                                 metrics=limit_metrics("runtime_unavailable"))])
    op = OPS[spec.op]
    compiler = runtime.compiler()
    with scratch_dir("ktl-check-") as work:
        progress("building the kernel")
        try:
            artifact = runtime.build(spec, "release", work)
        except (BuildError, RuntimeUnavailableError) as exc:
            return report([check_row("build", "fail", str(exc)[:1000], {}, {}, make_fault("build"))])
        rows = [_build_row(spec, *compiler)]
        audited, audit = audit_row(artifact, spec)
        rows.append(audited)
        cases = plan_cases(op, plan, rng)
        limits = Limits(cpu_s=120, wall_s=300.0, address_space=CHECK_ADDRESS_SPACE,
                        step_wall_s=plan.step_wall_s)
        markers = Markers.draw()
        run = KernelRun.of(artifact, spec, op, work, markers)
        layers = run_cases(run, cases, limits, rng, progress)
        progress("comparing with the float64 reference")
        rows.extend(judge(op, cases, plan, markers))
        rows.append(check_row("sandbox", "pass", sandbox_detail(layers), {},
                                sandbox_metrics(layers)))
        hung = next((c.failure for c in cases if c.fault == "hang"), None)
        if hung:
            why = f"not run: the kernel already failed ({hung})"
            rows += [check_row(row, "fail", why, {}, {}, make_fault("not_run"))
                     for row in ("index.overflow", "sanitizer.asan_ubsan", "sanitizer.tsan")]
            return report([*rows, *proof_rows(spec, plan.proofs, work, progress)])
        rows.append(_index_overflow_row(run, plan, rng, progress))
        sanitizing = Sanitizing(spec, op, work, 60.0 if budget == "quick" else 150.0,
                                3 * plan.step_wall_s)
        rows += sanitizer_rows(sanitizing, plan, rng, progress, audit)
        rows += proof_rows(spec, plan.proofs, work, progress)
    return report(_confirmed_overflow(rows))


def _build_row(spec: KernelSpec, compiler: str, version: str) -> Check:
    """The passing `build` row: the compiler, its version and the flags (relaxed math is
    recorded)."""
    relaxed = " (relaxed floating point recorded: results may differ from IEEE)" if spec.relaxed_math else ""
    return check_row("build", "pass",
                     f"{compiler} {version} {' '.join(spec.flags)}{relaxed}".strip(),
                     {"flags": list(spec.flags)},
                     {"relaxed_math": 1.0 if spec.relaxed_math else 0.0})


def _confirmed_overflow(rows: Sequence[Check]) -> list[Check]:
    """`proof.overflow`'s alarm becomes a failure where `index.overflow` failed: the dynamic
    row ran a shape past 2^31 and saw the overflow the analysis warned of."""
    ran = {row.name: row for row in rows}
    dynamic, proof = ran.get("index.overflow"), ran.get(OVERFLOW_ROW)
    if dynamic is None or proof is None or dynamic.outcome != "fail" or proof.outcome != "warn":
        return list(rows)
    confirmed = dataclasses.replace(
        proof, outcome="fail", fault=make_fault("index_overflow"),
        detail=f"confirmed by index.overflow: {proof.detail}"[:MAX_DETAIL])
    return [confirmed if row is proof else row for row in rows]
