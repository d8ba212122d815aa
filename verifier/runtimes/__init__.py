"""runtimes: how a kernel folder becomes something the sandbox can call.

Holds the `Runtime` protocol and the runtime registry (`_protocol`: runtime `c`
with gcc), the build artifact and the sanitizer driver (`_build`), and runtime
`cuda` (`_cuda`: nvcc, a generated host wrapper).

May import: the pure model, `sandbox` and `worker`. Nothing above it (checks,
benchmark, reproduce).
"""

from __future__ import annotations

from verifier.runtimes._build import Artifact
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

__all__ = ["BUILD_LIMITS", "RUNTIME_IMPLS", "VARIANTS", "Artifact", "CRuntime", "Runtime",
           "build_failure", "get_runtime", "write_driver_cases"]
