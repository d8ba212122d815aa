"""Real signed entries for the explorer tests (built with attest, never hand-written bytes).

``hostile`` puts HTML and script into every free-text field the predicates allow,
the way an attacker would.
"""

from __future__ import annotations

import hashlib
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from attest import (
    BENCHMARK_V1,
    KERNEL_V1,
    REPRODUCTION_V1,
    VERIFICATION_V1,
    decode_entry,
    encode_entry,
    generate_private_key,
    make_entry,
    make_statement,
    parse_predicate,
    verify_entry,
)

XSS = '<script>alert("xss")</script><img src=x onerror=alert(2)>'
NAME = "acme/matmul-blocked"
SHAPES = [{"M": 64, "N": 64, "K": 64}, {"M": 128, "N": 128, "K": 128}]


def digest_of(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


def environment(hostile: bool = False) -> dict[str, Any]:
    return {
        "cpu_model": XSS if hostile else "Test CPU @ 3.0GHz", "cpu_flags": ["avx2"], "cores": 2,
        "machine": "x86_64", "gpu": None, "gpu_driver": None, "compiler": "gcc 12.2.0",
        "libraries": {"numpy": "2.1.0"}, "os": "Linux 6.1", "python": "3.11.7",
    }


def kernel_body(name: str = NAME, hostile: bool = False) -> dict[str, Any]:
    return {
        "name": name, "version": "1.0.0", "op": "matmul", "runtime": "c",
        "entry": "matmul_blocked", "abi_version": 1,
        "sources": [{"path": "matmul.c", "sha256": digest_of("src")}],
        "build": {"compiler": "gcc", "compiler_version": "12.2.0", "flags": ["-O3"]},
        "generator": {"agent": "kernelsmith", "agent_version": "0.3",
                      "model": XSS[:120] if hostile else "m-2026", "prompt_sha256": None},
        "target": {"hardware_class": "x86_64-avx2"}, "parent": None,
    }


def benchmark_body(speedups: list[float], hostile: bool = False) -> dict[str, Any]:
    results = []
    for shape, s in zip(SHAPES, speedups, strict=False):
        results.append({
            "shape": shape, "n": 50, "median_ns": 1000.0, "p5_ns": 900.0, "p95_ns": 1100.0,
            "baseline_median_ns": 1000.0 * s, "speedup": s,
            "speedup_ci95": [s * 0.9, s * 1.1], "gflops": 10.0,
        })
    return {
        "environment": environment(hostile),
        "workload": {"op": "matmul", "dtype": "float32", "seed": 1,
                     "shapes": SHAPES[: len(speedups)]},
        "method": {"warmup": 5, "repetitions": 50, "timer": "perf_counter_ns",
                   "interleaved": True, "baseline": "numpy-reference", "fresh_inputs": True,
                   "outputs_rechecked": True},
        "results": results,
        "samples": {"sha256": digest_of("samples"), "size": 10, "media_type": "application/json"},
        "trusted": True,
        "notes": [XSS] if hostile else ["quick budget"],
    }


def verification_body(hostile: bool = False) -> dict[str, Any]:
    return {
        "environment": environment(), "budget": "quick", "seed": 1,
        "checks": [{"name": "correctness.random", "outcome": "pass",
                    "detail": XSS if hostile else "max rel err 1e-7 <= tol 1e-5",
                    "inputs": {"shapes": [{"M": 3, "N": 5, "K": 7}]},
                    "metrics": {"max_abs_err": 0.0, "max_rel_err": 0.0, "max_ulp": 0,
                                "tolerance": 1e-5}}],
        "verdict": "pass",
    }


def reproduction_body(target_index: int, leaf_hex: str, subject: str,
                      claimed: list[float], measured: list[float]) -> dict[str, Any]:
    claims = []
    for shape, c, m in zip(SHAPES, claimed, measured, strict=False):
        label = ",".join(f"{k}={v}" for k, v in shape.items())
        refuted = m * 1.1 < c * 0.9
        claims.append({
            "claim": f"benchmark.speedup[{label}]",
            "verdict": "refuted" if refuted else "confirmed",
            "claimed": {"speedup": c, "speedup_ci95": [c * 0.9, c * 1.1]},
            "measured": {"speedup": m, "speedup_ci95": [m * 0.9, m * 1.1]},
            "reason": "intervals do not overlap" if refuted else "intervals overlap",
        })
    verdict = "refuted" if any(c["verdict"] == "refuted" for c in claims) else "confirmed"
    return {
        "target": {"origin": "test.example/log", "index": target_index, "leaf_hash": leaf_hex,
                   "predicate_type": BENCHMARK_V1, "subject_sha256": subject},
        "environment": environment(), "claims": claims, "verdict": verdict,
    }


def signed(name: str, subject: str, predicate_type: str, body: dict[str, Any],
           key: Ed25519PrivateKey | None = None) -> bytes:
    """Canonical bytes of a signed log entry."""
    pred = parse_predicate(predicate_type, body)
    entry = make_entry(make_statement(name, subject, pred), [key or generate_private_key()])
    return encode_entry(entry)


TYPES = {"kernel": KERNEL_V1, "benchmark": BENCHMARK_V1, "verification": VERIFICATION_V1,
         "reproduction": REPRODUCTION_V1}


def test_helpers_make_entries_that_verify() -> None:
    subject = digest_of("k")
    for kind, body in (("kernel", kernel_body(hostile=True)),
                       ("benchmark", benchmark_body([2.0], hostile=True)),
                       ("verification", verification_body(hostile=True))):
        data = signed(NAME, subject, TYPES[kind], body)
        verified = verify_entry(decode_entry(data))
        assert verified.statement.predicate_type == TYPES[kind]
