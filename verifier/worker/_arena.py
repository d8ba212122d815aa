"""Memory layout shared by the parent and the sandboxed worker.

Every buffer of a call lives in one arena with a guard region of `GUARD` bytes
before and after it. Guards hold a NaN bit pattern, so an out-of-bounds write
shows as changed guard bytes and an out-of-bounds read tends to poison results.

A paged layout (`layout(..., abut="end")` or `"start"`) also puts a guard page between
buffers, which the worker maps `PROT_NONE` in the kernel's process, and maps every page
of an input `PROT_READ` (`Layout.protections`): a read past a buffer (whatever the
build: a sanitizer switch cannot hide it) and a write to an input are a SIGSEGV at an
address the parent places (`Layout.locate`). Buffers end where the op's size ends, so
one layout cannot abut a guard page on both sides: with `"end"` every buffer's end
touches the guard page after it (reads past the end), with `"start"` every buffer's
start touches the one before it (reads before the start); `check` runs both.
The guard and poison words of a run are drawn at random (`Markers.draw`) by the
parent and never reach the child's environment or files: a kernel cannot
recognise the harness by them. `GUARD_WORD` is only the cuda wrapper's
device-side pattern (its damaged bytes are copied over the host guards).
"""

from __future__ import annotations

import mmap
import secrets
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from verifier.ops import Dims, OpSpec

GUARD = 256
ALIGN = 64
PAGE = mmap.PAGESIZE
PROT_NONE, PROT_READ, PROT_READ_WRITE = 0, 1, 3
"""The protections the worker's OP_PROTECT command takes, per range of pages."""
Abut = Literal["end", "start"]
GUARD_WORD = 0x7FA5A5A5
"""A quiet-NaN bit pattern written over every guard byte."""
POISON_WORD = 0x7FC0DEAD
"""A quiet-NaN bit pattern written over every output before a call."""


def _random_nan() -> int:
    """A quiet NaN with random sign and payload (never the published 0x7FC0DEAD)."""
    while True:
        word = 0x7FC00000 | secrets.randbits(22) | (secrets.randbits(1) << 31)
        if word & 0x7FFFFFFF not in (POISON_WORD, GUARD_WORD, 0x7FC00000):
            return word


@dataclass(frozen=True)
class Markers:
    """This run's guard and poison words (random NaN patterns, distinct)."""

    guard: int
    poison: int

    @classmethod
    def draw(cls) -> Markers:
        guard = _random_nan()
        poison = _random_nan()
        while poison == guard:
            poison = _random_nan()
        return cls(guard, poison)


@dataclass(frozen=True)
class Slot:
    """One buffer in the arena: where it starts, its byte length and its shape."""

    name: str
    offset: int
    nbytes: int
    shape: tuple[int, ...]
    is_output: bool


@dataclass(frozen=True)
class GuardPage:
    """A page the worker maps PROT_NONE: next to `slot` (an index into the slots), on its
    `side` ("after": the page following the buffer, "before": the page preceding it)."""

    offset: int
    slot: int
    side: Literal["before", "after"]


@dataclass(frozen=True)
class Where:
    """Where an arena offset lies: `region` "guard" (a guard page next to `slot`, on `side`)
    or "input" (a page of input `slot`: inside the buffer, or its canary "before"/"after")."""

    region: Literal["guard", "input"]
    slot: Slot
    side: Literal["before", "after", "inside"]


@dataclass(frozen=True)
class Layout:
    total: int
    slots: tuple[Slot, ...]
    guard_pages: tuple[GuardPage, ...] = ()
    abut: Abut | None = None

    def guard_mask(self) -> NDArray[np.bool_]:
        """True for every arena byte that belongs to no buffer."""
        mask = np.ones(self.total, dtype=bool)
        for s in self.slots:
            mask[s.offset:s.offset + s.nbytes] = False
        return mask

    def _input_pages(self, slot: Slot) -> tuple[int, int]:
        first = slot.offset // PAGE * PAGE
        stop = _pages(slot.offset + max(slot.nbytes, 1))
        guards = {g.offset for g in self.guard_pages}
        while first in guards and first < stop:
            first += PAGE
        while stop - PAGE in guards and stop > first:
            stop -= PAGE
        return first, stop

    def protections(self, base: int) -> list[tuple[int, int, int]]:
        """(offset, length, protection) ranges for the arena at byte `base` (a page multiple):
        every guard page PROT_NONE, every page holding an input PROT_READ. Empty for an
        unpaged layout."""
        if self.abut is None:
            return []
        ranges = [(base + g.offset, PAGE, PROT_NONE) for g in self.guard_pages]
        for s in self.slots:
            if not s.is_output:
                first, stop = self._input_pages(s)
                if stop > first:
                    ranges.append((base + first, stop - first, PROT_READ))
        return ranges

    def locate(self, offset: int) -> Where | None:
        """What lies at `offset` into the arena, where a protected page does; else None."""
        for g in self.guard_pages:
            if g.offset <= offset < g.offset + PAGE:
                return Where("guard", self.slots[g.slot], g.side)
        for s in self.slots:
            if s.is_output or self.abut is None:
                continue
            first, stop = self._input_pages(s)
            if first <= offset < stop:
                side: Literal["before", "after", "inside"] = (
                    "before" if offset < s.offset else
                    "after" if offset >= s.offset + s.nbytes else "inside")
                return Where("input", s, side)
        return None


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _pages(n: int) -> int:
    return -(-n // PAGE) * PAGE


def layout(op: OpSpec, dims: Dims, abut: Abut | None = None) -> Layout:
    """The arena of one call: inputs then outputs, each with `GUARD` canary bytes around it.

    With `abut`, each buffer also gets a guard page: right after its last byte ("end") or
    right before its first ("start"); the total is then a page multiple."""
    slots: list[Slot] = []
    guards: list[GuardPage] = []
    cursor = GUARD if abut is None else 0
    operands = [(o, False) for o in op.inputs] + [(o, True) for o in op.outputs]
    for i, (operand, is_out) in enumerate(operands):
        shape = operand.dims_of(dims)
        nbytes = 4 * int(np.prod(shape, dtype=np.int64))
        if abut is None:
            offset = _align(cursor)
            cursor = offset + nbytes + GUARD
        elif abut == "end":
            offset = cursor + _pages(GUARD + nbytes) - nbytes
            guards.append(GuardPage(offset + nbytes, i, "after"))
            cursor = offset + nbytes + PAGE
        else:
            guards.append(GuardPage(cursor, i, "before"))
            offset = cursor + PAGE
            cursor = offset + _pages(nbytes + GUARD)
        slots.append(Slot(operand.name, offset, nbytes, shape, is_out))
    total = _align(cursor) if abut is None else cursor
    return Layout(total, tuple(slots), tuple(guards), abut)


def guard_pattern(total: int, word: int = GUARD_WORD) -> NDArray[np.uint8]:
    words = np.full((total + 3) // 4, word, dtype=np.uint32)
    return words.view(np.uint8)[:total]


def new_arena(lay: Layout) -> NDArray[np.uint8]:
    """A 64-byte aligned arena filled with the guard pattern."""
    raw = np.empty(lay.total + ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    arena = raw[start:start + lay.total]
    arena[:] = guard_pattern(lay.total)
    return arena


def view(arena: NDArray[np.uint8], slot: Slot) -> NDArray[np.float32]:
    return arena[slot.offset:slot.offset + slot.nbytes].view(np.float32).reshape(slot.shape)


def poison(arena: NDArray[np.uint8], lay: Layout, word: int = POISON_WORD) -> None:
    for s in lay.slots:
        if s.is_output:
            arena[s.offset:s.offset + s.nbytes].view(np.uint32)[:] = word


def fill_inputs(arena: NDArray[np.uint8], lay: Layout, arrays: list[NDArray[np.float32]]) -> None:
    """Copy `arrays` into the input slots of `arena` (laid out as `lay`)."""
    for slot, arr in zip((s for s in lay.slots if not s.is_output), arrays, strict=True):
        view(arena, slot)[...] = arr


def outputs_of(arena: NDArray[np.uint8], lay: Layout) -> list[NDArray[np.float32]]:
    """Copies of the output slots of `arena`, taken now."""
    return [view(arena, s).copy() for s in lay.slots if s.is_output]
