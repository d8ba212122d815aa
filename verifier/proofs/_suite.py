"""The one module on top: which proof rows a kernel gets, and with which tool."""

from __future__ import annotations

from pathlib import Path

from attest.predicates import Check
from verifier.kernel import KernelSpec
from verifier.ops import OPS
from verifier.progress import Progress, quiet
from verifier.proofs._memory import memory_row
from verifier.proofs._overflow import overflow_row
from verifier.proofs._rows import (
    MEMORY_ROW,
    OVERFLOW_ROW,
    ProofSettings,
    Tools,
    make_row,
    not_for_runtime,
    quick_rows,
)

__all__ = ["proof_rows"]


def proof_rows(spec: KernelSpec, full: bool, workdir: Path, progress: Progress | None = None,
               settings: ProofSettings | None = None, tools: Tools | None = None) -> list[Check]:
    """`proof.memory` and `proof.overflow` for `spec`, working under `workdir`: skipped on
    the quick budget, for other runtimes than `c` and where a tool is missing (saying why)."""
    progress = progress or quiet
    if spec.runtime != "c":
        return not_for_runtime(spec.runtime)
    if not full:
        return quick_rows()
    settings = settings or ProofSettings()
    tools = tools or Tools.here()
    op = OPS[spec.op]
    rows = []
    if isinstance(tools.esbmc, str):
        rows.append(make_row(MEMORY_ROW, "skip", f"not run: {tools.esbmc}", []))
    else:
        rows.append(memory_row(spec, op, tools.esbmc, settings, workdir, progress))
    if isinstance(tools.frama_c, str):
        rows.append(make_row(OVERFLOW_ROW, "skip", f"not run: {tools.frama_c}", []))
    else:
        rows.append(overflow_row(spec, op, tools.frama_c, settings, workdir, progress))
    return rows
