"""The index commitment: one extension line of the log's checkpoint (docs/vindex.md, 5).

A checkpoint of size N that carries ``ktl/vindex/v1 <64 hex>`` commits to the index
over entries [0, N) having that root. The line is covered by the log's signature and
by every witness cosignature, so the root is fixed for N as the checkpoint is.
"""

from __future__ import annotations

import re

from attest import HEX64_PATTERN
from ledger.tlog.checkpoint import Checkpoint
from ledger.vindex._proof import IndexProofError

__all__ = ["COMMITMENT_PREFIX", "commitment_line", "commitment_lines", "committed_root"]

COMMITMENT_PREFIX = "ktl/vindex/v1 "
_LINE = re.compile(rf"ktl/vindex/v1 ({HEX64_PATTERN})")


def commitment_line(root: bytes) -> str:
    """The extension line committing to index root `root` (32 bytes)."""
    if len(root) != 32:
        raise ValueError("an index root is 32 bytes")
    return COMMITMENT_PREFIX + root.hex()


def commitment_lines(checkpoint: Checkpoint) -> tuple[str, ...]:
    """The checkpoint's index commitment lines as written (any ``ktl/vindex/`` extension,
    malformed or not): the one reader of them (issue 42, item 6); `committed_root` parses."""
    return tuple(e for e in checkpoint.extensions if e.startswith("ktl/vindex/"))


def committed_root(checkpoint: Checkpoint) -> bytes | None:
    """The index root `checkpoint` commits to; None if it carries no commitment line.

    IndexProofError for a malformed line or more than one (a checkpoint commits to at
    most one root for its size).
    """
    lines = commitment_lines(checkpoint)
    if not lines:
        return None
    if len(lines) > 1:
        raise IndexProofError(f"checkpoint of size {checkpoint.size} carries "
                              f"{len(lines)} index commitment lines; at most one is allowed")
    match = _LINE.fullmatch(lines[0])
    if match is None:
        raise IndexProofError(f"checkpoint of size {checkpoint.size}: malformed index "
                              f"commitment line {lines[0][:80]!r}")
    return bytes.fromhex(match.group(1))
