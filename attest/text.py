"""Small text helpers shared by every package (so each phrase is built in one place)."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, word: str, words: str | None = None) -> str:
    """`1 entry`, `2 entries`: a count with its noun in the right number."""
    return f"{n} {word if n == 1 else (words or word + 's')}"
