"""What both proof rows share: their names, limits, tools and settings, and how a row is built.

The rows of `ktl check --budget full`: `proof.memory` and `proof.overflow`.

Each row first runs its self-test (a planted bug of the same op, through the same harness
generator, tool and flags) and trusts the tool on the kernel only if the planted bug was
caught; then it runs the tool on the kernel in the compiler's sandbox under the CPU limit.
Outcomes: `pass` only on a proof (ESBMC) or no alarm (EVA) after a caught self-test; `fail` on
a counterexample; `warn` on an EVA alarm; `inconclusive` on a timeout, a loop not fully
unwound or a construct the tool cannot handle; `error` when the self-test missed; `skip` where
the tool is missing (with why), on `--budget quick`, and for runtimes other than `c`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from attest.predicates import (
    Check,
    CheckInputs,
    CheckOutcome,
    Fault,
    ProofRecord,
    ProofResult,
    SelfTest,
)
from verifier.kernel import KernelSpec
from verifier.ops import OpSpec
from verifier.proofs._esbmc import Finding
from verifier.proofs._harness import PROOF_BOUNDS, reserved_names, strip_pragmas
from verifier.proofs._tools import Tool, esbmc, frama_c

__all__ = ["CPU_LIMIT_S", "HARNESS", "MEMORY_ROW", "OVERFLOW_ROW", "PLANTED", "SELF_TEST_CPU_S",
           "ProofSettings", "Tools", "bound_text", "make_record", "make_row", "not_for_runtime",
           "quick_rows", "shape_text", "stage_sources"]

MEMORY_ROW = "proof.memory"
OVERFLOW_ROW = "proof.overflow"
CPU_LIMIT_S = 120
"""CPU seconds a proof may spend on one kernel (the self-test has its own, smaller, share)."""
SELF_TEST_CPU_S = 60
HARNESS = "ktl_harness.c"
PLANTED = "ktl_planted.c"
MAX_DETAIL = 1500


@dataclass(frozen=True)
class Tools:
    """The tools to use, or why each is missing (tests pass their own)."""

    esbmc: Tool | str
    frama_c: Tool | str

    @classmethod
    def here(cls) -> Tools:
        return cls(esbmc(), frama_c())


@dataclass(frozen=True)
class ProofSettings:
    """How hard to try: the CPU limit per kernel, and the bounds (None: the op's defaults)."""

    cpu_s: int = CPU_LIMIT_S
    bounds: Mapping[str, int] | None = None

    def bounds_of(self, op: OpSpec) -> dict[str, int]:
        chosen = self.bounds if self.bounds is not None else PROOF_BOUNDS[op.name]
        return {d: int(chosen[d]) for d in op.dims}


def make_row(name: str, outcome: CheckOutcome, detail: str, shapes: list[dict[str, int]],
         proof: ProofRecord | None = None, fault: Fault | None = None) -> Check:
    clean = "".join(ch if ch.isprintable() else " " for ch in detail)[:MAX_DETAIL]
    return Check(name=name, outcome=outcome, detail=clean,
                 inputs=CheckInputs(shapes=tuple(shapes) if shapes else None),
                 metrics={} if proof is None else {"cpu_s": round(proof.cpu_s, 3)},
                 fault=fault, proof=proof)


def make_record(tool: Tool, bounds: Mapping[str, int], result: ProofResult, self_test: SelfTest,
                cpu_s: float, where: Finding | str | None = None) -> ProofRecord:
    """The typed record of a row; `where` is ESBMC's finding (its shape and place) or an
    alarm's `file:line`."""
    location = where if isinstance(where, str) else None
    shape: dict[str, int] | None = None
    if isinstance(where, Finding):
        shape = dict(where.shape) if where.shape else None
        if where.file is not None and where.line is not None:
            location = f"{where.file}:{where.line}"
    return ProofRecord(tool=tool.name, tool_version=tool.version, tool_sha256=tool.sha256,
                       package=tool.package, bounds=dict(bounds), result=result,
                       self_test=self_test, counterexample=shape, location=location,
                       cpu_s=max(0.0, cpu_s))


def quick_rows() -> list[Check]:
    why = ("run with --budget full (a bounded model check and an abstract interpretation of "
           "the source, up to 2 minutes of CPU each)")
    return [make_row(MEMORY_ROW, "skip", why, []), make_row(OVERFLOW_ROW, "skip", why, [])]


def not_for_runtime(runtime: str) -> list[Check]:
    """The rows of a runtime the proofs do not cover, saying so (never silence)."""
    why = (f"no proof row for this runtime ({runtime}): the proofs cover C sources of runtime "
           "'c' only (no bounds or race checker for C++/CUDA/Triton installs here)")
    return [make_row(MEMORY_ROW, "skip", why, []), make_row(OVERFLOW_ROW, "skip", why, [])]


def stage_sources(spec: KernelSpec, where: Path, strip: bool) -> tuple[list[str], list[str]]:
    """The kernel's sources under `where` (pragmas blanked if `strip`): (C files, reserved
    names they declare or define)."""
    where.mkdir(parents=True, exist_ok=True)
    files, reserved = [], []
    for rel, data in spec.read_sources().items():
        text = data.decode("utf-8", errors="replace")
        dest = where / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(strip_pragmas(text) if strip else text, encoding="utf-8")
        if rel.endswith(".c"):
            files.append(rel)
        reserved += reserved_names(text)
    return files, sorted(set(reserved))


def shape_text(shape: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in shape.items())


def bound_text(bounds: Mapping[str, int]) -> str:
    return ", ".join(f"{d} <= {b}" for d, b in bounds.items())
