"""`ktl check` for a kernel defined by a PyTorch module (runtimes torch and triton).

The candidate (`ModelNew`) and the reference (`Model`) run in separate sandboxed
processes (`verifier.runtimes.TorchSession`); the parent draws every input, compares
every output in float64 under the dtype's tolerance (`verifier.tensors`) and writes the
rows. Checks, each over fresh inputs drawn from this run's seed (recorded):

- build: the solution's `load_inline` extensions, built in the compiler's sandbox or
  taken from the build cache (plain torch and Triton solutions build nothing);
- static: the findings on the solution's source (`verifier.runtimes.audit_solution`); a
  fallback to PyTorch or patching of torch/time fails, the rest is shown as evidence;
- exercised: what this run did not exercise (`skip`, named): the other side of every
  device-dependent branch (`x.is_cuda`, `x.device`, `torch.cuda.is_available()`), and for
  runtime triton on a CPU the compiled kernel ("interpreter path only");
- reference: what the op is (the reference's sha256, torch's version, the dtype, the
  tolerance, the weight seeds);
- correctness.random: calls at `get_inputs`' shapes, several weight initialisations
  (each `torch.manual_seed(init_seed)`, fresh per run, recorded);
- correctness.shapes: variants of `get_inputs`' shapes the reference accepts (one size
  substituted everywhere it occurs), so a kernel hard-coding the example shape fails; then
  each size constant of the problem set on its own (past 4,608; +-1 and an odd prime with
  full) in processes restarted at it (`_torch_dims`), the dimensions held named;
- correctness.distributions: inputs drawn wide (100x the example's spread), large (the
  dtype's largest value to the 1/4), off a large offset, of both signs and tiny;
- correctness.large: squares near the dtype's largest value (row sums overflow);
- special_values: NaN, +-Inf, +-0 and subnormals planted in each floating input alone and
  in all of them together;
  every correctness row also asks the reference module at the kernel's dtype: a difference
  only the float64 reference shows (GELU's NaN at +inf in float32) is reported, not failed;
- inputs.unchanged, outputs.fresh (every output copied into a region the parent chose
  and prefilled with poison for that call; a plain tensor of the reference's shape and
  dtype), determinism, state.reuse (the same inputs at another buffer; other inputs at
  the same buffer and at a fresh one: state is blamed only where the fresh one is right),
  concurrency (two threads at once), escape (threads, processes or
  memory writes outliving a call);
- sandbox: the layers in force for the candidate.

A NaN where the reference has a number, or a mismatch anywhere, fails; there is no
wildcard value.
"""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attest.predicates import Check, Environment, TorchOp, limit_metrics
from verifier.checks._report import BUDGETS, CheckReport, check_row, make_fault
from verifier.checks._torch_dims import open_session, vary_dimensions
from verifier.checks._torch_gathered import LARGE, Gathered, Recipe, SessionFailure
from verifier.checks._torch_rows import (
    correctness_row,
    exercised_row,
    large_row,
    outcome_faults,
    reference_row,
    static_row,
    torch_statement,
)
from verifier.environment import environment_fingerprint
from verifier.errors import BuildError, VerifierError
from verifier.gpu import probe
from verifier.kernel import KernelSpec
from verifier.progress import Progress, quiet
from verifier.proofs import not_for_runtime
from verifier.runtimes import (
    Call,
    ProbeFailed,
    ProblemTooLarge,
    ReferenceError_,
    TorchKernel,
    audit_solution,
    build_extensions,
    check_budget,
    check_ceiling,
    probe_known,
    probe_problem,
    scaled_variants,
    torch_unavailable,
)
from verifier.sandbox import sandbox_detail, sandbox_metrics
from verifier.tensors import DISTRIBUTIONS, FLOAT_DTYPES, LARGE_WHAT, TOLERANCES, special_fill
from verifier.worker import (
    BadAnswer,
    ChildLoadError,
    KernelRaised,
    WorkerGone,
    WorkerHung,
    WorkerOverMemory,
)

__all__ = ["TORCH_PLANS", "TorchPlan", "torch_check"]

CONCURRENCY_COMMANDS = 6
INTERPRETED_CONCURRENCY = (
    "not run: runtime triton on a CPU runs through Triton's interpreter, which patches "
    "triton.language globally while a kernel runs, so two threads cannot run interpreted "
    "kernels at once (a compiled kernel on a GPU is judged here)")


@dataclass(frozen=True)
class TorchPlan:
    inits: int
    random: int
    shapes: int
    special: int
    repeats: int
    pairs: int
    dims: int
    """Values per size constant, each run in processes restarted at it (`_torch_dims`)."""


TORCH_PLANS = {"quick": TorchPlan(inits=2, random=3, shapes=3, special=2, repeats=3, pairs=4,
                                  dims=1),
               "full": TorchPlan(inits=3, random=8, shapes=6, special=4, repeats=4, pairs=8,
                                 dims=3)}


def torch_check(spec: KernelSpec, budget: str = "quick", seed: int | None = None,
                progress: Progress | None = None) -> CheckReport:
    """The suite on a torch/triton kernel folder's spec; never raises for kernel faults."""
    if budget not in BUDGETS:
        raise VerifierError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    progress = progress or quiet
    kernel = TorchKernel.from_spec(spec)
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    env = Environment.from_json(environment_fingerprint(kernel.runtime))

    statement: dict[str, Any] = {}

    def report(rows: list[Check]) -> CheckReport:
        return CheckReport(kernel.name, "torch", budget, seed, env, tuple(rows),
                           TorchOp.from_json(statement) if statement else None)

    reason = torch_unavailable(kernel.runtime)
    if reason:
        return report([check_row("build", "error", f"runtime {kernel.runtime!r} unavailable: {reason}",
                                 metrics=limit_metrics("runtime_unavailable"))])
    if kernel.uses_cuda:
        why = ("this machine has no GPU" if probe().count < 1 else
               "this harness hands the module CPU tensors: running it on the GPU is not part "
               "of this verifier build")
        return report([check_row(
            "build", "error", "not run: the solution is CUDA (cuda_sources / .cu), which needs "
            f"a CUDA build of torch and a GPU; {why}, so nothing was built or judged (a CUDA "
            "solution never passes without running)", metrics=limit_metrics("needs_gpu"))])
    with tempfile.TemporaryDirectory(prefix="ktl-torch-check-") as tmp:
        rows = _suite(kernel, TORCH_PLANS[budget], seed, Path(tmp), progress, statement)
        # C++ (load_inline) and Triton sources get no proof: their statements say so
        return report([*rows, *not_for_runtime(kernel.runtime)])


def _suite(kernel: TorchKernel, plan: TorchPlan, seed: int, work: Path, progress: Progress,
           statement: dict[str, Any]) -> list[Check]:
    """The rows; `statement` gets the TorchOp fields once the reference has run."""
    progress("building the solution's extensions (if any)")
    try:
        build = build_extensions(kernel, work)
    except BuildError as exc:
        return [check_row("build", "fail", str(exc)[:1500], {}, {}, make_fault("build"))]
    findings = audit_solution(kernel.read()[kernel.solution])
    rows = [check_row("build", "pass", build.detail, {}, {"cached": 1.0 if build.cached else 0.0,
                                                           "build_s": build.seconds}),
            static_row(findings), exercised_row(findings, kernel.runtime, gpu=False)]
    reference, budget, ceiling = kernel.read()[kernel.reference], check_budget(), check_ceiling()
    known = probe_known(reference, budget, ceiling=ceiling)
    progress("sizes that fit a check here: as measured before in this process" if known else
             "measuring one call of the problem (sizes that fit a check here)")
    try:
        probed = known or probe_problem(reference, budget, ceiling=ceiling)
    except ProbeFailed as exc:
        # one call that fits nowhere here is this machine's limit, typed (`ktl suite` counts it)
        limit = limit_metrics("does_not_fit") if isinstance(exc, ProblemTooLarge) else None
        return [*rows, check_row("reference", "error", f"the reference module could not run: {exc}"[:1500],
                                 metrics=limit)]
    progress(f"starting the reference and the candidate in their sandboxes ({probed.plan.describe()})")
    recipe = Recipe(kernel, build, work, probed.constants, probed.past)
    try:
        session = open_session(recipe, probed.plan, work / "main")
    except (ReferenceError_, WorkerGone, WorkerHung, KernelRaised) as exc:
        return [*rows, check_row("reference", "error", f"the reference module could not run: {exc}"[:1500])]
    run = Gathered(session, np.random.default_rng(seed), recipe=recipe)
    return _judged(run, plan, rows, progress, statement)


def _judged(run: Gathered, plan: TorchPlan, rows: list[Check], progress: Progress,
            statement: dict[str, Any]) -> list[Check]:
    """The rows of a started session (`run.session`, of `run.recipe`), which it closes (the
    reference failing is the check's error, never the kernel's fail)."""
    session, recipe = run.session, run.recipe
    assert recipe is not None
    try:
        try:
            session.start_candidate()
        except (ChildLoadError, KernelRaised, WorkerGone, WorkerHung, BadAnswer) as exc:
            detail = f"the solution could not be loaded: {exc}"
            return [*rows, check_row("load", "fail", detail[:1500], {}, {}, make_fault("load"))]
        _gather(run, plan, progress)
        progress("comparing with the reference's outputs")
        kernel = recipe.kernel
        tol = TOLERANCES[kernel.dtype]
        rows.append(reference_row(kernel, session, run.init_seeds, run.loaded, tol))
        statement.update(torch_statement(kernel, session.torch_version, tol, run.init_seeds))
        rows += _rows(run, plan)
    except ReferenceError_ as exc:
        return [*rows, check_row("reference", "error", f"the reference module failed during the "
                                 f"check ({session.sizes.describe()}): {exc}"[:1500])]
    finally:
        session.close()
    if session.candidate is not None and session.candidate.result is not None:
        layers = session.candidate.result.layers
        rows.append(check_row("sandbox", "pass", sandbox_detail(layers), {}, sandbox_metrics(layers)))
    return rows


def _guarded(run: Gathered, group: str, body: Callable[[], None]) -> None:
    """Run one group of calls; a crash, hang, bad answer or exception is that group's fault,
    and the candidate is restarted (and re-initialised) for the next group."""
    try:
        body()
        return
    except ReferenceError_:
        raise
    except (WorkerGone, WorkerHung, WorkerOverMemory, BadAnswer, KernelRaised) as exc:
        run.failures[group] = SessionFailure.of(exc, run.session)
    if run.restarts >= 3:
        return
    run.restarts += 1
    try:
        run.session.start_candidate()
        if run.init_seeds:
            run.session.init(run.init_seeds[0])
    except (WorkerGone, WorkerHung, WorkerOverMemory, BadAnswer, KernelRaised) as exc:
        run.failures.setdefault("restart", SessionFailure.of(exc, run.session))
        run.restarts = 99


def _gather(run: Gathered, plan: TorchPlan, progress: Progress) -> None:
    session = run.session
    run.init_seeds = [int(run.rng.integers(0, 2**31)) for _ in range(plan.inits)]
    for k, init_seed in enumerate(run.init_seeds):
        progress(f"weights #{k + 1} (seed {init_seed}): {plan.random} calls on fresh inputs")

        def random(init_seed: int = init_seed) -> None:
            run.loaded.append(session.init(init_seed))
            run.calls("correctness.random",
                      [Call(run.draw(), at_dtype=True) for _ in range(plan.random)],
                      f"weights seed {init_seed}")

        _guarded(run, "correctness.random" if k == 0 else f"correctness.random.{k}", random)
        if "restart" in run.failures:
            return
    progress("scaled shapes, special values, determinism, state, two threads")
    steps: list[tuple[str, Callable[[], None]]] = [
        ("correctness.shapes", lambda: _shapes(run, plan, progress)),
        ("special_values", lambda: _special(run, plan)),
        ("correctness.distributions", lambda: _distributions(run, plan)),
        ("correctness.large", lambda: _large(run, plan)),
        ("determinism", lambda: _determinism(run, plan)),
        ("state.reuse", lambda: _state(run)),
        ("concurrency", lambda: _concurrency(run, plan)),
    ]
    if run.session.kernel.runtime == "triton" and not run.session.gpu:
        steps = steps[:-1]  # see INTERPRETED_CONCURRENCY
    for group, body in steps:
        if "restart" in run.failures:
            return
        _guarded(run, group, body)


def _shapes(run: Gathered, plan: TorchPlan, progress: Progress) -> None:
    """Variants of the example's shapes in this session, then each size constant of the
    problem varied on its own in sessions restarted at it (`_torch_dims`)."""
    session = run.session
    variants = scaled_variants(session, run.rng, plan.shapes)
    run.outcomes.setdefault("correctness.shapes", [])
    for shapes in variants:
        run.calls("correctness.shapes", [Call(run.draw(shapes), at_dtype=True)],
                  "shapes " + " ".join("x".join(map(str, s)) for s in shapes))
    vary_dimensions(run, plan.dims, progress)


def _special(run: Gathered, plan: TorchPlan) -> None:
    """NaN, +-Inf, +-0 and subnormals planted in each floating input alone, then in all of
    them together (round 4: planted only in the first input, a matmul skipping A == 0 lost
    0 * Inf in B); each call also asks the reference module at the kernel's dtype."""
    floats = [i for i, s in enumerate(run.session.problem.inputs)
              if s.kind == "tensor" and s.dtype in FLOAT_DTYPES and s.shape]
    if not floats:
        return
    plants: list[list[int]] = [[i] for i in floats]
    plants += [floats] * max(plan.special - len(plants), 1 if len(floats) > 1 else 0)
    calls = []
    for where in plants:
        args = run.draw()
        for i in where:
            args[i] = special_fill(args[i], run.rng)
        calls.append(Call(args, at_dtype=True))
    run.calls("special_values", calls, "NaN/Inf/0/subnormal planted in inputs "
              + ", ".join(sorted({str(i) for w in plants for i in w})) + " (alone and together)")


def _distributions(run: Gathered, plan: TorchPlan) -> None:
    """Inputs from distributions beyond the example's (`verifier.tensors.DISTRIBUTIONS`:
    wide, large, offset, both signs, tiny), one call each per round."""
    for _ in range(max(1, plan.special // 2)):
        for kind in DISTRIBUTIONS:
            run.calls("correctness.distributions", [Call(run.draw(spread=kind), at_dtype=True)],
                      f"{kind} values")


def _large(run: Gathered, plan: TorchPlan) -> None:
    """Magnitudes whose squares are representable but whose row sums are not
    (`verifier.tensors.draw_large`): the C path's correctness.large for a torch module."""
    for _ in range(max(1, plan.special // 2)):
        run.calls("correctness.large", [Call(run.draw(spread=LARGE), at_dtype=True)], LARGE_WHAT)


def _determinism(run: Gathered, plan: TorchPlan) -> None:
    args = run.draw()
    region = run.session.regions.next + 1000
    run.session.regions.next += 1
    run.calls("determinism", [Call(args, region) for _ in range(plan.repeats)], "identical inputs")


def _state(run: Gathered) -> None:
    first, second = run.draw(), run.draw()
    region = run.session.regions.next + 2000
    run.calls("state.reuse", [Call(first, region)], "inputs A at buffer R")
    # B is judged as the correctness rows judge (the reference's own error at the kernel's
    # dtype counted), so an honest long reduction is not called wrong here
    run.calls("state.reuse", [Call(second, region, at_dtype=True)],
              "inputs B at the same buffer R")
    run.calls("state.reuse", [Call(first)], "inputs A again at a fresh buffer")
    run.calls("state.reuse", [Call(second, at_dtype=True)], "inputs B again at a fresh buffer")


def _concurrency(run: Gathered, plan: TorchPlan) -> None:
    sets = [run.draw() for _ in range(2)]
    single = run.calls("concurrency.single", [Call(a) for a in sets], "one thread")
    run.outcomes["concurrency.single"] = [("one thread", o) for o in single]
    for _ in range(CONCURRENCY_COMMANDS):  # until enough calls were seen at once (a busy machine)
        paired = [Call(sets[k % 2]) for k in range(2 * plan.pairs)]
        run.calls("concurrency", paired, "two threads at once", threads=2)
        run.overlaps += run.session.last_overlaps
        if run.overlaps >= max(1, plan.pairs // 2):
            break
    # two threads share torch's generator, and a module may keep state between calls
    # itself: where the candidate's answers differed, the problem's own module is asked
    got = [o for _, o in run.outcomes.get("concurrency", [])]
    if len(single) == 2 and any(o.raw != single[k % 2].raw for k, o in enumerate(got)):
        if run.session.draws_randomly(sets[0], run.timeout_s(2)):
            run.reference_in_threads = "random"
        elif not run.session.reference_alike_in_threads(sets, plan.pairs,
                                                        run.timeout_s(2 * plan.pairs)):
            run.reference_in_threads = "not_reentrant"


def _rows(run: Gathered, plan: TorchPlan) -> list[Check]:
    dtype = run.session.kernel.dtype
    randoms = sorted({g for g in [*run.outcomes, *run.failures] if g.startswith("correctness.random")})
    rows = [correctness_row("correctness.random", run, dtype, randoms),
            correctness_row("correctness.shapes", run, dtype, ["correctness.shapes"]),
            correctness_row("correctness.distributions", run, dtype,
                            ["correctness.distributions"])]
    rows += [large_row(run, dtype, rows[0].outcome == "pass"),
             correctness_row("special_values", run, dtype, ["special_values"])]
    rows += outcome_faults(run, max(1, plan.pairs // 2))
    if run.session.kernel.runtime == "triton" and not run.session.gpu:
        rows = [check_row("concurrency", "skip", INTERPRETED_CONCURRENCY, {"threads": 2})
                if r.name == "concurrency" else r for r in rows]
    return rows
