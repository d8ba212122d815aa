"""The one progress callback every long job takes: `progress(line)`, one line for a person.

`check`, `bench`, `bench_runs`, `reproduce_kernel` and the client's long commands all take
it under that name; None (or `quiet`) says nothing. A progress line is never evidence and
never read back.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Progress", "quiet"]

Progress = Callable[[str], None]


def quiet(_line: str) -> None:
    """A progress callback that says nothing."""
