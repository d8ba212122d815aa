"""Every dimension a KernelBench problem defines, varied on its own (`correctness.shapes`).

KernelBench problems size their tensors from module-level constants (`batch_size`, `dim`,
`in_features`, ...). A shape variant of `get_inputs`' tensors alone replaces a size
everywhere it occurs, so a problem whose M, K and N are all 256 is only ever tried square.
Here each size constant is set to other values on its own (`verifier.runtimes.
dimension_variants`: +1, -1, an odd prime, past 4,608), the reference and the candidate are
started again in their sandboxes from sources with that one constant rewritten (the same
weights seed), and one call is judged. A value past 4,608 is first measured by the
sandboxed probe at the check's budget; where one call does not fit it, or where the
reference does not run at a value (a constant its forward depends on structurally), the
dimension is named in the row with why ("dim held at 2,048 for 4,611: ...").

`open_session` is how the check starts every session, at the plan's sizes or a variant's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from verifier.checks._torch_gathered import Gathered, Recipe, SessionFailure
from verifier.errors import VerifierError
from verifier.progress import Progress
from verifier.runtimes import (
    PAST_BLOCKS,
    Call,
    DimensionVariant,
    Footprint,
    ProbeFailed,
    ProblemTooLarge,
    ReferenceError_,
    ScalePlan,
    SessionMemory,
    SizesError,
    TorchSession,
    check_budget,
    dimension_variants,
    probe_problem,
    rewrite_constants,
)
from verifier.sandbox import Limits
from verifier.worker import (
    CANDIDATE_GRANTS,
    BadAnswer,
    ChildLoadError,
    KernelRaised,
    WorkerGone,
    WorkerHung,
    WorkerOverMemory,
)

__all__ = ["MAX_DIMENSION_SESSIONS", "open_session", "vary_dimensions"]

MAX_DIMENSION_SESSIONS = 16
"""At most this many restarts of both processes for the dimension variants of one check."""
GROUP = "correctness.shapes"
CANDIDATE_FAULTS = (ChildLoadError, KernelRaised, WorkerGone, WorkerHung, WorkerOverMemory,
                    BadAnswer)


def open_session(recipe: Recipe, sizes: ScalePlan, folder: Path) -> TorchSession:
    """The reference's process started at `sizes` (its footprint lays out the memory), the
    candidate's not yet; `folder` must not exist."""
    limits = Limits(cpu_s=600, wall_s=900.0, address_space=CANDIDATE_GRANTS.address_space,
                    open_files=CANDIDATE_GRANTS.open_files, processes=CANDIDATE_GRANTS.processes)
    memory = SessionMemory.of(sizes.footprint)
    if memory.extra_address_space and limits.address_space is not None:
        limits = dataclasses.replace(
            limits, address_space=limits.address_space + memory.extra_address_space)
    folder.mkdir(parents=True)
    return TorchSession(recipe.kernel, folder, recipe.build, limits, sizes=sizes,
                        arena_bytes=memory.arena_bytes, params_room=memory.params_room)


def _measured(recipe: Recipe, var: DimensionVariant, sizes: ScalePlan) -> Footprint | str:
    """One call's footprint at a variant past the plan's sizes, as the check's probe measured
    it past 4,608 (or, for another value, the sandboxed probe now), or why the dimension is
    held there (past the check's budget, or the reference does not run)."""
    budget = check_budget()
    if var.value == PAST_BLOCKS and var.name in recipe.past:
        known = recipe.past[var.name]
        if known is None:
            return (f"{var.name} held at {var.base:,}: the reference does not run at "
                    f"{var.name}={var.value:,}")
        if not known.fits(budget):
            return (f"{var.name} held at {var.base:,} for {var.value:,}: one call would need "
                    f"{known.call_bytes / 2**20:,.1f} MiB of inputs and outputs, "
                    f"{known.param_bytes / 2**20:,.1f} MiB of parameters and "
                    f"{known.flops / 1e9:,.2f} GFLOP; a check's call is limited to "
                    f"{budget.call_bytes / 2**20:,.0f} MiB, {budget.param_bytes / 2**20:,.0f} "
                    f"MiB and {budget.flops / 1e9:,.1f} GFLOP")
        return known
    source = recipe.kernel.read()[recipe.kernel.reference]
    try:
        probe = probe_problem(rewrite_constants(source, sizes.values), budget, scale=False)
    except ProblemTooLarge as exc:
        return f"{var.name} held at {var.base:,} for {var.value:,}: {exc}"
    except (ProbeFailed, SizesError) as exc:
        return (f"{var.name} held at {var.base:,}: the reference does not run at "
                f"{var.name}={var.value:,} ({exc})")
    return probe.plan.footprint or Footprint(0, 0)


def _one(run: Gathered, recipe: Recipe, var: DimensionVariant, index: int) -> str | None:
    """One variant judged into `run` (its outcome, or the candidate's failure); why the
    dimension is held instead, or None."""
    base = run.session.sizes
    sizes = ScalePlan({**base.values, var.name: var.value}, base.published, base.footprint,
                      base.published_footprint)
    if var.value > var.base + 1:
        measured = _measured(recipe, var, sizes)
        if isinstance(measured, str):
            return measured[:400]
        sizes = dataclasses.replace(sizes, footprint=measured)
    try:
        session = open_session(recipe, sizes, recipe.work / f"dims-{index}")
    except (ReferenceError_, WorkerGone, WorkerHung, KernelRaised, BadAnswer) as exc:
        return (f"{var.name} held at {var.base:,}: the reference does not run at "
                f"{var.name}={var.value:,} ({exc})")[:400]
    try:
        sub = Gathered(session, run.rng, escapes=run.escapes, per_call_s=run.per_call_s)
        session.start_candidate()
        session.init(run.init_seeds[0] if run.init_seeds else 0)
        got = sub.calls(GROUP, [Call(sub.draw(), at_dtype=True)], var.label())
        run.outcomes.setdefault(GROUP, []).extend((var.label(), o) for o in got)
    except ReferenceError_ as exc:
        return (f"{var.name} held at {var.base:,}: the reference failed at "
                f"{var.name}={var.value:,} ({exc})")[:400]
    except CANDIDATE_FAULTS as exc:
        failure = SessionFailure.of(exc, session)
        run.failures[GROUP] = SessionFailure(failure.kind, f"{failure.detail} ({var.label()})")
    except VerifierError as exc:  # the call's tensors do not fit this session's memory
        return f"{var.name} held at {var.base:,} for {var.value:,}: {exc}"[:400]
    finally:
        session.close()
    return None


def vary_dimensions(run: Gathered, per_constant: int, progress: Progress) -> None:
    """Each size constant of the problem varied on its own (see the module doc), one call
    each; stops at the candidate's first failure. The dimensions held go to the row's notes."""
    recipe = run.recipe
    if recipe is None:
        return
    variants, held = dimension_variants(recipe.constants, run.session.sizes.run_values(),
                                        lambda n: int(run.rng.integers(0, n)), per_constant)
    notes = run.notes.setdefault(GROUP, [])
    notes += held
    for k, var in enumerate(variants[:MAX_DIMENSION_SESSIONS]):
        progress(f"dimension {var.label()}: both processes restarted at that size")
        why = _one(run, recipe, var, k)
        if why is not None:
            notes.append(why)
        if GROUP in run.failures:
            return
    if len(variants) > MAX_DIMENSION_SESSIONS:
        notes.append(f"{len(variants) - MAX_DIMENSION_SESSIONS} more variants not run "
                     f"(at most {MAX_DIMENSION_SESSIONS} a check)")
