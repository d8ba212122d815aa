"""verifier: runs kernels in a sandbox and checks their claims.

Public API (see docs/CONTRACTS.md "verifier"): the op catalogue `OPS`, kernel
folders (`KernelSpec`, `pack_kernel`, `unpack_kernel`), `check`, `bench`,
`environment_fingerprint`, and `verifier.reproduce` for comparing claims.
"""

from __future__ import annotations

from verifier._errors import (
    ArchiveError,
    BuildError,
    KernelSpecError,
    ReproduceError,
    RuntimeUnavailableError,
    SandboxError,
    VerifierError,
)
from verifier.bench import BenchReport, ShapeResult, bench
from verifier.check import BUDGETS, CheckReport, CheckResult, check
from verifier.environment import environment_fingerprint
from verifier.kernel import FLAG_ALLOWLIST, GeneratorInfo, KernelSpec, pack_kernel, unpack_kernel
from verifier.ops import OPS, OpSpec
from verifier.runtime import Runtime, get_runtime

__all__ = [
    "BUDGETS",
    "FLAG_ALLOWLIST",
    "OPS",
    "ArchiveError",
    "BenchReport",
    "BuildError",
    "CheckReport",
    "CheckResult",
    "GeneratorInfo",
    "KernelSpec",
    "KernelSpecError",
    "OpSpec",
    "ReproduceError",
    "Runtime",
    "RuntimeUnavailableError",
    "SandboxError",
    "ShapeResult",
    "VerifierError",
    "bench",
    "check",
    "environment_fingerprint",
    "get_runtime",
    "pack_kernel",
    "unpack_kernel",
]
