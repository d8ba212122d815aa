"""worker: the kernel's process and the baseline's, as the parent sees them.

Holds the native C worker (`_native_worker.c`, built and commanded by `_native`:
memfd arenas, commands and fixed-size answers over pipes, batches timed on the
parent's clock), the arena layout with its random per-run guards and poison
(`_arena`), the baseline's own NumPy process (`_baseline`), typed escape records
(`_escape`) and which two-thread calls overlapped in time (`_overlap`).

May import: the pure model and `sandbox`. Nothing above it (runtimes, checks,
benchmark, reproduce).
"""

from __future__ import annotations

from verifier.worker._arena import (
    GUARD,
    GUARD_WORD,
    PAGE,
    PROT_READ_WRITE,
    Abut,
    Layout,
    Markers,
    Where,
    fill_inputs,
    guard_pattern,
    layout,
    outputs_of,
    poison,
)
from verifier.worker._native import (
    QUIET_THREADS,
    UNASKED_ANSWER,
    Activity,
    BaselineWorker,
    Escape,
    NativeWorker,
    SharedArena,
    WorkerGone,
    WorkerHung,
    WorkerMisanswered,
    WorkerOverMemory,
    activity,
    escaped_work,
)
from verifier.worker._overlap import TIME_WORDS

__all__ = [
    "GUARD",
    "GUARD_WORD",
    "PAGE",
    "PROT_READ_WRITE",
    "QUIET_THREADS",
    "TIME_WORDS",
    "UNASKED_ANSWER",
    "Abut",
    "Activity",
    "BaselineWorker",
    "Escape",
    "Layout",
    "Markers",
    "NativeWorker",
    "SharedArena",
    "Where",
    "WorkerGone",
    "WorkerHung",
    "WorkerMisanswered",
    "WorkerOverMemory",
    "activity",
    "escaped_work",
    "fill_inputs",
    "guard_pattern",
    "layout",
    "outputs_of",
    "poison",
]
