"""Claim comparison: confirmed, refuted (with evidence), inconclusive (and why)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier import ReproduceError
from verifier.reproduce import (
    BENCHMARK_V1,
    VERIFICATION_V1,
    compare,
    compare_benchmark,
    overall_verdict,
    reproduce_kernel,
)

ROOT = Path(__file__).resolve().parent.parent
ENV = {"cpu_model": "AMD EPYC", "cpu_flags": ["avx2"], "cores": 2, "machine": "x86_64",
       "gpu": None, "gpu_driver": None, "compiler": "gcc 12.2.0", "libraries": {"numpy": "2"},
       "os": "Linux 6", "python": "3.11.7"}
TARGET = {"origin": "example.test/log", "index": 3, "leaf_hash": "ab" * 32,
          "predicate_type": BENCHMARK_V1, "subject_sha256": "cd" * 32}


def _bench(speedup: float, lo: float, hi: float, env: dict[str, Any] | None = None,
           trusted: bool = True, notes: list[str] | None = None) -> dict[str, Any]:
    shape = {"M": 256, "N": 256, "K": 256}
    return {"environment": env or ENV,
            "workload": {"op": "matmul", "dtype": "float32", "seed": 1, "shapes": [shape]},
            "results": [{"shape": shape, "n": 50, "median_ns": 1000.0, "p5_ns": 900.0,
                         "p95_ns": 1100.0, "baseline_median_ns": 1000.0 * speedup,
                         "speedup": speedup, "speedup_ci95": [lo, hi], "gflops": 1.0}],
            "trusted": trusted, "notes": notes or []}


def _verdict(claimed: dict[str, Any], measured: dict[str, Any]) -> tuple[str, str]:
    (c,) = compare_benchmark(claimed, measured)
    return c["verdict"], c["reason"]


def test_speedup_verdicts() -> None:
    assert _verdict(_bench(2.0, 1.9, 2.1), _bench(1.95, 1.85, 2.05))[0] == "confirmed"
    verdict, reason = _verdict(_bench(2.0, 1.9, 2.1), _bench(1.1, 1.0, 1.2))
    assert verdict == "refuted" and "below the claimed interval" in reason and "1.100" in reason
    assert _verdict(_bench(2.0, 1.9, 2.1), _bench(3.0, 2.9, 3.1))[0] == "confirmed"
    verdict, reason = _verdict(_bench(2.0, 1.95, 2.05), _bench(1.85, 1.7, 1.96))
    assert verdict == "confirmed" and "within the 30% run-to-run margin" in reason
    # Below the claimed interval by ordinary run-to-run noise: still confirmed.
    verdict, reason = _verdict(_bench(0.93, 0.91, 0.95), _bench(0.82, 0.81, 0.83))
    assert verdict == "confirmed" and "floor 0.637x" in reason
    # Straddling the floor (1.95 * 0.7 = 1.365): neither confirmed nor refuted.
    verdict, reason = _verdict(_bench(2.0, 1.95, 2.05), _bench(1.35, 1.30, 1.40))
    assert verdict == "inconclusive" and "straddles" in reason
    # An inflated claim (3x the truth) is far below the floor: refuted.
    verdict, reason = _verdict(_bench(1.29, 1.26, 1.32), _bench(0.43, 0.42, 0.44))
    assert verdict == "refuted" and "more than the 30% run-to-run margin" in reason


def test_different_hardware_compares_ratios_and_says_so() -> None:
    other = dict(ENV, cpu_model="Intel Xeon", cores=64)
    verdict, reason = _verdict(_bench(2.0, 1.9, 2.1), _bench(1.1, 1.0, 1.2, env=other))
    assert verdict == "inconclusive"
    assert "different hardware" in reason and "ratios, not absolute times" in reason
    assert _verdict(_bench(2.0, 1.9, 2.1), _bench(2.0, 1.9, 2.1, env=other))[0] == "confirmed"


def test_untrusted_measurement() -> None:
    noisy = _bench(1.1, 0.5, 2.0, trusted=False,
                   notes=["{M=256,N=256,K=256}: too unstable: the speed-up interval is +-60%"])
    assert _verdict(_bench(2.0, 1.9, 2.1), noisy)[0] == "inconclusive"
    cheat = _bench(50.0, 49.0, 51.0, trusted=False,
                   notes=["{M=256,N=256,K=256}: timer tampering: the child's clock says ..."])
    verdict, reason = _verdict(_bench(50.0, 49.0, 51.0), cheat)
    assert verdict == "refuted" and "timer tampering" in reason


def _verification(outcomes: dict[str, str]) -> dict[str, Any]:
    checks = [{"name": n, "outcome": o, "detail": f"{n} {o}", "inputs": {}, "metrics": {}}
              for n, o in outcomes.items()]
    verdict = "fail" if any(o in ("fail", "error") for o in outcomes.values()) else "pass"
    return {"environment": ENV, "budget": "quick", "seed": 1, "checks": checks, "verdict": verdict}


def test_verification_claims() -> None:
    claimed = _verification({"correctness.random": "pass", "sanitizer.tsan": "skip"})
    body = compare([(VERIFICATION_V1, claimed)], TARGET, ENV,
                   verification=_verification({"correctness.random": "pass"}))
    assert body["verdict"] == "confirmed"
    assert [c["claim"] for c in body["claims"]] == ["verification.check[correctness.random]",
                                                    "verification.verdict"]
    refuted = compare([(VERIFICATION_V1, claimed)], TARGET, ENV,
                      verification=_verification({"correctness.random": "fail"}))
    assert refuted["verdict"] == "refuted"
    assert "claimed pass, fails here: correctness.random fail" in refuted["claims"][0]["reason"]


def test_compare_rejects_what_it_cannot_rerun() -> None:
    with pytest.raises(ReproduceError, match="cannot reproduce"):
        compare([("https://kerneltransparency.dev/attestation/kernel/v1", {})], TARGET, ENV)
    with pytest.raises(ReproduceError, match="fresh benchmark"):
        compare([(BENCHMARK_V1, _bench(1, 1, 1))], TARGET, ENV)
    with pytest.raises(ReproduceError, match="malformed"):
        compare_benchmark({"results": []}, {})


@given(st.lists(st.sampled_from(["confirmed", "refuted", "inconclusive"]), max_size=6))
def test_overall_verdict_rules(verdicts: list[str]) -> None:
    v = overall_verdict([{"verdict": x} for x in verdicts])
    if "refuted" in verdicts:
        assert v == "refuted"
    elif verdicts and set(verdicts) == {"confirmed"}:
        assert v == "confirmed"
    else:
        assert v == "inconclusive"


def test_predicate_types_match_attest() -> None:
    predicates = pytest.importorskip("attest.predicates")
    assert predicates.BENCHMARK_V1 == BENCHMARK_V1
    assert predicates.VERIFICATION_V1 == VERIFICATION_V1


def test_reproduce_kernel_end_to_end_refutes_an_inflated_claim() -> None:
    """A real run: the honest claim is confirmed, the same claim x3 is refuted."""
    from verifier import bench, check, environment_fingerprint

    kernel = ROOT / "examples" / "sum-rows"
    shapes = [{"R": 128, "C": 512}]
    ver = check(kernel, budget="quick", seed=5).to_predicate()
    real = bench(kernel, shapes=shapes, seed=5, time_budget_s=3, max_halfwidth=0.5).to_predicate()
    inflated = copy.deepcopy(real)
    for r in inflated["results"]:
        r["speedup"] *= 3
        r["speedup_ci95"] = [x * 3 for x in r["speedup_ci95"]]
    body = reproduce_kernel(kernel, [(VERIFICATION_V1, ver), (BENCHMARK_V1, inflated)],
                            TARGET, time_budget_s=3)
    assert body["verdict"] == "refuted"
    speed = [c for c in body["claims"] if c["claim"].startswith("benchmark.speedup")]
    assert speed and speed[0]["verdict"] == "refuted"
    assert body["environment"] == environment_fingerprint()
    predicates = pytest.importorskip("attest.predicates")
    predicates.parse_predicate(predicates.REPRODUCTION_V1, body)


def test_claimed_threads_read_from_notes() -> None:
    from verifier.reproduce import claimed_threads

    assert claimed_threads({"notes": ["baseline: NumPy 2 float32 with 2 BLAS thread(s); "
                                      "kernel OMP_NUM_THREADS=2; idle threads sleep"]}) == 2
    assert claimed_threads({"notes": []}) == 1
    assert claimed_threads({}) == 1


def test_logged_shape_keys_in_sorted_order_match_fresh_results() -> None:
    """A logged body is canonical JSON (keys sorted: K, M, N); a fresh run keeps M, N, K."""
    claimed = _bench(2.0, 1.9, 2.1)
    logged_shape = {"K": 256, "M": 256, "N": 256}
    claimed["workload"]["shapes"] = [logged_shape]
    claimed["results"][0]["shape"] = logged_shape
    (c,) = compare_benchmark(claimed, _bench(1.95, 1.85, 2.05))
    assert c["verdict"] == "confirmed", c["reason"]
    assert c["claim"] == "benchmark.speedup[M=256,N=256,K=256]"
