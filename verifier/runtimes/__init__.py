"""runtimes: how a kernel folder becomes something the sandbox can call.

Holds the `Runtime` protocol and the runtime registry (`_protocol`: runtime `c`
with gcc), the build artifact and the sanitizer driver (`_build`), and runtime
`cuda` (`_cuda`: nvcc, a generated host wrapper), runtimes `torch`/`triton` (`_torch`:
a KernelBench-format folder and its extension build cache; `_sizes`: a problem's
size constants, rewritten and scaled to fit; `_problem`: the sandboxed probe of a problem,
its footprint and scale plan (`_probe_child` is its child's driver, never imported); `_torch_session`: the
reference's and the candidate's processes, fed and read by the parent), and the static
findings on a torch/triton solution's source (`_torch_audit`: `audit_solution`).

May import: the pure model, `sandbox` and `worker`. Nothing above it (checks,
benchmark, reproduce).
"""

from __future__ import annotations

from verifier.runtimes._audit import (
    ALLOWED_GROUPS,
    CUDA_GROUPS,
    Audit,
    AuditError,
    LibraryFinding,
    audit_library,
)
from verifier.runtimes._build import Artifact
from verifier.runtimes._problem import (
    BENCH_ARENA_CALL,
    CHECK_BUDGET,
    ProbeFailed,
    ProblemProbe,
    ProblemTooLarge,
    SessionMemory,
    arena_bytes_for,
    bench_budget,
    check_budget,
    check_ceiling,
    machine_memory,
    matmul_rate,
    probe_known,
    probe_problem,
)
from verifier.runtimes._protocol import (
    BUILD_LIMITS,
    RUNTIME_IMPLS,
    VARIANTS,
    CRuntime,
    Runtime,
    build_failure,
    get_runtime,
    write_driver_cases,
)
from verifier.runtimes._sizes import (
    FLOOR,
    LAST_FLOOR,
    LEAST_FLOOR,
    PAST_BLOCKS,
    DimensionVariant,
    Footprint,
    ScalePlan,
    SizeConstant,
    SizesError,
    dimension_variants,
    rewrite_constants,
    scale_plan,
    size_constants,
)
from verifier.runtimes._torch import (
    TORCH_BUILD_LIMITS,
    TorchBuild,
    TorchKernel,
    build_extensions,
    build_key,
    cache_root,
    torch_unavailable,
    torch_version,
    triton_version,
)
from verifier.runtimes._torch_audit import (
    FAILING_KINDS,
    FINDING_KINDS,
    Finding,
    FindingKind,
    audit_solution,
)
from verifier.runtimes._torch_session import (
    Call,
    CallOutcome,
    ReferenceError_,
    TorchSession,
    scaled_variants,
)

__all__ = [
    "ALLOWED_GROUPS",
    "BENCH_ARENA_CALL",
    "BUILD_LIMITS",
    "CHECK_BUDGET",
    "CUDA_GROUPS",
    "FAILING_KINDS",
    "FINDING_KINDS",
    "FLOOR",
    "LAST_FLOOR",
    "LEAST_FLOOR",
    "PAST_BLOCKS",
    "RUNTIME_IMPLS",
    "TORCH_BUILD_LIMITS",
    "VARIANTS",
    "Artifact",
    "Audit",
    "AuditError",
    "CRuntime",
    "Call",
    "CallOutcome",
    "DimensionVariant",
    "Finding",
    "FindingKind",
    "Footprint",
    "LibraryFinding",
    "ProbeFailed",
    "ProblemProbe",
    "ProblemTooLarge",
    "ReferenceError_",
    "Runtime",
    "ScalePlan",
    "SessionMemory",
    "SizeConstant",
    "SizesError",
    "TorchBuild",
    "TorchKernel",
    "TorchSession",
    "arena_bytes_for",
    "audit_library",
    "audit_solution",
    "bench_budget",
    "build_extensions",
    "build_failure",
    "build_key",
    "cache_root",
    "check_budget",
    "check_ceiling",
    "dimension_variants",
    "get_runtime",
    "machine_memory",
    "matmul_rate",
    "probe_known",
    "probe_problem",
    "rewrite_constants",
    "scale_plan",
    "scaled_variants",
    "size_constants",
    "torch_unavailable",
    "torch_version",
    "triton_version",
    "write_driver_cases",
]
