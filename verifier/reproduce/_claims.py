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
- benchmark, per shape (docs/reproducing.md, "Verdicts"): first what the claim's own evidence decides
  (`attest.verdicts`): figures its raw samples do not give, or a time below the physical
  floor, refute it before anything is measured. Then speed-up ratios are compared, never
  absolute times, run by run: the claim's per-run speed-ups against `runs` fresh runs here
  (`_verdict.speedup_verdict`): refuted when the lower bound of the overstatement is beyond
  the tolerance widened by the shift measured for each kind of difference between the two
  sittings' conditions, confirmed when the whole interval is within it, else unsupported for
  a weak claim (its own record says its measurement was disturbed or thin) and inconclusive
  otherwise, saying what would decide. A refutation by the test stands only if a second
  sitting of fresh runs, tested alone, refutes too, when the sequential budget leaves time
  for one. On different hardware a refutation is not given. A measurement that the bench
  itself distrusts because of the kernel (timer tampering, faster than the roofline, wrong
  outputs after timing) refutes the claim; one distrusted for noise alone (its runs
  disagree) is tested over its runs, their spread counted, and looked at again: it may refute,
  never confirm; one distrusted for anything else decides nothing.
- overall (`attest.verdicts.overall_verdict`): refuted if any claim is refuted, confirmed if
  there is at least one claim and all are confirmed, unsupported if any is, else
  inconclusive.
"""

from __future__ import annotations

import copy
import dataclasses
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import verifier.benchmark
from attest.ops import CATALOGUE_VERSION, OP_DIMS, shape_key
from attest.predicates import (
    BENCHMARK_V1,
    FAILING_OUTCOMES,
    REPRODUCTION_SCHEMA_VERSION,
    VERIFICATION_V1,
    BenchmarkPredicate,
    BenchmarkResult,
    Check,
    ClaimResult,
    Conditions,
    DecisionPolicy,
    Environment,
    EnvironmentDiff,
    JudgedEntry,
    Measurement,
    Predicate,
    ReproductionPredicate,
    ReproductionTarget,
    VerificationPredicate,
)
from attest.verdicts import (
    Finding,
    evidence_findings,
    noise_only,
    overall_verdict,
    weaknesses,
)
from verifier.benchmark import (
    DEFAULT_RUNS,
    BenchSettings,
    conditions_differ,
    merge_conditions,
    over_runs,
    runs_disagree,
)
from verifier.benchmark import Conditions as Probed
from verifier.checks import check
from verifier.device import device_diff
from verifier.environment import environment_fingerprint
from verifier.errors import ReproduceError
from verifier.gpu import probe as gpu_probe
from verifier.kernel import KernelSpec
from verifier.progress import Progress, quiet
from verifier.reproduce._verdict import (
    DEFAULT_POLICY,
    Sitting,
    SpeedupVerdict,
    Verdict,
    environment_diff,
    make_policy,
    margin_for,
    one_line,
    speedup_verdict,
)
from verifier.runtimes import get_runtime
from verifier.stats import MAX_LOOKS, max_runs

__all__ = [
    "BENCHMARK_V1",
    "DEFAULT_POLICY",
    "VERIFICATION_V1",
    "Claimed",
    "Fresh",
    "ReproduceSettings",
    "claimed_threads",
    "compare",
    "compare_benchmark",
    "compare_verification",
    "fresh_seed",
    "make_policy",
    "not_rerun",
    "overall_verdict",
    "reproduce_kernel",
    "unknown_op_reason",
]

MAX_REASON = 1500


@dataclass(frozen=True)
class Claimed:
    """A claimed predicate to re-run and, when it was fetched from a log, the entry it is
    (index and leaf hash), which every verdict row on it then names; for a benchmark claim,
    the raw samples its body names (already checked against their sha256) and the key that
    signed it (its other claims about the same kernel are compared with it)."""

    predicate: Predicate
    entry: JudgedEntry | None = None
    samples: bytes | None = None
    signer: str | None = None


DECISIVE: frozenset[str] = frozenset({"samples_mismatch", "below_floor"})
"""Findings that refute a claim at once, before anything is measured; the others
(`samples_unreadable`, `contradicts`) make it weak."""


def evidence_of(item: Claimed, items: Sequence[Claimed]) -> tuple[Finding, ...]:
    """What a benchmark claim's own evidence decides (`attest.verdicts.evidence_findings`):
    its raw samples, the physical floor, its key's other benchmark claims in `items`."""
    pred = item.predicate
    if not isinstance(pred, BenchmarkPredicate):
        return ()
    others = [c.predicate for c in items
              if c is not item and isinstance(c.predicate, BenchmarkPredicate)
              and item.signer is not None and c.signer == item.signer]
    return evidence_findings(pred, item.samples, others)


def decided_before_measuring(pred: BenchmarkPredicate, findings: Sequence[Finding]) -> bool:
    """Whether the decisive findings settle every shape of `pred` (nothing to measure)."""
    hit = {f.shape for f in findings if f.kind in DECISIVE}
    return None in hit or all(shape_key(pred.workload.op, r.shape) in hit for r in pred.results)


def _claim(claim: str, verdict: Verdict, claimed: Measurement, measured: Measurement,
           reason: str, diff: Sequence[EnvironmentDiff] = ()) -> ClaimResult:
    """A verdict row; its `why` (one line) is the reason's first clause."""
    return ClaimResult(claim=claim, verdict=verdict, claimed=claimed, measured=measured,
                       reason=reason[:MAX_REASON], statistics=None,
                       environment_diff=tuple(diff) or None,
                       why=one_line(reason.split("; ")[0]))


def _tested(claim: str, claimed: Measurement, measured: Measurement,
            diff: Sequence[EnvironmentDiff], v: SpeedupVerdict) -> ClaimResult:
    """A verdict row the statistical test gave, with its statistics and its own `why`."""
    return dataclasses.replace(_claim(claim, v.decision, claimed, measured, v.reason, diff),
                               statistics=v.statistics(), why=one_line(v.why))


def _pass_fail(outcome: str) -> str:
    return "pass" if outcome == "pass" else "fail"


def _verdict_of(outcome: str) -> Measurement:
    return Measurement(verdict=_pass_fail(outcome))


NOTHING = Measurement()


UNDECIDED = ("skip", "inconclusive")
"""Row outcomes that decide nothing: a claimed one claims nothing, a measured one (a tool
missing here, a proof out of time on this machine) neither confirms nor refutes."""


def _seed_phrase(runs: Sequence[tuple[str, Check | None]]) -> str:
    """`pass at the claimed seed 7, fail at this reproducer's seed 91: <detail>`."""
    parts = []
    for label, got in runs:
        if got is None or got.outcome in UNDECIDED:
            parts.append(f"not run at {label}")
        else:
            parts.append(f"{_pass_fail(got.outcome)} at {label}: {got.detail}")
    return "; ".join(parts)


def compare_verification(claimed: VerificationPredicate, measured: VerificationPredicate,
                         own: VerificationPredicate | None = None) -> list[ClaimResult]:
    """Claims of a verification/v1 predicate against fresh ones: `measured` re-ran the
    claimed seed (the same inputs), `own` (if given) a seed of this reproducer's, so a kernel
    tuned to the claimed inputs is caught; each reason says which seed found what."""
    mine = {c.name: c for c in measured.checks}
    fresh = None if own is None else {c.name: c for c in own.checks}
    at_claimed = f"the claimed seed {measured.seed}"
    at_own = f"this reproducer's seed {own.seed}" if own is not None else ""
    out: list[ClaimResult] = []
    for c in claimed.checks:
        if c.outcome in UNDECIDED:
            continue
        label = f"verification.check[{c.name}]"
        runs: list[tuple[str, Check | None]] = [(at_claimed, mine.get(c.name))]
        if fresh is not None:
            runs.append((at_own, fresh.get(c.name)))
        ran = [got for _, got in runs if got is not None and got.outcome not in UNDECIDED]
        want = _pass_fail(c.outcome)
        if not ran:
            said = next((got.detail for _, got in runs if got is not None), "")
            out.append(_claim(label, "inconclusive", _verdict_of(want), NOTHING,
                              f"check {c.name} was not run here" + (f": {said}" if said else "")
                              + " (not counted as confirmed)"))
            continue
        failing = [got for got in ran if _pass_fail(got.outcome) == "fail"]
        have = "fail" if failing else "pass"
        why = _seed_phrase(runs)
        if want == "pass" and failing:
            out.append(_claim(label, "refuted", _verdict_of(want), _verdict_of(have),
                              f"claimed pass, fails here: {why}"))
        elif want == have:
            out.append(_claim(label, "confirmed", _verdict_of(want), _verdict_of(have),
                              f"{c.name}: {why}"))
        else:
            out.append(_claim(label, "inconclusive", _verdict_of(want), _verdict_of(have),
                              f"claimed failure did not recur here (failures can depend on the "
                              f"inputs): {why}"))
    out.append(_verdict_row(claimed.verdict, [(at_claimed, measured), (at_own, own)]))
    return out


def _verdict_row(claimed_verdict: str,
                 fresh: Sequence[tuple[str, VerificationPredicate | None]]) -> ClaimResult:
    """The `verification.verdict` row: the claimed verdict against each seed's run."""
    ran = [(label, body) for label, body in fresh if body is not None]
    failing = {label: [c.name for c in body.checks if c.outcome in FAILING_OUTCOMES]
               for label, body in ran}
    said = "; ".join(f"{body.verdict} at {label}"
                     + (f" (failing: {', '.join(failing[label])})" if failing[label] else "")
                     for label, body in ran)
    measured_verdict = "fail" if any(body.verdict == "fail" for _, body in ran) else "pass"
    if claimed_verdict == measured_verdict:
        return _claim("verification.verdict", "confirmed", _verdict_of(claimed_verdict),
                      _verdict_of(measured_verdict), f"same verdict: {said}")
    if claimed_verdict == "pass":
        return _claim("verification.verdict", "refuted", _verdict_of("pass"),
                      _verdict_of("fail"), f"claimed pass; {said}")
    return _claim("verification.verdict", "inconclusive", _verdict_of("fail"),
                  _verdict_of("pass"), f"claimed failure did not recur: {said}")


def _measurement(result: BenchmarkResult) -> Measurement:
    return Measurement(speedup=result.speedup, speedup_ci95=result.speedup_ci95)


def compare_benchmark(claimed: BenchmarkPredicate, measured: BenchmarkPredicate | None,
                      policy: DecisionPolicy = DEFAULT_POLICY, look: int = 1,
                      evidence: Sequence[Finding] = ()) -> list[ClaimResult]:
    """Claims of a benchmark/v1 predicate (one per shape) against a fresh one, run by run, at
    sequential look `look` (see `verifier.stats`). `evidence` (`evidence_of`) is decided
    first: a shape its own samples or the physical floor contradict is refuted whatever was
    measured (`measured` may then be None); the other findings make the claim weak."""
    op = claimed.workload.op
    out: list[ClaimResult] = []
    for r in claimed.results:
        key = shape_key(op, r.shape)
        decisive = [f for f in evidence if f.kind in DECISIVE and f.shape in (None, key)]
        if decisive:
            what = ("impossible" if decisive[0].kind == "below_floor"
                    else "contradicted by its own raw samples")
            out.append(_claim(f"benchmark.speedup[{key}]", "refuted", _measurement(r), NOTHING,
                              f"{what}, decided before measuring: "
                              f"{'; '.join(f.describe() for f in decisive)}"))
        else:
            weak = [w.describe() for w in weaknesses(claimed, r.shape)] + \
                [f.describe() for f in evidence if f.shape in (None, key)]
            out.append(_measured_row(claimed, r, measured, policy, look, weak))
    return out


def _measured_row(claimed: BenchmarkPredicate, r: BenchmarkResult,
                  measured: BenchmarkPredicate | None, policy: DecisionPolicy, look: int,
                  weak: Sequence[str]) -> ClaimResult:
    """One shape's row from the fresh measurement: a typed fault refutes; else the rule of
    `speedup_verdict` (weak: what makes the claim weak, described)."""
    op = claimed.workload.op
    key = shape_key(op, r.shape)
    label = f"benchmark.speedup[{key}]"
    claimed_m = _measurement(r)
    weak_phrase = f"; the claim is weak: {'; '.join(weak)}" if weak else ""
    if measured is None:
        return _claim(label, "unsupported" if weak else "inconclusive", claimed_m, NOTHING,
                      f"shape {key} was not measured here{weak_phrase}")
    got = next((m for m in measured.results if shape_key(op, m.shape) == key), None) \
        or _renamed(claimed, r, measured)
    diff = (*environment_diff(claimed.environment, measured.environment),
            *device_diff(claimed.device, measured.device))[:32]
    # typed faults only (never the notes' text): those of this shape, and when the shape
    # has no result, also those of the whole run (a build or child failure)
    own = [f for f in measured.faults
           if (f.shape is not None and shape_key(op, f.shape) == key)
           or (got is None and f.shape is None)]
    if own:
        return _claim(label, "refuted", claimed_m,
                      NOTHING if got is None else _measurement(got),
                      f"the measurement here exposes the kernel ({own[0].kind}): "
                      f"{own[0].detail}", diff=diff)
    if got is None:
        return _claim(label, "unsupported" if weak else "inconclusive", claimed_m, NOTHING,
                      f"shape {key} was not measured here{weak_phrase}", diff=diff)
    cc = claimed.conditions.to_json() if claimed.conditions is not None else None
    mc = measured.conditions.to_json() if measured.conditions is not None else None
    apart = conditions_differ(cc, mc)
    # `trusted` decides; the typed caveats of this shape and of the whole run say why
    # (the notes are prose, never read)
    why = "; ".join(c.detail for c in measured.caveats
                    if c.shape is None or shape_key(op, c.shape) == key) or \
        "the measurement here was not stable enough"
    v = speedup_verdict(r.run_speedups(), got.run_speedups(),
                        Sitting(measured.trusted, why, diff, apart, margin_for(apart, cc, mc),
                                tuple(weak), noise_only(measured)),
                        policy, look=look)
    return _tested(label, claimed_m, _measurement(got), diff, v)


def _renamed(claimed: BenchmarkPredicate, r: BenchmarkResult,
             measured: BenchmarkPredicate) -> BenchmarkResult | None:
    """The one measured result of a one-shape claim outside the op catalogue (a torch
    module's) whose sizes are the claim's under other names: a claim logged before torch
    shapes were named after the reference's arguments (`a0_0`, `a0_1`: issue 42)."""
    if claimed.workload.op in OP_DIMS or len(claimed.results) != 1 \
            or len(measured.results) != 1:
        return None
    got = measured.results[0]
    return got if sorted(got.shape.values()) == sorted(r.shape.values()) else None


def _claimed(items: Sequence[Claimed | Predicate]) -> list[Claimed]:
    return [c if isinstance(c, Claimed) else Claimed(c) for c in items]


@dataclass(frozen=True)
class Fresh:
    """The fresh predicates measured here (None where not run): the verification at the
    claimed seed, the benchmark, and the verification at a seed of this reproducer's."""

    verification: VerificationPredicate | None = None
    benchmark: BenchmarkPredicate | None = None
    own_verification: VerificationPredicate | None = None


def compare(
    claimed: Sequence[Claimed | Predicate],
    target: ReproductionTarget,
    environment: Environment,
    fresh: Fresh = Fresh(),
    policy: DecisionPolicy = DEFAULT_POLICY,
    look: int = 1,
) -> ReproductionPredicate:
    """The reproduction/v1 predicate for `claimed` predicates vs `fresh` ones (benchmark
    claims tested at sequential look `look`).

    `target` names the logged entry; `environment` is this machine's fingerprint; `policy`
    (tolerance, confidence) decides speed-up claims and is recorded in the body.
    """
    verification, benchmark = fresh.verification, fresh.benchmark
    own_verification = fresh.own_verification
    claims: list[ClaimResult] = []
    items = _claimed(claimed)
    for item in items:
        pred = item.predicate
        if isinstance(pred, VerificationPredicate):
            if verification is None:
                raise ReproduceError("a verification claim needs a fresh verification body")
            rows = compare_verification(pred, verification, own_verification)
        elif isinstance(pred, BenchmarkPredicate):
            evidence = evidence_of(item, items)
            if benchmark is None and not decided_before_measuring(pred, evidence):
                raise ReproduceError("a benchmark claim needs a fresh benchmark body")
            rows = compare_benchmark(pred, benchmark, policy, look, evidence)
        else:
            raise ReproduceError(f"cannot reproduce predicate type {pred.PREDICATE_TYPE!r}; only "
                                 "verification/v1 and benchmark/v1 claims can be re-run")
        claims += [dataclasses.replace(r, entry=item.entry) for r in rows]
    return _body(target, environment, claims, policy,
                 benchmark.conditions if benchmark is not None else None)


def _body(target: ReproductionTarget, environment: Environment, claims: Sequence[ClaimResult],
          policy: DecisionPolicy, conditions: Conditions | None = None) -> ReproductionPredicate:
    """The body, with the op catalogue this verifier knows and the conditions the fresh
    benchmark was measured under (None when none was run)."""
    return ReproductionPredicate(
        schema_version=REPRODUCTION_SCHEMA_VERSION, target=target, environment=environment,
        policy=policy, claims=tuple(claims), verdict=overall_verdict(c.verdict for c in claims),
        catalogue_version=CATALOGUE_VERSION, conditions=conditions)


def not_rerun(claimed: Sequence[Claimed | Predicate], target: ReproductionTarget, why: str,
              environment: Environment,
              policy: DecisionPolicy = DEFAULT_POLICY) -> ReproductionPredicate:
    """The predicate when the claims cannot be re-run here (an op this verifier does not
    know, a runtime this machine lacks): one inconclusive row per claim entry, saying why
    (and naming its entry). Not evidence either way."""
    rows = [dataclasses.replace(
        _claim(c.predicate.PREDICATE_TYPE, "inconclusive", NOTHING, NOTHING, f"not re-run: {why}"),
        entry=c.entry) for c in _claimed(claimed)]
    return _body(target, environment, rows, policy)


def unknown_op_reason(op: str, catalogue_version: int) -> str:
    """The one wording of 'this verifier does not know the op' (issue 25)."""
    return f"op {op} is not known to this verifier (catalogue version {catalogue_version})"


def claimed_cold(pred: BenchmarkPredicate) -> bool:
    """Re-measure in the claim's mode: calls separated by an L2 flush when the claim's were
    and a GPU is here to run the device path (without one the host path re-measures, in
    its only mode, and the device difference keeps a refutation from standing)."""

    return bool(pred.device is not None and pred.device.cold and gpu_probe().error is None)


def claimed_threads(body: BenchmarkPredicate) -> int:
    """The thread count a benchmark claim was measured with: `method.threads`, or 1 (the
    bench default) where an entry does not record it. A note's prose is never read for it:
    notes are the claimant's words, not a field any rule may decide on."""
    return body.method.threads if body.method.threads is not None else 1


@dataclass(frozen=True)
class ReproduceSettings:
    """How `reproduce_kernel` re-runs claims: the check budget (None: the claimed one), each
    benchmark run's time budget, the number of runs, the decision policy, progress, and the
    seconds further sequential looks may take (0: none)."""

    budget: str | None = None
    time_budget_s: float = BenchSettings.time_budget_s
    runs: int = DEFAULT_RUNS
    policy: DecisionPolicy = DEFAULT_POLICY
    progress: Progress | None = None
    sequential_budget_s: float = 0.0


def reproduce_kernel(
    kernel_dir: str | Path,
    claimed: Sequence[Claimed | Predicate],
    target: ReproductionTarget,
    settings: ReproduceSettings = ReproduceSettings(),
) -> ReproductionPredicate:
    """Re-run what `claimed` claims on the unpacked kernel and compare.

    The check runs twice with the claimed budget (unless `settings.budget` is given): at the
    claimed seed, so the same inputs are replayed, and at a fresh seed of its own; the benchmark uses the claimed shapes, seed and threads,
    `settings.runs` independent runs of up to `settings.time_budget_s` each.
    While a speed-up claim stays undecided and `settings.sequential_budget_s` seconds are
    not spent, it measures another batch of runs and tests again at the next sequential look
    (`verifier.stats`), saying so; it stops sooner where the runs the test asks for (its
    `more_runs`) are more than all the looks left could measure.
    """
    items = _claimed(claimed)
    spec = KernelSpec.load(kernel_dir)
    runtime = spec.runtime
    here = Environment.from_json(environment_fingerprint(runtime))
    unavailable = get_runtime(runtime).unavailable_reason()
    if unavailable:  # e.g. a cuda kernel on a machine without a GPU: not evidence either way
        return not_rerun(items, target, f"runtime {runtime!r} unavailable here: {unavailable}",
                         here, settings.policy)
    progress = settings.progress or quiet
    verification: VerificationPredicate | None = None
    own: VerificationPredicate | None = None
    benchmark: BenchmarkPredicate | None = None
    bench = BenchSettings()
    like: dict[str, Any] | None = None
    for item in items:
        pred = item.predicate
        if isinstance(pred, VerificationPredicate) and verification is None:
            level = settings.budget or pred.budget
            progress(f"checking at the claimed seed {pred.seed}")
            verification = check(kernel_dir, budget=level, seed=pred.seed,
                                 progress=settings.progress).to_predicate()
            own_seed = fresh_seed(avoid=pred.seed)
            progress(f"checking at a seed of this reproducer's, {own_seed}")
            own = check(kernel_dir, budget=level, seed=own_seed,
                        progress=settings.progress).to_predicate()
        elif isinstance(pred, BenchmarkPredicate) and benchmark is None and \
                not decided_before_measuring(pred, evidence_of(item, items)):
            # a torch kernel is timed at its reference's get_inputs() shapes, never given ones
            shapes = None if spec.is_torch else [dict(s) for s in pred.workload.shapes]
            bench = BenchSettings(shapes=shapes, seed=pred.workload.seed,
                                  time_budget_s=settings.time_budget_s,
                                  threads=claimed_threads(pred), cold=claimed_cold(pred))
            # measured under the claim's conditions where this machine can recreate them
            like = pred.conditions.to_json() if pred.conditions is not None else None
            benchmark = verifier.benchmark.bench_runs(kernel_dir, settings.runs, bench,
                                   progress=settings.progress, like=like).to_predicate()
    body = compare(items, target, here, Fresh(verification, benchmark, own), settings.policy)
    if benchmark is None:
        return body
    looks = _Looks(kernel_dir, items, target, here, verification, own, settings, bench, like)
    return looks.settle(benchmark, body)


def _within_reach(room: int, looks_left: int, batch: int) -> int:
    """The most further runs the sequential looks can still measure: the looks left times a
    batch, within the claim's room under the run limit. Not the time budget: a look starts
    while any of it is left, and the count asked for is itself an estimate (a reproduction
    cut by a pace estimate left an honest claim open that asked for 16 runs where 15 fit)."""
    return max(min(room, looks_left * batch), 0)


def _fewest_wanted(body: ReproductionPredicate, claims: Sequence[str]) -> int:
    """The fewest further runs the test asks for (`more_runs`) among `claims`' rows."""
    return min((c.statistics.more_runs for c in body.claims if c.claim in claims
                and c.statistics is not None and c.statistics.more_runs is not None),
               default=0)


def _undecided(body: ReproductionPredicate) -> list[str]:
    """Speed-up claims a further look could decide: inconclusive by the test itself, with
    more runs here able to decide (never on other hardware, where no count of runs may
    refute)."""
    return [c.claim for c in body.claims if _speedup_row(c)
            and c.verdict in ("inconclusive", "unsupported") and c.statistics is not None
            and c.statistics.more_runs is not None
            and not any(d.hardware for d in c.environment_diff or ())]


@dataclass(frozen=True)
class _Looks:
    """What every further sequential look re-uses: the kernel, the claims, the fresh
    verifications, the settings and the benchmark's."""

    kernel_dir: str | Path
    claimed: Sequence[Claimed]
    target: ReproductionTarget
    env: Environment
    verification: VerificationPredicate | None
    own: VerificationPredicate | None
    settings: ReproduceSettings
    bench: BenchSettings
    like: Mapping[str, Any] | None = None
    """The claim's conditions, which every sitting is measured under where it can be."""

    def settle(self, fresh: BenchmarkPredicate,
               body: ReproductionPredicate) -> ReproductionPredicate:
        """More looks while speed-up claims stay undecided, then a second sitting for every
        claim the test refuted, all within the sequential budget."""
        started = time.monotonic()
        body = self._sequential(fresh, body, started)
        return self._confirm(body, started)

    def _sequential(self, fresh: BenchmarkPredicate, body: ReproductionPredicate,
                    started: float, only: Sequence[str] | None = None) -> ReproductionPredicate:
        """Further looks while speed-up claims (of `only`, when given) stay undecided and the
        runs the test asks for could still be measured (`_within_reach`)."""
        progress = self.settings.progress or quiet
        budget_s = self.settings.sequential_budget_s
        batch = max(1, self.settings.runs)
        look = 1
        while True:
            open_claims = [c for c in _undecided(body) if only is None or c in only]
            spent = time.monotonic() - started
            room = max_runs() - int(fresh.method.runs or 1)
            # a measurement distrusted for noise alone is looked at again: more runs narrow
            # the interval over them; one distrusted for anything else is not
            if not open_claims or look >= MAX_LOOKS or room <= 0 or \
                    not (fresh.trusted or noise_only(fresh)):
                return body
            if spent >= budget_s:
                progress(f"time budget spent ({budget_s:.0f} s): {len(open_claims)} speed-up "
                    "claim(s) still undecided, left inconclusive")
                return body
            reach = _within_reach(room, MAX_LOOKS - look, batch)
            wanted = _fewest_wanted(body, open_claims)
            if wanted > reach:
                progress(f"{len(open_claims)} speed-up claim(s) undecided; about {wanted} more "
                         f"run(s) would decide, and at most {reach} fit the "
                         f"{MAX_LOOKS - look} look(s) left: left as they are")
                return body
            more = min(batch, room)
            progress(f"look {look}: {len(open_claims)} speed-up claim(s) undecided "
                f"({', '.join(open_claims)[:200]}); measuring {more} more run(s), "
                f"{budget_s - spent:.0f} s of the time budget left")
            extra = verifier.benchmark.bench_runs(self.kernel_dir, more, self.bench,
                                         progress=self.settings.progress, like=self.like)
            fresh = BenchmarkPredicate.from_json(
                extend_benchmark(fresh.to_json(), extra.to_predicate().to_json()))
            look += 1
            body = compare(self.claimed, self.target, self.env,
                           Fresh(self.verification, fresh, self.own), self.settings.policy, look)

    def _confirm(self, body: ReproductionPredicate, started: float) -> ReproductionPredicate:
        """A refutation by the test stands only if a second sitting (a new batch of fresh
        runs, tested alone from look 1) refutes the claim too: one sitting's runs share
        whatever the machine was doing then, which the between-run spread cannot see. A
        typed fault in the second sitting refutes as well. With no time budget left the
        one-sitting verdict stands, and the progress says so."""
        progress = self.settings.progress or quiet
        accused = [c.claim for c in body.claims if _refuted_by_test(c)]
        if not accused:
            return body
        if time.monotonic() - started >= self.settings.sequential_budget_s:
            progress(f"{len(accused)} speed-up claim(s) refuted in one sitting; no time budget "
                     "left for a second")
            return body
        progress(f"{len(accused)} speed-up claim(s) refuted in one sitting "
                 f"({', '.join(accused)[:200]}); measuring a second sitting of "
                 f"{self.settings.runs} run(s)")
        runs = verifier.benchmark.bench_runs(self.kernel_dir, max(1, self.settings.runs),
                                    self.bench, progress=self.settings.progress, like=self.like
                                    ).to_predicate()
        again = compare(self.claimed, self.target, self.env,
                        Fresh(self.verification, runs, self.own), self.settings.policy)
        again = self._sequential(runs, again, started, only=accused)
        claims = [_second_sitting(c, _row_for(again, c)) if _refuted_by_test(c) else c
                  for c in body.claims]
        return dataclasses.replace(body, claims=tuple(claims),
                                   verdict=overall_verdict(c.verdict for c in claims))


def _speedup_row(row: ClaimResult) -> bool:
    return row.claim.startswith("benchmark.speedup[")


def _refuted_by_test(row: ClaimResult) -> bool:
    """A speed-up claim the statistical test refuted (not a typed fault, which a second
    sitting need not repeat: the kernel exposed itself)."""
    return _speedup_row(row) and row.verdict == "refuted" and row.statistics is not None


def _row_for(body: ReproductionPredicate, row: ClaimResult) -> ClaimResult | None:
    """The row of `body` judging the same claim of the same entry as `row`."""
    for c in body.claims:
        if c.claim == row.claim and c.entry == row.entry:
            return c
    return None


def _second_sitting(first: ClaimResult, second: ClaimResult | None) -> ClaimResult:
    """One claim's verdict over two sittings: refuted if the second refutes it too; else
    what the second says about a claim the first refuted, in words that say which: a weak
    claim stays unsupported, the sittings' disagreement (the second confirmed) or the
    second's own undecided sitting is inconclusive, each reason naming both sittings."""
    if first.statistics is None:  # never so for `_refuted_by_test` rows; narrows the type
        return first
    if second is not None and second.verdict == "refuted":
        stats = second.statistics or first.statistics
        return dataclasses.replace(
            second, statistics=dataclasses.replace(stats, sittings=2),
            reason=f"{second.reason}; refuted in two sittings (the first: "
                   f"{first.reason})"[:MAX_REASON],
            why=one_line(f"{second.why or ''} (in two sittings)"))
    stats = (second.statistics if second is not None and second.statistics is not None
             else first.statistics)
    if second is None:
        verdict: Verdict = "inconclusive"
        line = "refuted in the first sitting; the second measured nothing of this shape"
        why = f"{line}, so no verdict: a sitting that measures it would decide"
    elif second.verdict == "unsupported":
        verdict, why = "unsupported", f"refuted in the first sitting; the second: {second.reason}"
        line = f"refuted in one sitting, not in the second; {second.why or ''}"
    elif second.verdict == "confirmed":
        verdict = "inconclusive"
        line = "the sittings disagree: refuted in the first, confirmed in the second"
        why = f"{line} ({second.reason}); a third sitting would decide"
    else:
        verdict = "inconclusive"
        line = f"refuted in the first sitting; the second could not decide: {second.why or ''}"
        why = f"refuted in the first sitting; the second could not decide: {second.reason}"
    return dataclasses.replace(
        first, verdict=verdict, statistics=dataclasses.replace(stats, sittings=1),
        measured=second.measured if second is not None else first.measured,
        reason=f"{why}; the first: {first.reason}"[:MAX_REASON], why=one_line(line))


def extend_benchmark(body: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """A fresh benchmark body with `extra`'s runs added to each shape's (pure): the
    aggregate speed-up is the runs' geometric mean again, its interval the t interval over
    all of them (`verifier.benchmark.over_runs`). Whether the runs agree is decided again over
    all of them (`runs_disagree`, the rule a run set is held to): the set is trusted when
    both batches were, or were distrusted only because their own runs disagreed, and all the
    runs now agree. Every other caveat and fault of either batch is kept. Shapes `extra`
    lacks keep their runs."""
    out = copy.deepcopy(dict(body))
    op = str(out.get("workload", {}).get("op", ""))
    more = {shape_key(op, r["shape"]): r for r in extra.get("results", [])}
    total = int(out["method"].get("runs") or 1)
    added = 0
    disagree: list[dict[str, Any]] = []
    for res in out["results"]:
        got = more.get(shape_key(op, res["shape"]))
        if got is None or "runs" not in res or "runs" not in got:
            continue
        res["runs"] = [*res["runs"], *got["runs"]]
        added = max(added, len(got["runs"]))
        speedups = [float(r["speedup"]) for r in res["runs"]]
        speed, lo, hi = over_runs(speedups)
        res["speedup"], res["speedup_ci95"] = speed, [lo, hi]
        res["n"] = int(res["n"]) + int(got["n"])
        found = runs_disagree(op, res["shape"], speedups)
        if found is not None:
            disagree.append(found.to_json())
    out["method"]["runs"] = total + added
    out["trusted"] = _but_for_disagreement(body) and _but_for_disagreement(extra) \
        and not disagree
    out["notes"] = [*out.get("notes", []), *extra.get("notes", [])][:64]
    conditions = _conditions_over(body.get("conditions"), extra.get("conditions"))
    if conditions is not None:
        out["conditions"] = conditions
    faults = [*out.get("faults", []), *extra.get("faults", [])][:64]
    if faults:
        out["faults"] = faults
    # why either batch was distrusted stays said (and typed): a later batch's incomplete
    # accounting must not hide behind an earlier one's mere noise (`noise_only`); whether
    # the runs disagree is said once, over all of them
    caveats = [*(c for c in [*body.get("caveats", []), *extra.get("caveats", [])]
                 if c.get("kind") != "runs_disagree"), *disagree][:64]
    out.pop("caveats", None)
    if caveats:
        out["caveats"] = caveats
    return out


def _but_for_disagreement(body: Mapping[str, Any]) -> bool:
    """Trusted, or distrusted only because its own runs disagreed (no fault, every caveat
    `runs_disagree`): what more runs can settle."""
    if body.get("trusted"):
        return True
    caveats = body.get("caveats") or []
    return not body.get("faults") and bool(caveats) and \
        all(c.get("kind") == "runs_disagree" for c in caveats)


def _conditions_over(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None
                     ) -> dict[str, Any] | None:
    """The conditions over two batches of runs (`verifier.benchmark`'s merge of the two)."""
    if not a or not b:
        one = a or b
        return dict(one) if one else None
    def probed(c: Mapping[str, Any]) -> Probed:
        return Probed(c.get("pinned_cpu_busy"), float(c["runnable"]), float(c["load_1m"]),
                      c.get("freq_mhz"), float(c["steal"]), int(c["cores"]))
    return merge_conditions(probed(a), probed(b)).to_json()


def fresh_seed(avoid: int | None = None) -> int:
    """A seed drawn from the OS's randomness (never `avoid`): one per verification, so no two
    releases are checked on inputs a generator could have tuned for."""
    while True:
        seed = secrets.randbelow(2**31)
        if seed != avoid:
            return seed
