"""The `index.overflow` check: shapes whose flat indices pass 2^32, without the memory.

Each input is a private zero mapping made inside the worker (MAP_NORESERVE, read-only:
untouched pages read as zero and cost no RAM) whose first and last page are pages of
the shared arena the parent wrote: non-zero values at both ends. The far end is where
an index computed in 32 bits lands elsewhere: a signed one goes negative (a crash), an
unsigned one wraps to the near end (zeros there: a wrong answer), and a kernel that
reads only the near end misses the far end's sum. Outputs are small and live in the
arena, prefilled with this run's poison. End values are small integers, so every
partial sum is an integer below 2^24 and any summation order gives the exact answer:
the outputs are compared exactly. Shapes, with BIG = 2^30 + 1024 (4 BIG bytes = 2^32 +
one 4 KiB page):

- `sum`: R = 5 rows of C = BIG (row 4 starts past flat index 2^32);
- `matmul`: M = 5, N = 1, K = BIG (A's row 4 starts past 2^32) and the transposed case
  M = 1, N = 5 (B's flat index p*N + j passes 2^32).

Where the machine cannot hold their page tables (`room`, from /proc/meminfo) the
shapes past 2^31 only (R or M or N = 3) run instead, and the row says uint32 indexing
was not covered and why; where neither fits the row is skipped with the figures.
Ops without a shape whose outputs stay small are skipped, as is the cuda runtime (its
host wrapper would copy the whole lazy input to the device). The worker runs without
an address-space limit (it maps tens of GiB) but under a resident-memory watchdog.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from attest.predicates import CheckOutcome
from verifier.checks._plan import KernelRun
from verifier.checks._report import shape_text
from verifier.ops import OpSpec
from verifier.progress import Progress
from verifier.sandbox import Limits, base_env
from verifier.worker import (
    GUARD,
    PAGE,
    QUIET_THREADS,
    Markers,
    NativeWorker,
    SharedArena,
    WorkerGone,
    WorkerHung,
    WorkerMisanswered,
    WorkerOverMemory,
    WorkerSandbox,
)

__all__ = ["HUGE_SHAPES", "OVERFLOW_REASON", "Room", "index_overflow", "room", "shapes_to_run"]

BIG = 2**30 + PAGE // 4
"""4 BIG bytes = 2^32 + one page: every input is a whole number of pages."""
PAST_2_32: Mapping[str, tuple[dict[str, int], ...]] = {
    "sum": ({"R": 5, "C": BIG},),
    "matmul": ({"M": 5, "N": 1, "K": BIG}, {"M": 1, "N": 5, "K": BIG}),
}
PAST_2_31: Mapping[str, tuple[dict[str, int], ...]] = {
    "sum": ({"R": 3, "C": BIG},),
    "matmul": ({"M": 3, "N": 1, "K": BIG}, {"M": 1, "N": 3, "K": BIG}),
}
HUGE_SHAPES = PAST_2_32
OVERFLOW_REASON = "32-bit index overflow at flat indices past 2^31 / 2^32"
RSS_CAP = 1024 * 2**20
CALL_TIMEOUT_S = 150.0
"""Per huge shape: 2^32+ multiply-adds through page tables of 16-24 GiB, on a loaded machine."""
PAGE_TABLE_SHARE = 8
"""The page tables of the lazy inputs may take at most 1/8 of the memory available."""
PAGE_TABLE_CAP = 512 * 2**20
Outcome = tuple[CheckOutcome, str, dict[str, float]]
"""(outcome, detail, metrics) of the row."""
F32 = NDArray[np.float32]


@dataclass(frozen=True)
class Room:
    """What the lazy inputs may cost here: page-table bytes allowed, and why that many."""

    page_table_bytes: int
    why: str

    def needed(self, op: OpSpec, dims: Mapping[str, int]) -> int:
        """Worst-case page-table bytes of `dims`' inputs (every 4 KiB page mapped, 8 bytes each)."""
        return sum(_nbytes(o.dims_of(dims)) for o in op.inputs) // PAGE * 8

    def fits(self, op: OpSpec, shapes: Sequence[Mapping[str, int]]) -> bool:
        return bool(shapes) and all(self.needed(op, s) <= self.page_table_bytes for s in shapes)


def room(meminfo: str | None = None) -> Room:
    """The page-table budget of this machine, from /proc/meminfo (or the text given)."""
    if meminfo is None:
        try:
            meminfo = Path("/proc/meminfo").read_text()
        except OSError:
            meminfo = ""
    available = next((int(line.split()[1]) * 1024 for line in meminfo.splitlines()
                      if line.startswith("MemAvailable:") and len(line.split()) >= 2
                      and line.split()[1].isdigit()), 0)
    allowed = min(PAGE_TABLE_CAP, available // PAGE_TABLE_SHARE)
    return Room(allowed, f"{available / 2**30:.1f} GiB available; page tables of the lazy "
                f"inputs may take 1/{PAGE_TABLE_SHARE} of that, at most "
                f"{PAGE_TABLE_CAP // 2**20} MiB ({allowed / 2**20:.0f} MiB here)")


def shapes_to_run(op: OpSpec, here: Room) -> tuple[tuple[dict[str, int], ...], str]:
    """The shapes this machine can hold, and what was left out (empty: nothing)."""
    far, near = PAST_2_32.get(op.name, ()), PAST_2_31.get(op.name, ())
    if not far:
        return (), f"no shape of op {op.name} passes 2^32 elements with small outputs"
    if here.fits(op, far):
        return far, ""
    need = max(here.needed(op, s) for s in far) / 2**20
    if here.fits(op, near):
        return near, (f"flat indices past 2^32 (unsigned 32-bit indexing) not run: their page "
                      f"tables need {need:.0f} MiB; {here.why}")
    return (), (f"not run: even the shapes past 2^31 need "
                f"{max(here.needed(op, s) for s in near) / 2**20:.0f} MiB of page tables; "
                f"{here.why}")


def _nbytes(shape: tuple[int, ...]) -> int:
    return 4 * int(np.prod(shape, dtype=np.int64))


def _ends(rng: np.random.Generator) -> tuple[F32, F32]:
    """The first and last page's floats of an input: small non-zero integers, negative at
    the far end (so reading the near end instead cannot give its answer)."""
    per = PAGE // 4
    return (rng.integers(1, 4, size=per).astype(np.float32),
            (-rng.integers(1, 4, size=per)).astype(np.float32))


def _entries(n: int, head: F32, tail: F32) -> list[tuple[int, float]]:
    """(flat index, value) of every non-zero element of an input of `n` floats."""
    return ([(i, float(v)) for i, v in enumerate(head)]
            + [(n - tail.size + i, float(v)) for i, v in enumerate(tail)])


def expected(op: OpSpec, dims: Mapping[str, int], ends: Sequence[tuple[F32, F32]]) -> list[F32]:
    """The exact outputs for inputs that are zero but at their ends (sum and matmul)."""
    sizes = [int(np.prod(o.dims_of(dims), dtype=np.int64)) for o in op.inputs]
    if op.name == "sum":
        y = np.zeros(dims["R"], dtype=np.float64)
        for flat, v in _entries(sizes[0], *ends[0]):
            y[flat // dims["C"]] += v
        return [y.astype(np.float32)]
    m, n, k = dims["M"], dims["N"], dims["K"]
    by_p: dict[int, list[tuple[int, float]]] = {}
    for flat, v in _entries(sizes[1], *ends[1]):
        by_p.setdefault(flat // n, []).append((flat % n, v))
    c = np.zeros((m, n), dtype=np.float64)
    for flat, a in _entries(sizes[0], *ends[0]):
        for j, b in by_p.get(flat % k, ()):
            c[flat // k, j] += a * b
    return [c.astype(np.float32)]


def _run_one(worker: NativeWorker, op: OpSpec, dims: dict[str, int], arena: SharedArena,
             markers: Markers, rng: np.random.Generator) -> str | None:
    """None if the outputs are exactly right, else what went wrong."""
    lazy = [_nbytes(o.dims_of(dims)) for o in op.inputs]
    ends = [_ends(rng) for _ in lazy]
    slots: list[int] = []
    arena.bytes[:] = 0
    for i, (head, tail) in enumerate(ends):
        at = 2 * PAGE * i
        arena.bytes[at:at + PAGE].view(np.float32)[:] = head
        arena.bytes[at + PAGE:at + 2 * PAGE].view(np.float32)[:] = tail
        slots.append(at)
    cursor = 2 * PAGE * len(ends) + GUARD
    for o in op.outputs:
        slots.append(cursor)
        n = int(np.prod(o.dims_of(dims), dtype=np.int64))
        arena.bytes[cursor:cursor + 4 * n].view(np.uint32)[:] = markers.poison
        cursor += 4 * n + GUARD
    worker.call([0], slots, list(dims.values()), CALL_TIMEOUT_S,
                lazy=[*lazy, *[0] * len(op.outputs)])
    for o, at, want in zip(op.outputs, slots[len(op.inputs):], expected(op, dims, ends),
                           strict=True):
        out = arena.bytes[at:at + want.nbytes].view(np.float32)
        if np.any(out.view(np.uint32) == markers.poison):
            return f"left outputs of {o.name} unwritten"
        wrong = np.nonzero(out.view(np.uint32) != want.reshape(-1).view(np.uint32))[0]
        if wrong.size:
            first = int(wrong[0])
            return (f"answered {o.name}[{first}] = {float(out[first])!r}, expected "
                    f"{float(want.reshape(-1)[first])!r} (inputs zero but at their first and "
                    "last page: an index that wrapped or a far end never read)")
    return None


def index_overflow(run: KernelRun, progress: Progress, rng: np.random.Generator | None = None,
                   here: Room | None = None) -> Outcome:
    """Run every huge shape of the run's op this machine can hold; the row's (outcome, detail,
    metrics)."""
    op = run.op
    if op.name not in PAST_2_32:
        return "skip", f"no shape of op {op.name} passes 2^32 elements with small outputs", {}
    if run.gpu:
        return "skip", "not run on a GPU runtime (its wrapper copies inputs to the device)", {}
    here = here or room()
    shapes, left_out = shapes_to_run(op, here)
    figures = {"page_table_bytes_allowed": float(here.page_table_bytes)}
    if not shapes:
        return "skip", left_out, figures
    rng = rng or np.random.default_rng(secrets.randbits(63))
    start = time.monotonic()
    arena = SharedArena(64 * 1024)
    limits = Limits(cpu_s=int(CALL_TIMEOUT_S * 4 * len(shapes)), wall_s=CALL_TIMEOUT_S * 2 * len(shapes),
                    address_space=None, step_wall_s=None)
    folder = run.workdir / "overflow"
    folder.mkdir()
    worker = NativeWorker(run.library, run.entry, op, arena,
                          WorkerSandbox(folder, limits, base_env(QUIET_THREADS),
                                        readable=list(run.readable), rss_cap=RSS_CAP))
    try:
        for dims in shapes:
            progress(f"index overflow: shape {shape_text(dims)} (inputs mapped lazily)")
            wrong = _run_one(worker, op, dims, arena, run.markers, rng)
            if wrong:
                return "fail", f"{OVERFLOW_REASON}: {wrong} on shape {shape_text(dims)}", figures
    except (WorkerGone, WorkerHung, WorkerOverMemory, WorkerMisanswered) as exc:
        result = worker.close()
        why = str(exc)
        if isinstance(exc, WorkerGone) and result is not None:
            why = result.describe(limits)
        return "fail", f"{OVERFLOW_REASON}: {why} on shape {shape_text(dims)}", figures
    finally:
        worker.close()
        arena.close()
    seconds = time.monotonic() - start
    past = "2^31" if left_out else "2^32"
    return ("pass", f"exact outputs on {len(shapes)} shape(s) whose flat indices pass {past} "
            f"({', '.join(shape_text(s) for s in shapes)}), inputs zero but at their first and "
            f"last page, in {seconds:.1f} s" + (f"; {left_out}" if left_out else ""),
            {**figures, "seconds": seconds, "past_2_32": 0.0 if left_out else 1.0})
