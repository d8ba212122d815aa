"""verifier: runs kernels in a sandbox and checks their claims.

Public API (see docs/CONTRACTS.md "verifier"): the op catalogue `OPS`, kernel
folders (`KernelSpec`, `pack_kernel`, `unpack_kernel`), `check`, `bench` (one run;
`BenchSettings` says what it measures and how),
`bench_runs` (a claim: independent runs), `inflation_test` (is a speed-up overstated?),
`environment_fingerprint`, and `verifier.reproduce` for comparing claims.
"""

from __future__ import annotations

from verifier.benchmark import (
    DEFAULT_RUNS,
    PUBLISH_MAX_RUNS,
    BenchReport,
    BenchSettings,
    RunSet,
    bench,
    bench_runs,
)
from verifier.checks import BUDGETS, CheckReport, check
from verifier.environment import environment_fingerprint
from verifier.errors import (
    ArchiveError,
    BuildError,
    KernelSpecError,
    ReproduceError,
    RuntimeUnavailableError,
    SandboxError,
    UnknownOpError,
    VerifierError,
)
from verifier.kernel import (
    FLAG_ALLOWLIST,
    GeneratorInfo,
    KernelSpec,
    pack_kernel,
    read_kernel_archive,
    unpack_kernel,
)
from verifier.ops import OPS, OpSpec
from verifier.runtimes import Runtime, get_runtime
from verifier.stats import InflationTest, StatsError, inflation_test

__all__ = [
    "BUDGETS",
    "DEFAULT_RUNS",
    "FLAG_ALLOWLIST",
    "OPS",
    "PUBLISH_MAX_RUNS",
    "ArchiveError",
    "BenchReport",
    "BenchSettings",
    "BuildError",
    "CheckReport",
    "GeneratorInfo",
    "InflationTest",
    "KernelSpec",
    "KernelSpecError",
    "OpSpec",
    "ReproduceError",
    "RunSet",
    "Runtime",
    "RuntimeUnavailableError",
    "SandboxError",
    "StatsError",
    "UnknownOpError",
    "VerifierError",
    "bench",
    "bench_runs",
    "check",
    "environment_fingerprint",
    "get_runtime",
    "inflation_test",
    "pack_kernel",
    "read_kernel_archive",
    "unpack_kernel",
]
