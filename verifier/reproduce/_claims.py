"""Compare claimed predicates with a fresh run: the `reproduction/v1` body.

`compare` is pure (bodies in, body out); `reproduce_kernel` runs `check` and
`bench` on an unpacked kernel and then calls `compare`. Fetching the entry,
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

import copy
import math
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attest import AttestError
from attest.predicates import (
    BENCHMARK_V1,
    REPRODUCTION_SCHEMA_VERSION,
    VERIFICATION_V1,
    BenchmarkPredicate,
    BenchmarkResult,
    DecisionPolicy,
    parse_predicate,
)
from verifier.benchmark import DEFAULT_RUNS, conditions_differ
from verifier.errors import ReproduceError
from verifier.ops import OPS
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
_THREADS = re.compile(r"kernel OMP_NUM_THREADS=([0-9]{1,4})")


def _shape_key(shape: Mapping[str, Any], order: Sequence[str] = ()) -> str:
    """`M=256,N=256,K=256` with dims in the op's catalogue order, whatever the dict order.

    Logged bodies are canonical JSON (keys sorted) while fresh results keep the
    catalogue order, so the key must not depend on the mapping's order.
    """
    keys = [d for d in order if d in shape] + sorted(k for k in shape if k not in order)
    return ",".join(f"{k}={shape[k]}" for k in keys)


def _claim(claim: str, verdict: Decision, claimed: dict[str, Any], measured: dict[str, Any],
           reason: str, statistics: dict[str, Any] | None = None,
           diff: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"claim": claim, "verdict": verdict, "claimed": claimed,
                           "measured": measured, "reason": reason[:MAX_REASON]}
    if statistics is not None:
        out["statistics"] = statistics
    if diff:
        out["environment_diff"] = [dict(d) for d in diff]
    return out


def _pass_fail(outcome: str) -> str:
    return "pass" if outcome == "pass" else "fail"


def _outcomes(body: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    try:
        return {c["name"]: c for c in body["checks"]}
    except (KeyError, TypeError) as exc:
        raise ReproduceError(f"malformed verification body: missing {exc}") from exc


def _seed_phrase(runs: Sequence[tuple[str, Mapping[str, Any] | None]]) -> str:
    """`pass at the claimed seed 7, fail at this reproducer's seed 91: <detail>`."""
    parts = []
    for label, got in runs:
        if got is None or got["outcome"] == "skip":
            parts.append(f"not run at {label}")
        else:
            parts.append(f"{_pass_fail(got['outcome'])} at {label}: {got['detail']}")
    return "; ".join(parts)


def compare_verification(claimed: Mapping[str, Any], measured: Mapping[str, Any],
                         own: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Claims of a verification/v1 body against fresh ones: `measured` re-ran the claimed
    seed (the same inputs), `own` (if given) a seed of this reproducer's, so a kernel tuned
    to the claimed inputs is caught; each reason says which seed found what."""
    mine = _outcomes(measured)
    fresh = _outcomes(own) if own is not None else None
    try:
        theirs = list(claimed["checks"])
        claimed_verdict = claimed["verdict"]
    except (KeyError, TypeError) as exc:
        raise ReproduceError(f"malformed verification body: missing {exc}") from exc
    at_claimed = f"the claimed seed {measured.get('seed')}"
    at_own = f"this reproducer's seed {own.get('seed')}" if own is not None else ""
    out: list[dict[str, Any]] = []
    for c in theirs:
        name, outcome = c["name"], c["outcome"]
        if outcome == "skip":
            continue
        label = f"verification.check[{name}]"
        runs: list[tuple[str, Mapping[str, Any] | None]] = [(at_claimed, mine.get(name))]
        if fresh is not None:
            runs.append((at_own, fresh.get(name)))
        ran = [got for _, got in runs if got is not None and got["outcome"] != "skip"]
        if not ran:
            out.append(_claim(label, "inconclusive", {"verdict": _pass_fail(outcome)}, {},
                              f"check {name} was not run here"))
            continue
        want = _pass_fail(outcome)
        failing = [got for got in ran if _pass_fail(got["outcome"]) == "fail"]
        have = "fail" if failing else "pass"
        why = _seed_phrase(runs)
        if want == "pass" and failing:
            out.append(_claim(label, "refuted", {"verdict": want}, {"verdict": have},
                              f"claimed pass, fails here: {why}"))
        elif want == have:
            out.append(_claim(label, "confirmed", {"verdict": want}, {"verdict": have},
                              f"{name}: {why}"))
        else:
            out.append(_claim(label, "inconclusive", {"verdict": want}, {"verdict": have},
                              f"claimed failure did not recur here (failures can depend on the "
                              f"inputs): {why}"))
    out.append(_verdict_row(claimed_verdict, [(at_claimed, measured), (at_own, own)]))
    return out


def _verdict_row(claimed_verdict: str,
                 fresh: Sequence[tuple[str, Mapping[str, Any] | None]]) -> dict[str, Any]:
    """The `verification.verdict` row: the claimed verdict against each seed's run."""
    ran = [(label, body) for label, body in fresh if body is not None]
    failing = {label: [c["name"] for c in body["checks"] if c["outcome"] in ("fail", "error")]
               for label, body in ran}
    said = "; ".join(f"{body['verdict']} at {label}"
                     + (f" (failing: {', '.join(failing[label])})" if failing[label] else "")
                     for label, body in ran)
    measured_verdict = "fail" if any(body["verdict"] == "fail" for _, body in ran) else "pass"
    if claimed_verdict == measured_verdict:
        return _claim("verification.verdict", "confirmed", {"verdict": claimed_verdict},
                      {"verdict": measured_verdict}, f"same verdict: {said}")
    if claimed_verdict == "pass":
        return _claim("verification.verdict", "refuted", {"verdict": "pass"}, {"verdict": "fail"},
                      f"claimed pass; {said}")
    return _claim("verification.verdict", "inconclusive", {"verdict": "fail"},
                  {"verdict": "pass"}, f"claimed failure did not recur: {said}")


def _measurement(result: BenchmarkResult) -> dict[str, Any]:
    return {"speedup": result.speedup, "speedup_ci95": list(result.speedup_ci95)}


def _parse_bench(body: Mapping[str, Any], who: str) -> BenchmarkPredicate:
    try:
        parsed = parse_predicate(BENCHMARK_V1, dict(body), f"{who} benchmark")
    except AttestError as exc:
        raise ReproduceError(f"malformed {who} benchmark body: {exc}") from exc
    assert isinstance(parsed, BenchmarkPredicate)
    return parsed


def compare_benchmark(claimed: Mapping[str, Any], measured: Mapping[str, Any],
                      policy: DecisionPolicy = DEFAULT_POLICY, look: int = 1
                      ) -> list[dict[str, Any]]:
    """Claims of a benchmark/v1 body (one per shape) against a fresh one, run by run, at
    sequential look `look` (see `verifier.stats`)."""
    theirs, mine_body = _parse_bench(claimed, "claimed"), _parse_bench(measured, "measured")
    op = OPS.get(theirs.workload.op)
    order = op.dims if op is not None else ()
    mine = {_shape_key(r.shape, order): r for r in mine_body.results}
    diff = environment_diff(theirs.environment.to_json(), mine_body.environment.to_json())
    apart = conditions_differ(
        theirs.conditions.to_json() if theirs.conditions is not None else None,
        mine_body.conditions.to_json() if mine_body.conditions is not None else None)
    notes = list(mine_body.notes)
    out: list[dict[str, Any]] = []
    for r in theirs.results:
        key = _shape_key(r.shape, order)
        label = f"benchmark.speedup[{key}]"
        claimed_m = _measurement(r)
        got = mine.get(key)
        # typed faults only (never the notes' text): those of this shape, and when the shape
        # has no result, also those of the whole run (a build or child failure)
        own = [f for f in mine_body.faults
               if (f.shape is not None and _shape_key(f.shape, order) == key)
               or (got is None and f.shape is None)]
        if own:
            out.append(_claim(label, "refuted", claimed_m, {} if got is None else _measurement(got),
                              f"the measurement here exposes the kernel ({own[0].kind}): "
                              f"{own[0].detail}", diff=diff))
            continue
        if got is None:
            out.append(_claim(label, "inconclusive", claimed_m, {},
                              f"shape {key} was not measured here", diff=diff))
            continue
        measured_m = _measurement(got)
        why = "; ".join(n for n in notes if "{" + key + "}" in n) or \
            "the measurement here was not stable enough"
        v = speedup_verdict(r.run_speedups(), got.run_speedups(), mine_body.trusted, why, diff,
                            policy, look=look, conditions=apart)
        out.append(_claim(label, v.decision, claimed_m, measured_m, v.reason,
                          statistics=v.statistics_json(), diff=diff))
    return out


def overall_verdict(claims: Sequence[Mapping[str, Any]]) -> str:
    verdicts = [c["verdict"] for c in claims]
    if "refuted" in verdicts:
        return "refuted"
    if verdicts and all(v == "confirmed" for v in verdicts):
        return "confirmed"
    return "inconclusive"


def compare(
    claimed: Sequence[tuple[str, Mapping[str, Any]]],
    target: Mapping[str, Any],
    environment: Mapping[str, Any],
    verification: Mapping[str, Any] | None = None,
    benchmark: Mapping[str, Any] | None = None,
    policy: DecisionPolicy = DEFAULT_POLICY,
    own_verification: Mapping[str, Any] | None = None,
    look: int = 1,
) -> dict[str, Any]:
    """The reproduction/v1 body for `claimed` (predicate type, body) pairs vs fresh bodies.

    `verification` / `benchmark` are the fresh bodies (None if not run; the verification
    at the claimed seed, `own_verification` at a seed of this reproducer's); `target`
    names the logged entry; `environment` is this machine's fingerprint; `policy`
    (tolerance, confidence) decides speed-up claims and is recorded in the body.
    """
    claims: list[dict[str, Any]] = []
    for ptype, body in claimed:
        if ptype == VERIFICATION_V1:
            if verification is None:
                raise ReproduceError("a verification claim needs a fresh verification body")
            claims += compare_verification(body, verification, own_verification)
        elif ptype == BENCHMARK_V1:
            if benchmark is None:
                raise ReproduceError("a benchmark claim needs a fresh benchmark body")
            claims += compare_benchmark(body, benchmark, policy, look)
        else:
            raise ReproduceError(f"cannot reproduce predicate type {ptype!r}; only verification/v1 "
                                 "and benchmark/v1 claims can be re-run")
    return _body(target, environment, claims, policy)


def _body(target: Mapping[str, Any], environment: Mapping[str, Any],
          claims: list[dict[str, Any]], policy: DecisionPolicy) -> dict[str, Any]:
    return {"schema_version": REPRODUCTION_SCHEMA_VERSION, "target": dict(target),
            "environment": dict(environment), "policy": policy.to_json(), "claims": claims,
            "verdict": overall_verdict(claims)}


def not_rerun(claimed: Sequence[tuple[str, Mapping[str, Any]]], target: Mapping[str, Any],
              why: str, environment: Mapping[str, Any],
              policy: DecisionPolicy = DEFAULT_POLICY) -> dict[str, Any]:
    """The body when the claims cannot be re-run here (an op this verifier does not know, a
    runtime this machine lacks): one inconclusive row per claim entry, saying why. Not
    evidence either way."""
    claims = [_claim(ptype, "inconclusive", {}, {}, f"not re-run: {why}") for ptype, _ in claimed]
    return _body(target, environment, claims, policy)


def unknown_op_reason(op: str, catalogue_version: int) -> str:
    """The one wording of 'this verifier does not know the op' (issue 25)."""
    return f"op {op} is not known to this verifier (catalogue version {catalogue_version})"


def claimed_threads(body: Mapping[str, Any]) -> int:
    """The thread count a benchmark body's notes record (1 when they do not say)."""
    for note in body.get("notes", []):
        found = _THREADS.search(str(note))
        if found:
            return max(1, min(int(found.group(1)), 1024))
    return 1


def reproduce_kernel(
    kernel_dir: str | Path,
    claimed: Sequence[tuple[str, Mapping[str, Any]]],
    target: Mapping[str, Any],
    budget: str | None = None,
    time_budget_s: float = 10.0,
    progress: Callable[[str], None] | None = None,
    runs: int = DEFAULT_RUNS,
    policy: DecisionPolicy = DEFAULT_POLICY,
    sequential_budget_s: float = 0.0,
) -> dict[str, Any]:
    """Re-run what `claimed` claims on the unpacked kernel and compare.

    The check runs twice with the claimed budget (unless `budget` is given): at the claimed
    seed, so the same inputs are replayed, and at a fresh seed of its own; the benchmark uses the claimed shapes, seed and threads,
    `runs` independent runs of up to `time_budget_s` each. While a speed-up claim stays
    undecided and `sequential_budget_s` seconds are not spent, it measures another batch
    of runs and tests again at the next sequential look (`verifier.stats`), saying so.
    """
    from verifier.benchmark import bench_runs
    from verifier.checks import check
    from verifier.environment import environment_fingerprint
    from verifier.kernel import KernelSpec
    from verifier.runtimes import get_runtime

    spec = KernelSpec.load(kernel_dir)
    runtime = spec.runtime
    unavailable = get_runtime(runtime).unavailable_reason()
    if unavailable:  # e.g. a cuda kernel on a machine without a GPU: not evidence either way
        return not_rerun(claimed, target, f"runtime {runtime!r} unavailable here: {unavailable}",
                         environment_fingerprint(runtime), policy)
    verification = own = benchmark = None
    runset = None
    bench_args: dict[str, Any] = {}
    for ptype, body in claimed:
        if ptype == VERIFICATION_V1 and verification is None:
            level = budget or str(body.get("budget", "quick"))
            seed = int(body.get("seed", 1))
            if progress:
                progress(f"checking at the claimed seed {seed}")
            verification = check(kernel_dir, budget=level, seed=seed,
                                 progress=progress).to_predicate()
            own_seed = fresh_seed(avoid=seed)
            if progress:
                progress(f"checking at a seed of this reproducer's, {own_seed}")
            own = check(kernel_dir, budget=level, seed=own_seed, progress=progress).to_predicate()
        elif ptype == BENCHMARK_V1 and benchmark is None:
            workload = body.get("workload", {})
            # a torch kernel is timed at its reference's get_inputs() shapes, never given ones
            shapes = None if spec.is_torch else (
                [dict(s) for s in workload.get("shapes", [])] or None)
            bench_args = {"shapes": shapes, "seed": int(workload.get("seed", 1)),
                          "time_budget_s": time_budget_s, "threads": claimed_threads(body),
                          "progress": progress}
            runset = bench_runs(kernel_dir, runs=runs, **bench_args)
            benchmark = runset.to_predicate()
    env = environment_fingerprint(runtime)
    body = compare(claimed, target, env, verification, benchmark, policy, own)
    if runset is None or benchmark is None:
        return body
    return _settle(kernel_dir, claimed, target, env, verification, own, policy, benchmark,
                   bench_args, max(1, runs), sequential_budget_s, progress, body)


def _undecided(body: Mapping[str, Any]) -> list[str]:
    """Speed-up claims a further look could decide: inconclusive by the test itself, with
    more runs here able to decide (never on other hardware, where no count of runs may
    refute)."""
    return [c["claim"] for c in body["claims"] if c["claim"].startswith("benchmark.speedup[")
            and c["verdict"] == "inconclusive" and c.get("statistics") is not None
            and c["statistics"].get("more_runs") is not None
            and not any(d.get("hardware") for d in c.get("environment_diff", []))]


def _settle(kernel_dir: str | Path, claimed: Sequence[tuple[str, Mapping[str, Any]]],
            target: Mapping[str, Any], env: Mapping[str, Any],
            verification: Mapping[str, Any] | None, own: Mapping[str, Any] | None,
            policy: DecisionPolicy, fresh: dict[str, Any], bench_args: dict[str, Any],
            batch: int, budget_s: float, progress: Callable[[str], None] | None,
            body: dict[str, Any]) -> dict[str, Any]:
    """More looks while speed-up claims stay undecided, within `budget_s` seconds."""
    import time

    import verifier.benchmark as benchmark
    from verifier.stats import MAX_LOOKS, max_runs

    say = progress or (lambda _m: None)
    started = time.monotonic()
    look = 1
    while True:
        open_claims = _undecided(body)
        spent = time.monotonic() - started
        room = max_runs() - int(fresh["method"].get("runs") or 1)
        if not open_claims or look >= MAX_LOOKS or room <= 0 or not fresh["trusted"]:
            return body
        if spent >= budget_s:
            say(f"time budget spent ({budget_s:.0f} s): {len(open_claims)} speed-up claim(s) "
                "still undecided, left inconclusive")
            return body
        more = min(batch, room)
        say(f"look {look}: {len(open_claims)} speed-up claim(s) undecided "
            f"({', '.join(open_claims)[:200]}); measuring {more} more run(s), "
            f"{budget_s - spent:.0f} s of the time budget left")
        extra = benchmark.bench_runs(kernel_dir, runs=more, **bench_args).to_predicate()
        fresh = extend_benchmark(fresh, extra)
        look += 1
        body = compare(claimed, target, env, verification, fresh, policy, own, look)


def extend_benchmark(body: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """A fresh benchmark body with `extra`'s runs added to each shape's (pure): the
    aggregate speed-up is the runs' geometric mean again, its interval their range; the
    set is trusted only if both were. Shapes `extra` lacks keep their runs."""
    out = copy.deepcopy(dict(body))
    more = {_shape_key(r["shape"]): r for r in extra.get("results", [])}
    total = int(out["method"].get("runs") or 1)
    added = 0
    for res in out["results"]:
        got = more.get(_shape_key(res["shape"]))
        if got is None or "runs" not in res or "runs" not in got:
            continue
        res["runs"] = [*res["runs"], *got["runs"]]
        added = max(added, len(got["runs"]))
        speedups = [float(r["speedup"]) for r in res["runs"]]
        res["speedup"] = math.exp(math.fsum(math.log(s) for s in speedups) / len(speedups))
        res["speedup_ci95"] = [min(speedups), max(speedups)]
        res["n"] = int(res["n"]) + int(got["n"])
    out["method"]["runs"] = total + added
    out["trusted"] = bool(body.get("trusted")) and bool(extra.get("trusted"))
    out["notes"] = [*out.get("notes", []), *extra.get("notes", [])][:64]
    faults = [*out.get("faults", []), *extra.get("faults", [])][:64]
    if faults:
        out["faults"] = faults
    return out


def fresh_seed(avoid: int | None = None) -> int:
    """A seed drawn from the OS's randomness (never `avoid`): one per verification, so no two
    releases are checked on inputs a generator could have tuned for."""
    while True:
        seed = secrets.randbelow(2**31)
        if seed != avoid:
            return seed
