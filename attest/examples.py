"""Example predicate bodies, one per type: documentation, tests and benchmarks build on them.

Each function returns a fresh JSON dict that validates; callers may mutate it.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from attest.predicates import BENCHMARK_V1


def digest(label: str) -> str:
    """A stable fake sha256 hex digest for examples."""
    return hashlib.sha256(label.encode()).hexdigest()


def environment() -> dict[str, Any]:
    return {"cpu_model": "AMD EPYC 7B13", "cpu_flags": ["avx2", "fma", "sse4_2"], "cores": 2,
            "machine": "x86_64", "gpu": None, "gpu_driver": None, "compiler": "gcc 12.2.0",
            "libraries": {"numpy": "2.1.0"}, "os": "Linux 6.1", "python": "3.11.7"}


def kernel() -> dict[str, Any]:
    return {"name": "acme/matmul-blocked", "version": "1.0.0", "op": "matmul", "runtime": "c",
            "entry": "matmul_blocked", "abi_version": 1,
            "sources": [{"path": "matmul.c", "sha256": digest("matmul.c")}],
            "build": {"compiler": "gcc", "compiler_version": "12.2.0",
                      "flags": ["-O3", "-march=native"]},
            "generator": {"agent": "kernelsmith", "agent_version": "0.3", "model": "m-2026",
                          "prompt_sha256": digest("prompt")},
            "target": {"hardware_class": "x86_64-avx2"}, "parent": None}


def benchmark(n_results: int = 1) -> dict[str, Any]:
    shapes = [{"M": 64 * (i + 1), "N": 64 * (i + 1), "K": 64 * (i + 1)} for i in range(n_results)]
    results = [
        {"shape": dict(shape), "n": 50, "median_ns": 1000.0 * (i + 1), "p5_ns": 900.0 * (i + 1),
         "p95_ns": 1200.0 * (i + 1), "baseline_median_ns": 2100.0 * (i + 1), "speedup": 2.1,
         "speedup_ci95": [1.95, 2.3],
         "gflops": 2 * (64 * (i + 1)) ** 3 / (1000.0 * (i + 1))}  # matmul FLOPs / median_ns
        for i, shape in enumerate(shapes)
    ]
    return {"environment": environment(),
            "workload": {"op": "matmul", "dtype": "float32", "seed": 1, "shapes": shapes},
            "method": {"warmup": 5, "repetitions": 50, "timer": "perf_counter_ns",
                       "interleaved": True, "baseline": "numpy-reference", "fresh_inputs": True,
                       "outputs_rechecked": True},
            "results": results,
            "samples": {"sha256": digest("samples"), "size": 123, "media_type": "application/json"},
            "trusted": True, "notes": ["pinned to core 1"]}


def benchmark_runs(runs: tuple[float, ...] = (2.05, 2.1, 2.2), n_results: int = 1) -> dict[str, Any]:
    """A schema_version 2 benchmark: every result lists its independent runs."""
    body = benchmark(n_results)
    body["schema_version"] = 2
    body["method"].update(runs=len(runs), cpu_pinned=True)
    for result in body["results"]:
        result["runs"] = [{"speedup": s, "speedup_ci95": [0.98 * s, 1.02 * s], "median_ns": 1000.0,
                           "baseline_median_ns": 1000.0 * s, "n": 50} for s in runs]
        # the aggregate is the runs' geometric mean, inside its own interval
        result["speedup"] = math.exp(sum(math.log(s) for s in runs) / len(runs))
        result["speedup_ci95"] = [0.98 * min(runs), 1.02 * max(runs)]
    return body


def verification() -> dict[str, Any]:
    return {"environment": environment(), "budget": "quick", "seed": 1,
            "checks": [
                {"name": "correctness.random", "outcome": "pass",
                 "detail": "max rel err 1.2e-7 <= tol 1e-5 on 12 shapes",
                 "inputs": {"shapes": [{"M": 3, "N": 5, "K": 7}]},
                 "metrics": {"max_abs_err": 1e-6, "max_rel_err": 1.2e-7, "max_ulp": 2,
                             "tolerance": 1e-5}},
                {"name": "build", "outcome": "pass", "detail": "gcc -O3",
                 "inputs": {"flags": ["-O3"]}, "metrics": {"relaxed_math": 0}},
                {"name": "determinism", "outcome": "pass", "detail": "bitwise identical",
                 "inputs": {"shapes": [{"M": 3, "N": 5, "K": 7}], "repeats": 2},
                 "metrics": {"calls": 4}},
                {"name": "sanitizer.tsan", "outcome": "skip", "detail": "no threads",
                 "inputs": {}, "metrics": {}},
            ],
            "verdict": "pass"}


def reproduction() -> dict[str, Any]:
    return {"target": {"origin": "ktl.example/log", "index": 3, "leaf_hash": digest("leaf"),
                       "predicate_type": BENCHMARK_V1, "subject_sha256": digest("source")},
            "environment": environment(),
            "claims": [{"claim": "benchmark.speedup[M=256,N=256,K=256]", "verdict": "refuted",
                        "claimed": {"speedup": 2.0, "speedup_ci95": [1.9, 2.1]},
                        "measured": {"speedup": 1.1, "speedup_ci95": [1.0, 1.2]},
                        "reason": "measured interval lies below the claimed one",
                        "entry": {"index": 2, "leaf_hash": digest("claim")}},
                       {"claim": "verification.verdict", "verdict": "confirmed",  # no "entry":
                        "claimed": {"verdict": "pass"}, "measured": {"verdict": "pass"},  # as
                        "reason": "same verdict"}],  # logged before verdicts named it
            "verdict": "refuted"}


def reproduction_v2() -> dict[str, Any]:
    """A schema_version 2 reproduction: the policy, typed statistics, the environment diff."""
    body = reproduction()
    body["schema_version"] = 2
    body["policy"] = {"tolerance": 0.05, "confidence": 0.99, "test": "log-speedup-t"}
    body["claims"][0]["statistics"] = {
        "claimed_runs": 5, "measured_runs": 5, "inflation": 1.82, "inflation_interval": [1.7, 1.95],
        "measured_interval": [1.05, 1.15], "sigma": 0.03, "more_runs": None}
    body["claims"][0]["environment_diff"] = [
        {"field": "libraries.numpy", "hardware": False, "claimed": "2.1.0", "measured": "2.4.6"}]
    return body


def suite() -> dict[str, Any]:
    """A suite run of three problems: one correct and benchmarked, one incorrect, one refused;
    the summary is the one recomputed from the rows. The dataset digest is `SOURCE_SHA256`."""
    return {
        "dataset_sha256": digest("source"),
        "settings": {"budget": "quick", "bench": True, "levels": [1], "shard": "1/1",
                     "memory_limit_bytes": 8 << 30},
        "rows": [
            {"key": "level1/1_Square_matmul", "status": "correct",
             "solution_sha256": digest("solution 1"), "indices": [4, 5, 6],
             "entries_sha256": digest("entries 1"), "speedup": 1.6, "trusted": True,
             "refused": None},
            {"key": "level1/2_ReLU", "status": "incorrect", "solution_sha256": digest("s2"),
             "indices": [7, 8], "entries_sha256": digest("entries 2"), "speedup": None,
             "trusted": None, "refused": None},
            {"key": "level1/3_Huge", "status": "refused", "solution_sha256": digest("s3"),
             "indices": [], "entries_sha256": None, "speedup": None, "trusted": None,
             "refused": "one call does not fit this machine"}],
        "summary": {"entries": 3, "correct": 1, "correct_pct": 33.3,
                    "fast_p": {"1": 33.3, "1.5": 33.3, "2": 0.0}, "benchmarked": 1,
                    "trusted": 1, "trusted_pct": 33.3,
                    "fast_p_trusted": {"1": 33.3, "1.5": 33.3, "2": 0.0}, "incorrect": 1,
                    "refused": {"one call does not fit this machine": 1}, "errors": 0},
    }


KERNEL_NAME = "acme/matmul-blocked"
SOURCE_SHA256 = digest("source")
