"""reproduce: claimed predicates compared with fresh runs, into a `reproduction/v1` body.

Holds the comparison of claims (`_claims`: verification and benchmark bodies against
a fresh `check` and `bench_runs`, the overall verdict) and one shape's verdict from
typed values with the decision policy and the environment diff (`_verdict`).

May import: everything below it (the pure model, `sandbox`, `worker`, `runtimes`,
`checks`, `benchmark`). Nothing in `verifier` imports it but the package top.
"""

from __future__ import annotations

from verifier.reproduce._claims import (
    BENCHMARK_V1,
    DEFAULT_POLICY,
    VERIFICATION_V1,
    Claimed,
    Fresh,
    ReproduceSettings,
    claimed_threads,
    compare,
    compare_benchmark,
    compare_verification,
    fresh_seed,
    make_policy,
    not_rerun,
    overall_verdict,
    reproduce_kernel,
    unknown_op_reason,
)

__all__ = ["BENCHMARK_V1", "DEFAULT_POLICY", "VERIFICATION_V1", "Claimed", "Fresh",
           "ReproduceSettings", "claimed_threads", "compare", "compare_benchmark", "compare_verification",
           "fresh_seed", "make_policy", "not_rerun", "overall_verdict", "reproduce_kernel",
           "unknown_op_reason"]
