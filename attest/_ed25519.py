"""Strict Ed25519 public-key encodings: canonical and not of small order.

OpenSSL (through `cryptography`) accepts any 32 bytes as an Ed25519 public key.
A key that is a point of small order (order 1, 2, 4 or 8) makes a signature with
R = identity and S = 0 verify for *every* message, and a non-canonical encoding
lets one key have several spellings (and so several keyids). Both are refused
here, before a key is ever used; see RFC 8032 section 5.1.3 for the encoding.
"""

from __future__ import annotations

from typing import Literal

P = 2**255 - 19

# The y coordinates of the eight points of order dividing 8 (the torsion subgroup):
# the identity (y = 1), the point of order 2 (y = p - 1), the two of order 4 (y = 0)
# and the four of order 8 (two y values, each with both signs of x).
_ORDER8_Y = 0x7A03AC9277FDC74EC6CC392CFA53202A0F67100D760B3CBA4FD84D3D706A17C7
SMALL_ORDER_Y: dict[int, int] = {1: 1, P - 1: 2, 0: 4, _ORDER8_Y: 8, P - _ORDER8_Y: 8}

Problem = Literal["size", "non-canonical", "small-order"]


class WeakKey(ValueError):
    """A public-key encoding refused by `check_public_key`; `problem` says which rule it broke."""

    def __init__(self, problem: Problem, message: str) -> None:
        super().__init__(message)
        self.problem: Problem = problem


def check_public_key(raw: bytes) -> None:
    """Raise `WeakKey` if `raw` is not canonical or is a point of small order.

    Integer comparisons only (a few microseconds). An encoding of no point at all
    (y with no x on the curve) is left to the signature check, which never accepts
    anything under it.
    """
    if len(raw) != 32:
        raise WeakKey("size", f"an Ed25519 public key is 32 bytes, not {len(raw)}")
    n = int.from_bytes(raw, "little")
    y, sign = n & ((1 << 255) - 1), n >> 255
    if y >= P:
        raise WeakKey("non-canonical", "Ed25519 public key is not canonical: its y coordinate "
                      "is not reduced modulo 2^255-19")
    if sign and y in (1, P - 1):
        raise WeakKey("non-canonical", "Ed25519 public key is not canonical: the sign bit is set "
                      "for a point whose x coordinate is 0")
    order = SMALL_ORDER_Y.get(y)
    if order is not None:
        raise WeakKey("small-order", f"Ed25519 public key is a point of small order ({order}); "
                      "a signature under it can be forged for any message")
