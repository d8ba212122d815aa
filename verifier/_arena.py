"""Memory layout shared by the parent and the sandboxed worker.

Every buffer of a call lives in one arena with a guard region of `GUARD` bytes
before and after it. Guards hold a NaN bit pattern, so an out-of-bounds write
shows as changed guard bytes and an out-of-bounds read tends to poison results.
"""

from __future__ import annotations

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


def guard_pattern(total: int) -> NDArray[np.uint8]:
    words = np.full((total + 3) // 4, GUARD_WORD, dtype=np.uint32)
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


def poison(arena: NDArray[np.uint8], lay: Layout) -> None:
    for s in lay.slots:
        if s.is_output:
            arena[s.offset:s.offset + s.nbytes].view(np.uint32)[:] = POISON_WORD
