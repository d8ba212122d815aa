"""Memory layout shared by the parent and the sandboxed worker.

Every buffer of a call lives in one arena with a guard region of `GUARD` bytes
before and after it. Guards hold a NaN bit pattern, so an out-of-bounds write
shows as changed guard bytes and an out-of-bounds read tends to poison results.
The guard and poison words of a run are drawn at random (`Markers.draw`) by the
parent and never reach the child's environment or files: a kernel cannot
recognise the harness by them. `GUARD_WORD` is only the cuda wrapper's
device-side pattern (its damaged bytes are copied over the host guards).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from verifier.ops import Dims, OpSpec

GUARD = 256
ALIGN = 64
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
class Layout:
    total: int
    slots: tuple[Slot, ...]

    def guard_mask(self) -> NDArray[np.bool_]:
        """True for every arena byte that belongs to no buffer."""
        mask = np.ones(self.total, dtype=bool)
        for s in self.slots:
            mask[s.offset:s.offset + s.nbytes] = False
        return mask


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def layout(op: OpSpec, dims: Dims) -> Layout:
    slots: list[Slot] = []
    cursor = GUARD
    operands = [(o, False) for o in op.inputs] + [(o, True) for o in op.outputs]
    for operand, is_out in operands:
        shape = operand.dims_of(dims)
        nbytes = 4 * int(np.prod(shape, dtype=np.int64))
        offset = _align(cursor)
        slots.append(Slot(operand.name, offset, nbytes, shape, is_out))
        cursor = offset + nbytes + GUARD
    return Layout(_align(cursor), tuple(slots))


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
