"""worker: the kernel's process and the baseline's, as the parent sees them.

Holds the native C worker (`_native_worker.c`, built and commanded by `_native`:
memfd arenas, commands and fixed-size answers over pipes, batches timed on the
parent's clock), the arena layout with its random per-run guards and poison
(`_arena`), what a child is doing as /proc shows it (`_proc`, the bottom), the command
channel both kinds of worker share (`_channel`: pipes, the watchdog, the clocks around a
command, the shared arena), the CPU of the kernel's whole process tree (`_account`), the baseline's own
NumPy process (`_baseline`), typed escape records (`_escape`), which two-thread calls
overlapped in time (`_overlap`), and a torch kernel's processes (`_torch`, the parent's
side; `_torch_child`, the driver that runs the candidate's or the reference's module).

May import: the pure model and `sandbox`. Nothing above it (runtimes, checks,
benchmark, reproduce).
"""

from __future__ import annotations

from verifier.worker._account import AccountingKind, busy_ns, charged_ns
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
from verifier.worker._channel import (
    QUIET_THREADS,
    SharedArena,
    WorkerGone,
    WorkerHung,
    WorkerMisanswered,
    WorkerOverMemory,
)
from verifier.worker._escape import UNASKED_ANSWER, Escape
from verifier.worker._native import BaselineWorker, NativeWorker, WorkerSandbox
from verifier.worker._overlap import TIME_WORDS, overlapping_pairs
from verifier.worker._proc import Activity, activity, escaped_work
from verifier.worker._torch import (
    CANDIDATE_GRANTS,
    BadAnswer,
    CallAnswer,
    ChildLoadError,
    KernelRaised,
    TorchChild,
    TorchGrants,
    TorchProgram,
    parse_call_answers,
)
from verifier.worker._torch import DRIVER as TORCH_DRIVER
from verifier.worker._torch import child_env as torch_child_env
from verifier.worker._torch_child import DTYPES as TORCH_WIRE_DTYPES

__all__ = [
    "CANDIDATE_GRANTS",
    "GUARD",
    "GUARD_WORD",
    "PAGE",
    "PROT_READ_WRITE",
    "QUIET_THREADS",
    "TIME_WORDS",
    "TORCH_DRIVER",
    "TORCH_WIRE_DTYPES",
    "UNASKED_ANSWER",
    "Abut",
    "AccountingKind",
    "Activity",
    "BadAnswer",
    "BaselineWorker",
    "CallAnswer",
    "ChildLoadError",
    "Escape",
    "KernelRaised",
    "Layout",
    "Markers",
    "NativeWorker",
    "SharedArena",
    "TorchChild",
    "TorchGrants",
    "TorchProgram",
    "Where",
    "WorkerGone",
    "WorkerHung",
    "WorkerMisanswered",
    "WorkerOverMemory",
    "WorkerSandbox",
    "activity",
    "busy_ns",
    "charged_ns",
    "escaped_work",
    "fill_inputs",
    "guard_pattern",
    "layout",
    "outputs_of",
    "overlapping_pairs",
    "parse_call_answers",
    "poison",
    "torch_child_env",
]
