"""Claim comparison: confirmed, refuted (with evidence), inconclusive (and why)."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attest import ValidationError, predicates
from attest import examples as ex
from attest.entry import decode_entry, verify_entry
from attest.ops import op_flops
from attest.predicates import (
    BenchmarkPredicate,
    ClaimResult,
    DecisionPolicy,
    Environment,
    JudgedEntry,
    KernelPredicate,
    ReproductionTarget,
    VerificationPredicate,
    parse_predicate,
)
from verifier import BenchSettings, ReproduceError
from verifier.reproduce import (
    BENCHMARK_V1,
    VERIFICATION_V1,
    Claimed,
    Fresh,
    ReproduceSettings,
    compare,
    compare_benchmark,
    make_policy,
    overall_verdict,
    reproduce_kernel,
)

ROOT = Path(__file__).resolve().parent.parent
ENV = {"cpu_model": "AMD EPYC", "cpu_flags": ["avx2"], "cores": 2, "machine": "x86_64",
       "gpu": None, "gpu_driver": None, "compiler": "gcc 12.2.0", "libraries": {"numpy": "2"},
       "os": "Linux 6", "python": "3.11.7"}
TARGET = ReproductionTarget(origin="example.test/log", index=3, leaf_hash="ab" * 32,
                            predicate_type=BENCHMARK_V1, subject_sha256="cd" * 32)
HERE_ENV = Environment.from_json(ENV)


def _cmp(claimed: dict[str, Any], measured: dict[str, Any],
         policy: DecisionPolicy | None = None) -> list[dict[str, Any]]:
    """compare_benchmark on two bodies (parsed by attest), its rows as JSON."""
    return [c.to_json() for c in compare_benchmark(BenchmarkPredicate.from_json(claimed),
                                                   BenchmarkPredicate.from_json(measured),
                                                   policy or make_policy())]


MED = 200_000.0


def _bench(runs: tuple[float, ...], env: dict[str, Any] | None = None, trusted: bool = True,
           notes: list[str] | None = None,
           faults: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A schema_version 2 benchmark body of one matmul shape with these per-run speed-ups."""
    shape = {"M": 256, "N": 256, "K": 256}
    geo = math.exp(sum(math.log(x) for x in runs) / len(runs))
    return {"schema_version": 2, "environment": env or ENV,
            "workload": {"op": "matmul", "dtype": "float32", "seed": 1, "shapes": [shape]},
            "method": {"warmup": 5, "repetitions": 50, "timer": "perf_counter_ns",
                       "interleaved": True, "baseline": "numpy-float32", "fresh_inputs": True,
                       "outputs_rechecked": True, "runs": len(runs), "cpu_pinned": True},
            # 200 us for 2 * 256^3 FLOPs: 168 GFLOP/s, which one CPU core can do (below the
            # physical floor a claim is refuted before anything is measured)
            "results": [{"shape": shape, "n": 50 * len(runs), "median_ns": MED, "p5_ns": 0.9 * MED,
                         "p95_ns": 1.1 * MED, "baseline_median_ns": MED * geo,
                         "speedup": geo, "speedup_ci95": [min(runs), max(runs)],
                         "gflops": 2 * 256**3 / MED,
                         "runs": [{"speedup": x, "speedup_ci95": [0.99 * x, 1.01 * x],
                                   "median_ns": MED, "baseline_median_ns": MED * x, "n": 50}
                                  for x in runs]}],
            "samples": {"sha256": "ef" * 32, "size": 1, "media_type": "application/json"},
            "trusted": trusted, "notes": notes or [], **({"faults": faults} if faults else {})}


def _v1(speedup: float, lo: float, hi: float) -> dict[str, Any]:
    """A version 1 (single-run) body, as logged before runs existed."""
    body = _bench((speedup,))
    del body["schema_version"], body["method"]["runs"], body["method"]["cpu_pinned"]
    del body["results"][0]["runs"]
    body["results"][0]["speedup_ci95"] = [lo, hi]
    return body


HERE = (0.43, 0.44, 0.425, 0.435, 0.43)


def _times(factor: float, runs: tuple[float, ...] = HERE) -> tuple[float, ...]:
    return tuple(factor * x for x in runs)


def _verdict(claimed: dict[str, Any], measured: dict[str, Any],
             policy: DecisionPolicy | None = None) -> tuple[str, str]:
    (c,) = _cmp(claimed, measured, policy)
    return c["verdict"], c["reason"]


def test_speedup_verdicts() -> None:
    # the same kernel measured twice: confirmed, with the typed statistics kept
    (c,) = _cmp(_bench(_times(1.0, (0.432, 0.428, 0.44, 0.43, 0.436))), _bench(HERE))
    assert c["verdict"] == "confirmed", c["reason"]
    assert c["statistics"]["claimed_runs"] == 5 and c["statistics"]["measured_runs"] == 5
    assert "environment_diff" not in c
    # the issue's case: speed-up, interval and medians x1.25 -> refuted (the old margin let it by)
    verdict, reason = _verdict(_bench(_times(1.25)), _bench(HERE))
    assert verdict == "refuted"
    assert reason.startswith("claimed 0.540x (5 runs), measured 0.432x [")
    assert "overstated by 25 % [+" in reason and "with 99 % confidence" in reason
    # faster here than claimed: confirmed
    assert _verdict(_bench(HERE), _bench(_times(1.5)))[0] == "confirmed"
    # beyond the tolerance, but the runs here are too noisy to tell: inconclusive, says how many more
    noisy = (0.40, 0.47, 0.41, 0.46, 0.42)
    verdict, reason = _verdict(_bench(_times(1.25)), _bench(noisy))
    assert verdict == "inconclusive" and "more run(s) here would decide" in reason
    # 12 % overstated with tight runs: within what two honest sittings can differ by
    # (issue 25: a false refutation is worse than an inconclusive), so not refuted
    verdict, reason = _verdict(_bench(_times(1.12)), _bench(HERE))
    assert verdict == "inconclusive" and "between sittings" in reason, reason


def test_tolerance_and_confidence_are_options() -> None:
    claim, here = _bench(_times(1.25)), _bench(HERE)
    assert _verdict(claim, here)[0] == "refuted"
    verdict, reason = _verdict(claim, here, make_policy(tolerance=0.3))
    assert verdict == "confirmed" and "within the 30 % tolerance" in reason
    body = compare([BenchmarkPredicate.from_json(claim)], TARGET, HERE_ENV,
                   Fresh(benchmark=BenchmarkPredicate.from_json(here)),
                   policy=make_policy(0.10, 0.999)).to_json()
    assert body["policy"] == {"tolerance": 0.10, "confidence": 0.999, "test": "log-speedup-t"}
    assert body["schema_version"] == 2
    with pytest.raises(ValidationError, match="confidence"):
        make_policy(0.05, 1.0)


def test_an_old_single_run_claim_is_one_claimed_run() -> None:
    verdict, reason = _verdict(_v1(0.54, 0.53, 0.55), _bench(HERE))
    assert verdict == "refuted" and "claimed 0.540x (1 run)" in reason
    # issue 42: a one-run claim is weak; matched here, its one run cannot put the whole
    # interval within the tolerance, so it is unsupported (never inconclusive), saying why
    verdict, reason = _verdict(_v1(0.43, 0.42, 0.44), _bench(HERE))
    assert verdict == "unsupported" and "fewer than 3" in reason, reason
    # a single run here cannot estimate the spread
    assert _verdict(_bench(_times(1.5)), _v1(0.43, 0.42, 0.44))[0] == "inconclusive"


def test_a_stored_pre_runs_entry_is_reproducible() -> None:
    entry = decode_entry((ROOT / "tests" / "vectors" / "benchmark-v1-schema1-entry.json").read_bytes())
    body = verify_entry(entry).statement.predicate.to_json()
    measured = copy.deepcopy(body)
    shape = measured["results"][0]["shape"]
    claimed_speed = body["results"][0]["speedup"]
    measured = _bench(_times(claimed_speed / 0.432))
    measured["workload"] = body["workload"]
    measured["results"][0]["shape"] = shape
    measured["results"][0]["gflops"] = (op_flops(body["workload"]["op"], shape) or 0.0) / MED
    (c,) = _cmp(body, measured)
    # issue 42: one claimed run is a weak claim, unsupported unless its interval is confirmed
    assert c["verdict"] == "unsupported" and c["statistics"]["claimed_runs"] == 1


def test_different_hardware_compares_ratios_and_says_so() -> None:
    other = dict(ENV, cpu_model="Intel Xeon", cores=64, libraries={"numpy": "3"})
    (c,) = _cmp(_bench(_times(2.0)), _bench(HERE, env=other))
    assert c["verdict"] == "inconclusive"
    assert "different hardware" in c["reason"] and "may explain a slower ratio" in c["reason"]
    fields = {d["field"]: d for d in c["environment_diff"]}
    assert fields["cpu_model"] == {"field": "cpu_model", "hardware": True,
                                   "claimed": "AMD EPYC", "measured": "Intel Xeon"}
    assert fields["cores"]["hardware"] and not fields["libraries.numpy"]["hardware"]
    assert fields["libraries.numpy"]["claimed"] == "2" and fields["libraries.numpy"]["measured"] == "3"
    assert _verdict(_bench(HERE), _bench(HERE, env=other))[0] == "confirmed"
    # only software differs: still the same hardware, so an inflated claim is refuted
    newer = dict(ENV, libraries={"numpy": "3"}, python="3.12.1")
    (c,) = _cmp(_bench(_times(1.5)), _bench(HERE, env=newer))
    assert c["verdict"] == "refuted" and "same hardware, different software" in c["reason"]
    assert {d["field"] for d in c["environment_diff"]} == {"libraries.numpy", "python"}


def test_cpu_flags_are_compared_as_sets() -> None:
    from verifier.reproduce._verdict import environment_diff

    def env(**kw: Any) -> Environment:
        return Environment.from_json(dict(ENV, **kw))

    (d,) = environment_diff(env(cpu_flags=["avx2", "fma"]), env(cpu_flags=["avx512f", "avx2"]))
    assert d.to_json() == {"field": "cpu_flags", "hardware": True, "claimed": "fma",
                           "measured": "avx512f"}
    assert environment_diff(env(cpu_flags=["fma", "avx2"]), env(cpu_flags=["avx2", "fma"])) == ()


def test_untrusted_measurement() -> None:
    noisy = _bench((0.3, 0.6, 0.4, 0.5, 0.45), trusted=False,
                   notes=["{M=256,N=256,K=256}: too unstable: the speed-up interval is +-60%"])
    verdict, reason = _verdict(_bench(HERE), noisy)
    assert verdict == "inconclusive" and "not trusted" in reason
    shape = {"M": 256, "N": 256, "K": 256}
    cheat = _bench(_times(100.0), trusted=False,
                   notes=["{M=256,N=256,K=256}: work escaping the timed call: a thread ..."],
                   faults=[{"kind": "escaped_work", "shape": shape,
                            "detail": "{M=256,N=256,K=256}: work escaping the timed call"}])
    verdict, reason = _verdict(_bench(_times(100.0)), cheat)
    assert verdict == "refuted" and "(escaped_work)" in reason
    # the verdict comes from the typed fault, never from a note's words: the same note text
    # without its fault (text a kernel or compiler could have written) refutes nothing
    words = _bench(_times(100.0), trusted=False,
                   notes=["{M=256,N=256,K=256}: faster than the roofline floor: outputs "
                          "rechecked after timing: guard bytes ... timer tampering"])
    verdict, reason = _verdict(_bench(_times(100.0)), words)
    assert verdict == "inconclusive", reason
    # a fault of the whole run (the child crashed) refutes a shape it left unmeasured
    crashed = _bench(_times(100.0), trusted=False, faults=[
        {"kind": "child_failed", "shape": None, "detail": "the benchmark child failed: crash"}])
    crashed["results"] = []
    verdict, reason = _verdict(_bench(_times(100.0)), crashed)
    assert verdict == "refuted" and "(child_failed)" in reason


def _noisy(runs: tuple[float, ...], kinds: tuple[str, ...] = ("runs_disagree",)) -> dict[str, Any]:
    """A fresh measurement distrusted with typed caveats of these kinds (the CI sitting of
    issue 42: five runs reading 0.728x to 0.987x)."""
    body = _bench(runs, trusted=False)
    body["caveats"] = [{"kind": k, "shape": {"M": 256, "N": 256, "K": 256} if k != "cost_incomplete"
                        else None, "detail": f"{k}: the runs read {min(runs)} to {max(runs)}"}
                       for k in kinds]
    return body


CI_SITTING = (0.728, 0.987, 0.81, 0.85, 0.90)
"""Runs of the make-demo sitting CI refused: the interval over them +-22 %."""


def test_a_measurement_distrusted_for_noise_alone_refutes_a_far_lie_and_confirms_nothing() -> None:
    from attest.verdicts import noise_only

    lie = _bench((1.22, 1.23, 1.21, 1.22, 1.225))
    # five noisy runs leave the overstatement's lower bound near +1 %: undecided, and (unlike
    # a measurement distrusted for anything else) tested, so that more runs are looked at
    (c,) = _cmp(lie, _noisy(CI_SITTING))
    assert c["verdict"] == "inconclusive" and c["statistics"]["noisy"] is True, c["reason"]
    # ten runs as noisy: the interval over them, their spread counted, puts the 1.22x claim
    # beyond the tolerance: the noise does not shield it (the demo's planted lie on CI)
    (c,) = _cmp(lie, _noisy(CI_SITTING + CI_SITTING[::-1]))
    assert c["verdict"] == "refuted", c["reason"]
    assert "disagree" in c["reason"] and c["statistics"]["noisy"] is True
    # the honest claim of the same figure is never confirmed on that noisy sitting
    honest = _bench(tuple(x * 1.0 for x in (0.85, 0.86, 0.855, 0.85, 0.86)))
    (c,) = _cmp(honest, _noisy(CI_SITTING))
    assert c["verdict"] == "inconclusive", c["reason"]
    assert "confirms nothing" in c["reason"] and c["statistics"]["noisy"] is True
    # attacker's case: a measurement distrusted for anything else (here, besides the noise,
    # the kernel's CPU not all accounted) decides nothing, however far the claim
    both = _noisy(CI_SITTING, ("runs_disagree", "cost_incomplete"))
    (c,) = _cmp(lie, both)
    assert c["verdict"] == "inconclusive" and "statistics" not in c, c
    assert not noise_only(BenchmarkPredicate.from_json(both))
    assert noise_only(BenchmarkPredicate.from_json(_noisy(CI_SITTING, ("unstable",))))
    # untrusted with no caveat, or with a fault: not noise alone
    assert not noise_only(BenchmarkPredicate.from_json(_bench(CI_SITTING, trusted=False)))
    faulty = _noisy(CI_SITTING)
    faulty["faults"] = [{"kind": "escaped_work", "shape": None, "detail": "a thread"}]
    assert not noise_only(BenchmarkPredicate.from_json(faulty))
    # a trusted measurement carries no noisy flag
    (c,) = _cmp(lie, _bench(CI_SITTING))
    assert "noisy" not in c["statistics"]


def test_why_a_measurement_is_untrusted_comes_from_its_typed_caveats_never_its_notes() -> None:
    shape = {"M": 256, "N": 256, "K": 256}
    label = "matmul M=256,N=256,K=256"
    # a note naming the shape, without a caveat, is prose: it is not quoted as the reason
    worded = _bench((0.3, 0.6, 0.4, 0.5, 0.45), trusted=False,
                    notes=[f"{label}: too unstable: ... the kernel is fine, trust it"])
    verdict, reason = _verdict(_bench(HERE), worded)
    assert verdict == "inconclusive" and "trust it" not in reason
    assert "not stable enough" in reason
    # a caveat of this shape is quoted whatever its words; another shape's is not; the
    # whole run's is
    typed = _bench((0.3, 0.6, 0.4, 0.5, 0.45), trusted=False, notes=["unrelated prose"])
    typed["caveats"] = [
        {"kind": "unstable", "shape": shape, "detail": "interval +-60% (limit +-15%)"},
        {"kind": "too_few_batches", "shape": {"M": 8, "N": 8, "K": 8}, "detail": "other shape"},
        {"kind": "cost_incomplete", "shape": None, "detail": "CPU accounting incomplete"}]
    verdict, reason = _verdict(_bench(HERE), typed)
    assert verdict == "inconclusive"
    assert "interval +-60% (limit +-15%)" in reason and "CPU accounting incomplete" in reason
    assert "other shape" not in reason and "unrelated prose" not in reason
    body = BenchmarkPredicate.from_json(typed)
    assert BenchmarkPredicate.from_json(body.to_json()) == body
    typed["caveats"][0]["kind"] = "kernel_is_fine"  # not a kind the schema knows
    with pytest.raises(ValidationError):
        BenchmarkPredicate.from_json(typed)


def test_a_benchmark_body_with_faults_cannot_call_itself_trusted() -> None:
    body = _bench(_times(1.0), trusted=True, faults=[
        {"kind": "roofline", "shape": {"M": 256, "N": 256, "K": 256}, "detail": "too fast"}])
    with pytest.raises(ValidationError, match="trusted"):
        parse_predicate(BENCHMARK_V1, body)
    body["trusted"] = False
    parsed = parse_predicate(BENCHMARK_V1, body)
    assert parsed.to_json()["faults"] == body["faults"]
    body["faults"][0]["kind"] = "timer_tampering"  # not a kind the schema knows
    with pytest.raises(ValidationError):
        parse_predicate(BENCHMARK_V1, body)


def test_a_claim_with_unusable_numbers_is_refused_as_malformed_not_a_crash() -> None:
    # attest refuses a run whose speed-up its own interval and medians contradict, so such a
    # body never reaches the statistics (and could not have been logged)
    zero = _bench(HERE)
    zero["results"][0]["runs"][0]["speedup"] = 0.0
    with pytest.raises(ValidationError, match=r"predicate\.results\[0\]\.runs\[0\].*must contain"):
        _verdict(zero, _bench(HERE))


def _verification(outcomes: dict[str, str], seed: int = 1) -> VerificationPredicate:
    checks = [{"name": n, "outcome": o, "detail": f"{n} {o}", "inputs": {}, "metrics": {}}
              for n, o in outcomes.items()]
    verdict = "fail" if any(o in ("fail", "error") for o in outcomes.values()) else "pass"
    return VerificationPredicate.from_json(
        {"environment": ENV, "budget": "quick", "seed": seed, "checks": checks,
         "verdict": verdict})


def test_verification_claims() -> None:
    claimed = _verification({"correctness.random": "pass", "sanitizer.tsan": "skip"})
    body = compare([claimed], TARGET, HERE_ENV,
                   Fresh(_verification({"correctness.random": "pass"}))).to_json()
    assert body["verdict"] == "confirmed"
    assert [c["claim"] for c in body["claims"]] == ["verification.check[correctness.random]",
                                                    "verification.verdict"]
    refuted = compare([claimed], TARGET, HERE_ENV,
                      Fresh(_verification({"correctness.random": "fail"}))).to_json()
    assert refuted["verdict"] == "refuted"
    assert "claimed pass, fails here: fail at the claimed seed 1: correctness.random fail" \
        in refuted["claims"][0]["reason"]


def test_a_kernel_tuned_to_the_claimed_seed_is_refuted_by_the_reproducers_seed() -> None:
    """Issue 25 row 4: the claimed seed is replayed and a seed of the reproducer's is run too;
    a kernel right only on the claimed inputs is refuted, and the reason says which seed."""
    claimed = _verification({"correctness.random": "pass"}, seed=7)
    body = compare([claimed], TARGET, HERE_ENV,
                   Fresh(verification=_verification({"correctness.random": "pass"}, seed=7),
                         own_verification=_verification({"correctness.random": "fail"},
                                                        seed=91))).to_json()
    assert body["verdict"] == "refuted"
    row, verdict = body["claims"]
    assert row["verdict"] == "refuted"
    assert "pass at the claimed seed 7" in row["reason"]
    assert "fail at this reproducer's seed 91" in row["reason"]
    assert "pass at the claimed seed 7; fail at this reproducer's seed 91" in verdict["reason"]
    both = compare([claimed], TARGET, HERE_ENV,
                   Fresh(verification=_verification({"correctness.random": "pass"}, seed=7),
                         own_verification=_verification({"correctness.random": "pass"},
                                                        seed=91))).to_json()
    assert both["verdict"] == "confirmed"
    assert "at this reproducer's seed 91" in both["claims"][0]["reason"]


def test_fresh_seeds_differ_and_avoid_the_claimed_one() -> None:
    from verifier.reproduce import fresh_seed

    seeds = {fresh_seed(avoid=3) for _ in range(64)}
    assert 3 not in seeds and len(seeds) > 60


def test_compare_rejects_what_it_cannot_rerun() -> None:
    with pytest.raises(ReproduceError, match="cannot reproduce"):
        compare([KernelPredicate.from_json(ex.kernel())], TARGET, HERE_ENV)
    with pytest.raises(ReproduceError, match="fresh benchmark"):
        compare([BenchmarkPredicate.from_json(_bench(HERE))], TARGET, HERE_ENV)
    # a malformed body never reaches the comparison: attest refuses to build it
    with pytest.raises(ValidationError, match="required field is missing"):
        _cmp({"results": []}, _bench(HERE))
    with pytest.raises(ValidationError, match=r"predicate\.results\[0\]\.runs: .*runs"):
        broken = _bench(HERE)
        broken["method"]["runs"] = 3
        _cmp(_bench(HERE), broken)


@given(st.lists(st.sampled_from(["confirmed", "refuted", "inconclusive"]), max_size=6))
def test_overall_verdict_rules(verdicts: list[str]) -> None:
    v = overall_verdict(verdicts)
    if "refuted" in verdicts:
        assert v == "refuted"
    elif verdicts and set(verdicts) == {"confirmed"}:
        assert v == "confirmed"
    else:
        assert v == "inconclusive"


def test_predicate_types_match_attest() -> None:
    assert predicates.BENCHMARK_V1 == BENCHMARK_V1
    assert predicates.VERIFICATION_V1 == VERIFICATION_V1


class _InjectedRuns:
    """Stands in for `bench_runs`: the measurements here are given, not timed."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.asked: list[dict[str, Any]] = []

    def __call__(self, kernel_dir: Path, runs: int, settings: BenchSettings,
                 **kwargs: Any) -> _InjectedRuns:
        self.asked.append({"runs": runs, "shapes": settings.shapes, "seed": settings.seed,
                           "like": kwargs.get("like")})
        return self

    def to_predicate(self) -> BenchmarkPredicate:
        return BenchmarkPredicate.from_json(copy.deepcopy(self.body))


@pytest.mark.parametrize("factor,want", [(1.5, "refuted"), (1.25, "refuted"), (1.0, "confirmed"),
                                         (0.8, "confirmed")])
def test_reproduce_kernel_decides_on_the_measurements_it_gets(
        monkeypatch: pytest.MonkeyPatch, factor: float, want: str) -> None:
    """The whole re-run path (claim in, re-measurement, verdict out) on injected runs:
    the decision is the statistics' own, whatever this machine's timings would be."""
    import verifier.benchmark

    injected = _InjectedRuns(_bench(HERE))
    monkeypatch.setattr(verifier.benchmark, "bench_runs", injected)
    claim = _bench(_times(factor))
    body = reproduce_kernel(ROOT / "examples" / "matmul-blocked",
                            [BenchmarkPredicate.from_json(claim)], TARGET,
                            ReproduceSettings(time_budget_s=3, runs=5)).to_json()
    (asked,) = injected.asked
    assert asked["runs"] == 5 and asked["shapes"] == claim["workload"]["shapes"]
    assert asked["seed"] == claim["workload"]["seed"]
    (speed,) = [c for c in body["claims"] if c["claim"].startswith("benchmark.speedup")]
    assert speed["verdict"] == want, speed["reason"]
    assert body["verdict"] == want
    assert speed["statistics"]["measured_runs"] == 5
    predicates.parse_predicate(predicates.REPRODUCTION_V1, body)


@pytest.mark.slow
def test_reproduce_kernel_end_to_end_on_real_timings() -> None:
    """A real run: 3 runs claimed, each x1.5 what this machine measured, against 3 fresh
    runs here. Real timings on a shared machine can make the speed-up inconclusive, never
    confirmed; the rest of the body does not depend on them."""
    from verifier import check, environment_fingerprint
    from verifier.benchmark._runs import bench_runs

    kernel = ROOT / "examples" / "sum-rows"
    shapes = [{"R": 128, "C": 512}]
    ver = check(kernel, budget="quick", seed=5).to_predicate()
    real = bench_runs(kernel, runs=3,
                      settings=BenchSettings(shapes=shapes, seed=5, time_budget_s=1,
                                             max_halfwidth=0.5)).to_predicate()
    assert real.method.runs == 3 and len(real.results[0].runs or ()) == 3
    inflated = real.to_json()
    for r in [*inflated["results"], *inflated["results"][0]["runs"]]:
        r["speedup"] *= 1.5
        r["speedup_ci95"] = [x * 1.5 for x in r["speedup_ci95"]]
        r["baseline_median_ns"] *= 1.5  # consistently: attest refuses a claim its medians contradict
    body = reproduce_kernel(kernel, [ver, BenchmarkPredicate.from_json(inflated)],
                            TARGET, ReproduceSettings(time_budget_s=3, runs=3)).to_json()
    speed = [c for c in body["claims"] if c["claim"].startswith("benchmark.speedup")]
    assert speed and speed[0]["verdict"] in ("refuted", "inconclusive", "unsupported"), \
        speed[0]["reason"]
    if "statistics" in speed[0]:
        assert speed[0]["statistics"]["measured_runs"] == 3
    elif speed[0]["verdict"] != "refuted":
        # no statistics and not refuted by a typed fault: the fresh measurement was untrusted
        # (nothing to test against); a weak claim is then unsupported, else inconclusive
        assert "the measurement here is not trusted" in speed[0]["reason"], speed[0]
    others = [c for c in body["claims"] if not c["claim"].startswith("benchmark")]
    assert others and all(c["verdict"] == "confirmed" for c in others), others
    assert body["verdict"] in ("refuted", "inconclusive", "unsupported")
    assert body["environment"] == environment_fingerprint()
    # what the real run recorded about itself: its catalogue and the conditions it probed
    from attest.ops import CATALOGUE_VERSION
    assert body["catalogue_version"] == CATALOGUE_VERSION
    assert {"runnable", "load_1m", "steal", "cores"} <= set(body["conditions"])
    predicates.parse_predicate(predicates.REPRODUCTION_V1, body)


def test_claimed_threads_come_from_the_method() -> None:
    from verifier.reproduce import claimed_threads

    body = _bench(HERE)
    body["method"]["threads"] = 3
    # the typed field decides, whatever a note says
    body["notes"] = ["baseline: NumPy 2 float32 with 2 BLAS thread(s); kernel OMP_NUM_THREADS=2"]
    assert claimed_threads(BenchmarkPredicate.from_json(body)) == 3
    # an entry without method.threads: the default, a note's "OMP_NUM_THREADS=2" is not read
    del body["method"]["threads"]
    assert claimed_threads(BenchmarkPredicate.from_json(body)) == 1


def test_verdict_rows_name_the_entry_they_judge() -> None:
    """Each claimed entry's rows carry its index and leaf hash, attributed by the verifier
    from the claim it compared, never by reading the rows' labels back."""
    ver = Claimed(_verification({"correctness.random": "pass"}),
                  JudgedEntry(index=1, leaf_hash="11" * 32))
    bench = Claimed(BenchmarkPredicate.from_json(_bench(HERE)),
                    JudgedEntry(index=2, leaf_hash="22" * 32))
    # two claims on one shape: their rows are alike but for the entry they name
    again = Claimed(bench.predicate, JudgedEntry(index=5, leaf_hash="55" * 32))
    body = compare([bench, ver, again], TARGET, HERE_ENV,
                   Fresh(verification=_verification({"correctness.random": "pass"}),
                         benchmark=BenchmarkPredicate.from_json(_bench(HERE))))
    assert [(c.claim.split("[")[0], c.entry.index if c.entry else None) for c in body.claims] == [
        ("benchmark.speedup", 2), ("verification.check", 1), ("verification.verdict", 1),
        ("benchmark.speedup", 5)]
    assert body.claims[3].entry == JudgedEntry(index=5, leaf_hash="55" * 32)
    assert isinstance(body.claims[0], ClaimResult)
    unnamed = compare([ver.predicate], TARGET, HERE_ENV,
                      Fresh(_verification({"correctness.random": "pass"})))
    assert all(c.entry is None for c in unnamed.claims)


def test_logged_shape_keys_in_sorted_order_match_fresh_results() -> None:
    """A logged body is canonical JSON (keys sorted: K, M, N); a fresh run keeps M, N, K."""
    claimed = _bench(HERE)
    logged_shape = {"K": 256, "M": 256, "N": 256}
    claimed["workload"]["shapes"] = [logged_shape]
    claimed["results"][0]["shape"] = logged_shape
    (c,) = _cmp(claimed, _bench(HERE))
    assert c["verdict"] == "confirmed", c["reason"]
    assert c["claim"] == "benchmark.speedup[M=256,N=256,K=256]"


class _Batches:
    """Stands in for `bench_runs`, giving each call the next injected body."""

    def __init__(self, bodies: list[dict[str, Any]]) -> None:
        self.bodies = bodies
        self.asked: list[dict[str, Any]] = []

    def __call__(self, kernel_dir: Path, runs: int, settings: BenchSettings,
                 **kwargs: Any) -> _InjectedRuns:
        self.asked.append({"runs": runs, "shapes": settings.shapes, "seed": settings.seed,
                           "like": kwargs.get("like")})
        return _InjectedRuns(self.bodies[min(len(self.asked), len(self.bodies)) - 1])


NOISY = (0.40, 0.47, 0.41, 0.46, 0.42)


def test_an_undecided_claim_is_measured_again_until_it_settles(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25 row 6: inconclusive after the first runs, `reproduce` keeps measuring
    (sequential looks, each at its spent confidence) and settles; the progress says so."""
    import verifier.benchmark

    batches = _Batches([_bench(NOISY), _bench(NOISY), _bench(NOISY)])
    monkeypatch.setattr(verifier.benchmark, "bench_runs", batches)
    said: list[str] = []
    body = reproduce_kernel(ROOT / "examples" / "matmul-blocked",
                            [BenchmarkPredicate.from_json(_bench(_times(1.3, NOISY)))], TARGET,
                            ReproduceSettings(time_budget_s=1, runs=5, sequential_budget_s=60,
                                              progress=said.append)).to_json()
    (speed,) = body["claims"]
    assert speed["verdict"] == "refuted", speed["reason"]
    assert speed["statistics"]["look"] >= 2 and speed["statistics"]["measured_runs"] >= 10
    assert len(batches.asked) >= 2
    assert any(m.startswith("look 1: 1 speed-up claim(s) undecided") for m in said), said
    predicates.parse_predicate(predicates.REPRODUCTION_V1, body)


def test_a_noisy_sitting_is_looked_at_again_and_refutes_a_far_lie(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The make-demo lie CI left inconclusive: five runs here that disagree (0.73x to 0.99x)
    against a claimed 1.22x. Distrusted for noise alone, the sitting is measured again; over
    ten runs the interval is within +-10 %, so the runs agree after all (decided again over
    all of them) and refute the claim, and a second sitting agrees."""
    import verifier.benchmark

    batches = _Batches([_noisy(CI_SITTING)])
    monkeypatch.setattr(verifier.benchmark, "bench_runs", batches)
    said: list[str] = []
    lie = BenchmarkPredicate.from_json(_bench((1.22, 1.23, 1.21, 1.22, 1.225)))
    body = reproduce_kernel(ROOT / "examples" / "matmul-blocked", [lie], TARGET,
                            ReproduceSettings(time_budget_s=1, runs=5, sequential_budget_s=60,
                                              progress=said.append)).to_json()
    (speed,) = body["claims"]
    assert speed["verdict"] == "refuted", speed["reason"]
    assert "noisy" not in speed["statistics"] and speed["statistics"]["sittings"] == 2
    assert speed["statistics"]["measured_runs"] >= 10 and len(batches.asked) >= 3, said
    # attacker's case: the same noise with one later batch whose CPU accounting was
    # incomplete: looked at no further once that batch is in, and never refuted on it
    batches = _Batches([_noisy(CI_SITTING),
                        _noisy(CI_SITTING, ("runs_disagree", "cost_incomplete"))])
    monkeypatch.setattr(verifier.benchmark, "bench_runs", batches)
    body = reproduce_kernel(ROOT / "examples" / "matmul-blocked", [lie], TARGET,
                            ReproduceSettings(time_budget_s=1, runs=5, sequential_budget_s=60)
                            ).to_json()
    (speed,) = body["claims"]
    assert speed["verdict"] == "inconclusive" and len(batches.asked) == 2, speed["reason"]
    assert "cost_incomplete" in speed["reason"]


def test_without_time_left_an_undecided_claim_is_inconclusive_with_its_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import verifier.benchmark

    batches = _Batches([_bench(NOISY)])
    monkeypatch.setattr(verifier.benchmark, "bench_runs", batches)
    said: list[str] = []
    body = reproduce_kernel(ROOT / "examples" / "matmul-blocked",
                            [BenchmarkPredicate.from_json(_bench(_times(1.3, NOISY)))], TARGET,
                            ReproduceSettings(time_budget_s=1, runs=5, sequential_budget_s=0,
                                              progress=said.append)).to_json()
    (speed,) = body["claims"]
    assert speed["verdict"] == "inconclusive" and "more run(s) here would decide" in speed["reason"]
    assert len(batches.asked) == 1
    assert any("time budget spent" in m for m in said), said


def test_conditions_apart_widen_the_tolerance_instead_of_blocking() -> None:
    """Issue 42 (replacing issue 25's rule 6b, where any difference held the verdict back):
    the claim was measured with its pinned CPU busy and a second CPU busy, and is reproduced
    on a quiet machine. The difference widens the tolerance by the shift measured for each
    kind (20 % for a shared pinned CPU, 11 % for a second busy core: 40 % together), named;
    the claim's own record (90 % of its pinned CPU used by others) makes it weak, so what
    the widened test cannot refute is unsupported, never inconclusive."""
    busy = {"pinned_cpu_busy": 0.9, "runnable": 3.0, "load_1m": 4.0, "steal": 0.0, "cores": 2}
    quiet = {"pinned_cpu_busy": 0.02, "runnable": 0.0, "load_1m": 0.1, "steal": 0.0, "cores": 2}
    claim, here = _bench(_times(1.5)), _bench(HERE)
    claim["conditions"], here["conditions"] = busy, quiet
    verdict, reason = _verdict(claim, here)
    assert verdict == "unsupported", reason
    assert "other load on the pinned CPU 90 % claimed, 2 % here" in reason
    # 3 runnable tasks, 0.9 of a CPU of them on the pinned one: the other CPU was busy
    assert "other CPUs kept busy by other work 1.0 claimed, 0.0 here" in reason
    assert "a refutation must pass 40 %" in reason and "90 % of its pinned CPU" in reason
    # twice the lie: beyond even the widened tolerance, refuted
    claim = _bench(_times(2.0))
    claim["conditions"] = busy
    assert _verdict(claim, here)[0] == "refuted"
    here["conditions"] = dict(busy, pinned_cpu_busy=0.8)
    assert _verdict(_bench(_times(1.5)) | {"conditions": busy}, here)[0] == "refuted"
    # nor is an honest claim confirmed across the difference: a busier sitting can raise a
    # speed-up as well as lower it, so the shift counts against a confirmation
    claim, here = _bench(HERE), _bench(HERE)
    claim["conditions"], here["conditions"] = quiet, busy
    verdict, reason = _verdict(claim, here)
    assert verdict == "inconclusive" and "a sitting under the claim's conditions" in reason


def test_a_verdict_either_way_needs_the_claims_conditions_not_a_shield() -> None:
    """Issue 25's done-when under issue 42's rule: a 1.25x-inflated claim published while a
    second process spins on the pinned core, reproduced on a quiet machine (and the reverse).
    Sharing the pinned CPU moved sum-rows' speed-up by 10-20 %: across that difference the
    lie is never confirmed and the honest claim never refuted; the spun claim's own record
    makes it weak, so it is unsupported (the claimant's burden), never inconclusive. Under
    matched conditions (a reproducer recreates the spinner, `place_like`) the lie is refuted
    and the honest claim confirmed."""
    spun = {"pinned_cpu_busy": 1.0, "runnable": 1.0, "load_1m": 1.4, "steal": 0.0, "cores": 2}
    quiet = {"pinned_cpu_busy": 0.08, "runnable": 0.2, "load_1m": 0.6, "steal": 0.0, "cores": 2}
    for factor in (1.25, 1.0):
        for claimed, measured in ((spun, quiet), (quiet, spun)):
            claim, here = _bench(_times(factor)), _bench(HERE)
            claim["conditions"], here["conditions"] = claimed, measured
            verdict, reason = _verdict(claim, here)
            assert verdict == ("unsupported" if claimed is spun else "inconclusive"), reason
            assert "other load on the pinned CPU" in reason
        claim, here = _bench(_times(factor)), _bench(HERE)
        claim["conditions"], here["conditions"] = spun, dict(spun, pinned_cpu_busy=0.97)
        assert _verdict(claim, here)[0] == ("refuted" if factor > 1 else "confirmed")
    claim, here = _bench(_times(1.25)), _bench(HERE)
    claim["conditions"], here["conditions"] = dict(spun, runnable=2.5), quiet
    verdict, reason = _verdict(claim, here)
    assert verdict == "unsupported" and \
        "other CPUs kept busy by other work 1.0 claimed, 0.1 here" in reason


def test_the_steal_shielded_lie_is_refuted_or_unsupported_never_inconclusive() -> None:
    """Issue 42 item 1, the attacker's claim: a real bench's speed-ups x1.5 with
    `conditions.steal` set to 0.3 in the claim. Its own conditions never hold back a
    refutation: it is refuted (the steal margin is the 30 % difference, the lie larger) or
    at worst unsupported (a claim recording 30 % steal is weak), never inconclusive; and the
    same lie with honest conditions, reproduced in a sitting that saw 8 % steal, is refuted."""
    quiet = {"pinned_cpu_busy": 0.0, "runnable": 0.0, "load_1m": 0.2, "steal": 0.0, "cores": 2}
    for factor in (1.5, 1.3, 1.2, 1.1):
        claim, here = _bench(_times(factor)), _bench(HERE)
        claim["conditions"], here["conditions"] = dict(quiet, steal=0.3), quiet
        verdict, reason = _verdict(claim, here)
        assert verdict in ("refuted", "unsupported"), reason
        assert "30 % of the CPU was stolen" in reason or verdict == "refuted"
    claim, here = _bench(_times(1.5)), _bench(HERE)
    claim["conditions"], here["conditions"] = quiet, dict(quiet, steal=0.08)
    verdict, reason = _verdict(claim, here)
    assert verdict == "refuted", reason


def test_an_honest_claim_measured_busy_and_reproduced_quiet_is_never_refuted() -> None:
    """Issue 42 item 3 (injected measurements): honest claims published on a busy machine
    read up to 20 % faster (a shared pinned CPU) or 11 % (a second busy core) than a quiet
    sitting measures them. Across every such difference and shift, and every noise level
    here, none is refuted."""
    busy_pinned = {"pinned_cpu_busy": 0.6, "runnable": 0.6, "load_1m": 3.0, "steal": 0.0,
                   "cores": 2}
    busy_other = {"pinned_cpu_busy": 0.0, "runnable": 1.0, "load_1m": 3.0, "steal": 0.0,
                  "cores": 2}
    quiet = {"pinned_cpu_busy": 0.0, "runnable": 0.0, "load_1m": 0.1, "steal": 0.0, "cores": 2}
    for busy, shift in ((busy_pinned, 1.20), (busy_other, 1.11)):
        for factor in (1.0, 1.05, shift):
            for runs in (HERE, NOISY, (0.43, 0.431, 0.429, 0.4305, 0.4295)):
                claim, here = _bench(_times(factor, runs)), _bench(runs)
                claim["conditions"], here["conditions"] = busy, quiet
                verdict, reason = _verdict(claim, here)
                assert verdict != "refuted", reason
                assert verdict != "inconclusive" or busy is busy_other, reason


def test_conditions_no_machine_could_have_had_are_no_shield() -> None:
    """The attacker's way past the other-CPUs gate: record conditions no reproducer can match
    (50 runnable tasks on a 2-core machine), so that every refutation is held back. A claim
    cannot have had more other CPUs busy than it had other CPUs: 50 tasks count as the one
    other CPU busy, which a reproducer matches with a spinner of its own (below: its sitting
    then shows one other CPU busy), and the refutation stands. Claiming more cores than the
    reproducer has is other hardware, where no refutation stands anyway (and none is
    confirmed)."""
    forged = {"pinned_cpu_busy": 0.0, "runnable": 50.0, "load_1m": 50.0, "steal": 0.0,
              "cores": 2}
    matched = {"pinned_cpu_busy": 0.02, "runnable": 1.05, "load_1m": 1.1, "steal": 0.0,
               "cores": 2}
    claim, here = _bench(_times(1.25)), _bench(HERE)
    claim["conditions"], here["conditions"] = forged, matched
    verdict, reason = _verdict(claim, here)
    assert verdict == "refuted", reason


def test_extending_a_benchmark_keeps_it_a_valid_body() -> None:
    from verifier.reproduce._claims import extend_benchmark

    merged = extend_benchmark(_bench(HERE), _bench(NOISY))
    parsed = predicates.parse_predicate(BENCHMARK_V1, merged)
    assert merged["method"]["runs"] == 10 and len(merged["results"][0]["runs"]) == 10
    assert parsed is not None


def test_whether_runs_agree_is_decided_again_over_every_run_merged() -> None:
    """Issue 42's rule (a measurement is trusted only when its runs agree) over the runs a
    further look adds: two batches that disagreed alone but agree together are trusted; the
    interval is the t interval over all the runs; any other distrust is kept."""
    from verifier.reproduce._claims import extend_benchmark

    first, second = (0.80, 0.95, 0.85, 0.99, 0.83), (0.92, 0.86, 0.97, 0.81, 0.90)
    merged = extend_benchmark(_noisy(first), _noisy(second))
    assert merged["trusted"] is True and "caveats" not in merged
    lo, hi = merged["results"][0]["speedup_ci95"]
    assert min(first + second) < lo < merged["results"][0]["speedup"] < hi < max(first + second)
    # still disagreeing over all ten: one runs_disagree caveat, over all of them
    wide = extend_benchmark(_noisy(CI_SITTING), _noisy((0.5, 1.2, 0.6, 1.1, 0.7)))
    assert wide["trusted"] is False
    assert [c["kind"] for c in wide["caveats"]] == ["runs_disagree"]
    assert "the 10 runs read" in wide["caveats"][0]["detail"]
    # attacker's case: agreeing runs do not wash out a batch distrusted for anything else
    other = extend_benchmark(_noisy(first), _noisy(second, ("runs_disagree", "cost_incomplete")))
    assert other["trusted"] is False
    assert [c["kind"] for c in other["caveats"]] == ["cost_incomplete"]
    faulty = _bench(second, trusted=False,
                    faults=[{"kind": "escaped_work", "shape": None, "detail": "a thread"}])
    assert extend_benchmark(_bench(first), faulty)["trusted"] is False


QUIET_CONDITIONS = {"pinned_cpu_busy": 0.02, "runnable": 0.0, "load_1m": 0.1, "steal": 0.0,
                    "cores": 2}
BUSY_CONDITIONS = {"pinned_cpu_busy": 0.5, "runnable": 2.0, "load_1m": 2.1, "steal": 0.02,
                   "cores": 2}


def test_a_reproduction_records_its_catalogue_and_the_conditions_it_measured_under(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """reproduction/v1's catalogue_version and conditions come from the run: this verifier's
    op catalogue, and the conditions the fresh benchmark recorded (never the claim's)."""
    import verifier.benchmark
    from attest.ops import CATALOGUE_VERSION

    here = _bench(HERE)
    here["conditions"] = QUIET_CONDITIONS
    monkeypatch.setattr(verifier.benchmark, "bench_runs", _InjectedRuns(here))
    claim = _bench(_times(1.0))
    claim["conditions"] = dict(QUIET_CONDITIONS, load_1m=0.3)
    body = reproduce_kernel(ROOT / "examples" / "matmul-blocked",
                            [BenchmarkPredicate.from_json(claim)], TARGET,
                            ReproduceSettings(time_budget_s=1, runs=5)).to_json()
    assert body["catalogue_version"] == CATALOGUE_VERSION
    assert body["conditions"] == QUIET_CONDITIONS
    parsed = predicates.parse_predicate(predicates.REPRODUCTION_V1, body)
    assert isinstance(parsed, predicates.ReproductionPredicate)
    assert parsed.conditions is not None and parsed.conditions.pinned_cpu_busy == 0.02


def test_a_reproduction_over_several_looks_records_the_conditions_over_all_of_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import verifier.benchmark

    first, later = _bench(NOISY), _bench(NOISY)
    first["conditions"], later["conditions"] = QUIET_CONDITIONS, BUSY_CONDITIONS
    batches = _Batches([first, later, later])
    monkeypatch.setattr(verifier.benchmark, "bench_runs", batches)
    body = reproduce_kernel(ROOT / "examples" / "matmul-blocked",
                            [BenchmarkPredicate.from_json(_bench(_times(1.3, NOISY)))], TARGET,
                            ReproduceSettings(time_budget_s=1, runs=5,
                                              sequential_budget_s=60)).to_json()
    assert len(batches.asked) >= 2
    got = body["conditions"]
    # the means of the batches' probes; the load average is the last one's
    assert QUIET_CONDITIONS["runnable"] < got["runnable"] <= BUSY_CONDITIONS["runnable"]
    assert 0.02 < got["pinned_cpu_busy"] < 0.5 and got["load_1m"] == 2.1


def test_a_reproduction_that_ran_no_benchmark_records_no_conditions() -> None:
    from attest.ops import CATALOGUE_VERSION
    from verifier.reproduce import not_rerun

    ver = VerificationPredicate.from_json(ex.verification())
    body = compare([ver], TARGET, HERE_ENV, Fresh(ver)).to_json()
    assert body["catalogue_version"] == CATALOGUE_VERSION and "conditions" not in body
    skipped = not_rerun([ver], TARGET, "op layernorm is not known", HERE_ENV).to_json()
    assert skipped["catalogue_version"] == CATALOGUE_VERSION and "conditions" not in skipped


def test_a_cold_claim_is_re_measured_cold_where_a_gpu_runs_the_device_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim measured with the L2 flushed between calls is re-measured the same way (a
    hot re-measurement of it would favour the kernel's cache reuse); without a GPU the host
    path has one mode only."""
    from types import SimpleNamespace

    from verifier.reproduce import _claims
    from verifier.reproduce._claims import claimed_cold

    cold = SimpleNamespace(device=SimpleNamespace(cold=True))
    hot = SimpleNamespace(device=SimpleNamespace(cold=False))
    monkeypatch.setattr(_claims, "gpu_probe", lambda: SimpleNamespace(error=None))
    assert claimed_cold(cold) is True  # type: ignore[arg-type]
    assert claimed_cold(hot) is False  # type: ignore[arg-type]
    assert claimed_cold(SimpleNamespace(device=None)) is False  # type: ignore[arg-type]
    monkeypatch.setattr(_claims, "gpu_probe", lambda: SimpleNamespace(error="no GPU"))
    assert claimed_cold(cold) is False  # type: ignore[arg-type]


# The demo's honest rmsnorm-rows claim, as CI logged it: claimed in one sitting, refuted by
# a sitting whose five runs agreed closely (1.2 % apart) but all ran 15 % slower, and then
# measured again in the next sitting, which agreed with the claim.
HONEST_CLAIM = (0.904, 0.926, 0.926, 0.817, 0.801)
ODD_SITTING = (0.745, 0.748, 0.741, 0.750, 0.744)
NEXT_SITTING = (0.880, 0.861, 0.902, 0.842, 0.875)
#: Runs 20 % apart: however many are added, the claim's own five runs and this spread keep
#: the interval wider than the tolerance.
WILD_RUNS = (0.70, 1.00, 0.74, 0.98, 0.72)


def _reproduce_over(sittings: list[dict[str, Any]], claim: dict[str, Any],
                    budget_s: float = 60) -> tuple[dict[str, Any], _Batches, list[str]]:
    batches = _Batches(sittings)
    said: list[str] = []
    import verifier.benchmark

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(verifier.benchmark, "bench_runs", batches)
        body = reproduce_kernel(ROOT / "examples" / "matmul-blocked",
                                [BenchmarkPredicate.from_json(claim)], TARGET,
                                ReproduceSettings(time_budget_s=1, runs=5,
                                                  sequential_budget_s=budget_s,
                                                  progress=said.append)).to_json()
    predicates.parse_predicate(predicates.REPRODUCTION_V1, body)
    return body, batches, said


def test_an_honest_claim_refuted_by_one_odd_sitting_is_not_refuted() -> None:
    """The CI failure replayed: the first sitting's test refutes the honest claim; the
    second sitting does not, and its further runs (ever wider apart) cannot decide, so the
    claim is inconclusive, its reason naming both."""
    one_sitting = _verdict(_bench(HONEST_CLAIM), _bench(ODD_SITTING))
    assert one_sitting[0] == "refuted", one_sitting  # what the test alone said
    body, batches, said = _reproduce_over(
        [_bench(ODD_SITTING), _bench(NEXT_SITTING), _bench(WILD_RUNS)], _bench(HONEST_CLAIM))
    (speed,) = body["claims"]
    assert speed["verdict"] == "inconclusive" and body["verdict"] == "inconclusive"
    assert speed["reason"].startswith("refuted in the first sitting; the second could not "
                                      "decide"), speed
    assert "the first: " in speed["reason"] and speed["statistics"]["sittings"] == 1
    assert len(batches.asked) >= 2
    assert any("refuted in one sitting" in m and "second sitting" in m for m in said), said


def test_an_inflated_claim_is_refuted_in_two_sittings() -> None:
    """The attacker's claim (x1.5) is refuted by both sittings and stays refuted."""
    body, batches, _ = _reproduce_over([_bench(HERE), _bench(_times(1.02))],
                                       _bench(_times(1.5)))
    (speed,) = body["claims"]
    assert speed["verdict"] == "refuted" and body["verdict"] == "refuted", speed
    assert speed["statistics"]["sittings"] == 2
    assert "refuted in two sittings (the first: " in speed["reason"]
    assert len(batches.asked) == 2


def test_a_second_sitting_never_turns_a_refutation_into_a_confirmation() -> None:
    """A claim refuted by the first sitting and matched by a second (a kernel fast only
    sometimes, or a machine quiet only then) is inconclusive, never confirmed."""
    body, _, _ = _reproduce_over([_bench(HERE), _bench(_times(1.5))], _bench(_times(1.5)))
    (speed,) = body["claims"]
    assert speed["verdict"] == "inconclusive", speed
    assert "the sittings disagree: refuted in the first, confirmed in the second" in \
        speed["reason"]


def test_a_typed_fault_in_the_second_sitting_refutes() -> None:
    shape = {"M": 256, "N": 256, "K": 256}
    cheat = _bench(_times(1.5), trusted=False, faults=[
        {"kind": "escaped_work", "shape": shape, "detail": "work escaping the timed call"}])
    body, _, _ = _reproduce_over([_bench(HERE), cheat], _bench(_times(1.5)))
    (speed,) = body["claims"]
    assert speed["verdict"] == "refuted" and "(escaped_work)" in speed["reason"], speed
    assert speed["statistics"]["sittings"] == 2


def test_without_time_for_a_second_sitting_the_refutation_stands_and_says_so() -> None:
    body, batches, said = _reproduce_over([_bench(HERE)], _bench(_times(1.5)), budget_s=0)
    (speed,) = body["claims"]
    assert speed["verdict"] == "refuted" and "sittings" not in speed["statistics"]
    assert len(batches.asked) == 1
    assert any("no time budget left for a second" in m for m in said), said


def test_every_sitting_is_measured_under_the_claims_conditions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25 rule 5: a refutation needs two sittings, and each of them (the first, every
    further look, the second sitting) is asked to measure under the conditions the claim
    recorded (`bench_runs(like=...)`, which places the runs and the reproducer's own load to
    match them); a claim that recorded none asks for nothing."""
    import verifier.benchmark

    busy_elsewhere = {"pinned_cpu_busy": 0.03, "runnable": 1.1, "load_1m": 1.2, "steal": 0.0,
                      "cores": 2}
    injected = _InjectedRuns(_bench(HERE))
    monkeypatch.setattr(verifier.benchmark, "bench_runs", injected)
    claim = _bench(_times(1.5))
    claim["conditions"] = busy_elsewhere
    body = reproduce_kernel(ROOT / "examples" / "matmul-blocked",
                            [BenchmarkPredicate.from_json(claim)], TARGET,
                            ReproduceSettings(time_budget_s=3, runs=5,
                                              sequential_budget_s=60)).to_json()
    assert body["claims"][0]["verdict"] == "refuted"
    assert len(injected.asked) == 2  # the first sitting and the second
    assert all(a["like"] == busy_elsewhere for a in injected.asked), injected.asked
    claim.pop("conditions")
    injected.asked.clear()
    reproduce_kernel(ROOT / "examples" / "matmul-blocked", [BenchmarkPredicate.from_json(claim)],
                     TARGET, ReproduceSettings(time_budget_s=3, runs=5))
    assert [a["like"] for a in injected.asked] == [None]
