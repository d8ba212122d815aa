"""Compare claimed predicates with a fresh run: the `reproduction/v1` body.

`compare` is pure (attest predicates in, a `ReproductionPredicate` out); `reproduce_kernel`
runs `check` and `bench_runs` on an unpacked kernel and then calls `compare`. Each claimed
predicate may come with the logged entry it is (`Claimed.entry`): its verdict rows then name
that entry. Fetching the entry,
checking the digest, signing and submitting belong to `ktl reproduce` (client).

Verdict per claim:

- verification: each claimed check outcome and the overall verdict. A claimed
  pass that fails here is refuted (with the failing check's evidence); a claimed
  failure that does not recur is inconclusive (failures can depend on inputs).
- benchmark, per shape: speed-up ratios are compared, never absolute times, run
  by run: the claim's per-run speed-ups against `runs` fresh runs here, with the
  test in `verifier.stats` under a `DecisionPolicy` (tolerance, confidence;
  recorded in the body): refuted when the claim overstates by more than the
  tolerance with that confidence, confirmed when the estimated overstatement is
  within the tolerance, inconclusive otherwise (saying how many more runs would
  decide). On different hardware a refutation is inconclusive, and the reason
  names every environment difference (also a typed list in the claim). A
  measurement that the bench itself distrusts because of the kernel
  (timer tampering, faster than the roofline, wrong outputs after timing) refutes
  the claim; one distrusted for noise is inconclusive.
- overall: refuted if any claim is refuted, confirmed if there is at least one
  claim and all are confirmed, else inconclusive.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from attest.ops import shape_key, shape_label
from attest.predicates import (
    BENCHMARK_V1,
    REPRODUCTION_SCHEMA_VERSION,
    VERIFICATION_V1,
    BenchmarkPredicate,
    BenchmarkResult,
    ClaimResult,
    DecisionPolicy,
    Environment,
    EnvironmentDiff,
    JudgedEntry,
    Measurement,
    Predicate,
    ReproductionPredicate,
    ReproductionTarget,
    SpeedupStatistics,
    VerificationPredicate,
)
from verifier.benchmark import DEFAULT_RUNS
from verifier.errors import ReproduceError
from verifier.progress import Progress
from verifier.reproduce._verdict import (
    DEFAULT_POLICY,
    environment_diff,
    make_policy,
    speedup_verdict,
)
from verifier.stats import Decision

__all__ = [
    "BENCHMARK_V1",
    "DEFAULT_POLICY",
    "VERIFICATION_V1",
    "Claimed",
    "ReproduceSettings",
    "claimed_threads",
    "compare",
    "compare_benchmark",
    "compare_verification",
    "make_policy",
    "overall_verdict",
    "reproduce_kernel",
]

MAX_REASON = 1500


@dataclass(frozen=True)
class Claimed:
    """A claimed predicate to re-run and, when it was fetched from a log, the entry it is
    (index and leaf hash), which every verdict row on it then names."""

    predicate: Predicate
    entry: JudgedEntry | None = None


def _claim(claim: str, verdict: Decision, claimed: Measurement, measured: Measurement,
           reason: str, statistics: SpeedupStatistics | None = None,
           diff: Sequence[EnvironmentDiff] = ()) -> ClaimResult:
    return ClaimResult(claim=claim, verdict=verdict, claimed=claimed, measured=measured,
                       reason=reason[:MAX_REASON], statistics=statistics,
                       environment_diff=tuple(diff) or None)


def _pass_fail(outcome: str) -> str:
    return "pass" if outcome == "pass" else "fail"


def _verdict_of(outcome: str) -> Measurement:
    return Measurement(verdict=_pass_fail(outcome))


NOTHING = Measurement()


def compare_verification(claimed: VerificationPredicate,
                         measured: VerificationPredicate) -> list[ClaimResult]:
    """Claims of a verification/v1 predicate against a fresh one."""
    mine = {c.name: c for c in measured.checks}
    out: list[ClaimResult] = []
    for c in claimed.checks:
        if c.outcome == "skip":
            continue
        label = f"verification.check[{c.name}]"
        got = mine.get(c.name)
        if got is None or got.outcome == "skip":
            out.append(_claim(label, "inconclusive", _verdict_of(c.outcome), NOTHING,
                              f"check {c.name} was not run here"))
            continue
        want, have = _pass_fail(c.outcome), _pass_fail(got.outcome)
        if want == have:
            out.append(_claim(label, "confirmed", _verdict_of(want), _verdict_of(have),
                              f"{c.name}: {got.detail}"))
        elif want == "pass":
            out.append(_claim(label, "refuted", _verdict_of(want), _verdict_of(have),
                              f"claimed pass, fails here: {got.detail}"))
        else:
            out.append(_claim(label, "inconclusive", _verdict_of(want), _verdict_of(have),
                              f"claimed failure did not recur here (failures can depend on the "
                              f"inputs): {got.detail}"))
    seed_note = f"seed {measured.seed} here, {claimed.seed} claimed"
    want, have = claimed.verdict, measured.verdict
    if want == have:
        out.append(_claim("verification.verdict", "confirmed", _verdict_of(want),
                          _verdict_of(have), f"same verdict ({seed_note})"))
    elif want == "pass":
        failing = [c.name for c in measured.checks if c.outcome in ("fail", "error")]
        out.append(_claim("verification.verdict", "refuted", _verdict_of("pass"),
                          _verdict_of("fail"),
                          f"claimed pass; failing here: {', '.join(failing)} ({seed_note})"))
    else:
        out.append(_claim("verification.verdict", "inconclusive", _verdict_of("fail"),
                          _verdict_of("pass"), f"claimed failure did not recur ({seed_note})"))
    return out


def _measurement(result: BenchmarkResult) -> Measurement:
    return Measurement(speedup=result.speedup, speedup_ci95=result.speedup_ci95)


def compare_benchmark(claimed: BenchmarkPredicate, measured: BenchmarkPredicate,
                      policy: DecisionPolicy = DEFAULT_POLICY) -> list[ClaimResult]:
    """Claims of a benchmark/v1 predicate (one per shape) against a fresh one, run by run."""
    op = claimed.workload.op
    mine = {shape_key(op, r.shape): r for r in measured.results}
    diff = environment_diff(claimed.environment, measured.environment)
    out: list[ClaimResult] = []
    for r in claimed.results:
        key = shape_key(op, r.shape)
        label = f"benchmark.speedup[{key}]"
        claimed_m = _measurement(r)
        got = mine.get(key)
        # typed faults only (never the notes' text): those of this shape, and when the shape
        # has no result, also those of the whole run (a build or child failure)
        own = [f for f in measured.faults
               if (f.shape is not None and shape_key(op, f.shape) == key)
               or (got is None and f.shape is None)]
        if own:
            out.append(_claim(label, "refuted", claimed_m,
                              NOTHING if got is None else _measurement(got),
                              f"the measurement here exposes the kernel ({own[0].kind}): "
                              f"{own[0].detail}", diff=diff))
            continue
        if got is None:
            out.append(_claim(label, "inconclusive", claimed_m, NOTHING,
                              f"shape {key} was not measured here", diff=diff))
            continue
        # the notes are quoted to say why, never read to decide: `trusted` decides
        why = "; ".join(n for n in measured.notes if shape_label(op, r.shape) in n) or \
            "the measurement here was not stable enough"
        v = speedup_verdict(r.run_speedups(), got.run_speedups(), measured.trusted, why, diff,
                            policy)
        out.append(_claim(label, v.decision, claimed_m, _measurement(got), v.reason,
                          statistics=v.statistics(), diff=diff))
    return out


def overall_verdict(verdicts: Iterable[str]) -> Decision:
    """Refuted if any claim is refuted, confirmed if there are claims and all are confirmed."""
    seen = list(verdicts)
    if "refuted" in seen:
        return "refuted"
    if seen and all(v == "confirmed" for v in seen):
        return "confirmed"
    return "inconclusive"


def _claimed(items: Sequence[Claimed | Predicate]) -> list[Claimed]:
    return [c if isinstance(c, Claimed) else Claimed(c) for c in items]


def compare(
    claimed: Sequence[Claimed | Predicate],
    target: ReproductionTarget,
    environment: Environment,
    verification: VerificationPredicate | None = None,
    benchmark: BenchmarkPredicate | None = None,
    policy: DecisionPolicy = DEFAULT_POLICY,
) -> ReproductionPredicate:
    """The reproduction/v1 predicate for `claimed` predicates vs fresh ones.

    `verification` / `benchmark` are the fresh predicates (None if not run); `target`
    names the logged entry; `environment` is this machine's fingerprint; `policy`
    (tolerance, confidence) decides speed-up claims and is recorded in the body.
    """
    claims: list[ClaimResult] = []
    for item in _claimed(claimed):
        pred = item.predicate
        if isinstance(pred, VerificationPredicate):
            if verification is None:
                raise ReproduceError("a verification claim needs a fresh verification body")
            rows = compare_verification(pred, verification)
        elif isinstance(pred, BenchmarkPredicate):
            if benchmark is None:
                raise ReproduceError("a benchmark claim needs a fresh benchmark body")
            rows = compare_benchmark(pred, benchmark, policy)
        else:
            raise ReproduceError(f"cannot reproduce predicate type {pred.PREDICATE_TYPE!r}; only "
                                 "verification/v1 and benchmark/v1 claims can be re-run")
        claims += [dataclasses.replace(r, entry=item.entry) for r in rows]
    return _body(target, environment, claims, policy)


def _body(target: ReproductionTarget, environment: Environment, claims: Sequence[ClaimResult],
          policy: DecisionPolicy) -> ReproductionPredicate:
    return ReproductionPredicate(
        schema_version=REPRODUCTION_SCHEMA_VERSION, target=target, environment=environment,
        policy=policy, claims=tuple(claims), verdict=overall_verdict(c.verdict for c in claims))


_LEGACY_THREADS = re.compile(r"kernel OMP_NUM_THREADS=([0-9]{1,4})")


def claimed_threads(body: BenchmarkPredicate) -> int:
    """The thread count a benchmark claim was measured with: `method.threads`.

    Entries logged before `method.threads` existed record it only in a note's prose
    ("kernel OMP_NUM_THREADS=N"), which is read for them alone, so that re-running one of
    those entries gives its kernel the threads it was measured with; absent both, 1 (the
    bench default)."""
    if body.method.threads is not None:
        return body.method.threads
    for note in body.notes:
        found = _LEGACY_THREADS.search(note)
        if found:
            return max(1, min(int(found.group(1)), 1024))
    return 1


@dataclass(frozen=True)
class ReproduceSettings:
    """How `reproduce_kernel` re-runs claims: the check budget (None: the claimed one), each
    benchmark run's time budget, the number of runs, the decision policy, progress."""

    budget: str | None = None
    time_budget_s: float = 10.0
    runs: int = DEFAULT_RUNS
    policy: DecisionPolicy = DEFAULT_POLICY
    progress: Progress | None = None


def reproduce_kernel(
    kernel_dir: str | Path,
    claimed: Sequence[Claimed | Predicate],
    target: ReproductionTarget,
    settings: ReproduceSettings = ReproduceSettings(),
) -> ReproductionPredicate:
    """Re-run what `claimed` claims on the unpacked kernel and compare.

    The check reuses the claimed seed and budget (unless `settings.budget` is given), so the
    same inputs are replayed; the benchmark uses the claimed shapes, seed and threads,
    `settings.runs` independent runs of up to `settings.time_budget_s` each.
    """
    from verifier.benchmark import bench_runs
    from verifier.checks import check
    from verifier.environment import environment_fingerprint
    from verifier.kernel import KernelSpec
    from verifier.runtimes import get_runtime

    items = _claimed(claimed)
    runtime = KernelSpec.load(kernel_dir).runtime
    here = Environment.from_json(environment_fingerprint(runtime))
    unavailable = get_runtime(runtime).unavailable_reason()
    if unavailable:  # e.g. a cuda kernel on a machine without a GPU: not evidence either way
        rows = [_claim(c.predicate.PREDICATE_TYPE, "inconclusive", NOTHING, NOTHING,
                       f"not re-run: runtime {runtime!r} unavailable here: {unavailable}")
                for c in items]
        return _body(target, here, [dataclasses.replace(r, entry=c.entry)
                                    for r, c in zip(rows, items, strict=True)], settings.policy)
    verification: VerificationPredicate | None = None
    benchmark: BenchmarkPredicate | None = None
    for item in items:
        pred = item.predicate
        if isinstance(pred, VerificationPredicate) and verification is None:
            verification = check(kernel_dir, budget=settings.budget or pred.budget,
                                 seed=pred.seed, progress=settings.progress).to_predicate()
        elif isinstance(pred, BenchmarkPredicate) and benchmark is None:
            benchmark = bench_runs(
                kernel_dir, runs=settings.runs, shapes=[dict(s) for s in pred.workload.shapes],
                seed=pred.workload.seed, time_budget_s=settings.time_budget_s,
                threads=claimed_threads(pred), progress=settings.progress).to_predicate()
    return compare(items, target, here, verification, benchmark, settings.policy)
