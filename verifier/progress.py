"""The one progress callback every long job takes: `progress(line)`, one line for a person.

`check`, `bench`, `bench_runs`, `reproduce_kernel`, every helper they pass it to and the
client's long commands all take it under that name and type; None (or `quiet`) says
nothing. The ledger, which does not import the verifier, names its start-up lines'
callback `progress` too (`Callable[[str], None]`, the same type). A test keeps any other
name out (tests/test_verifier_parameters.py). A progress line is never evidence and never
read back.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Progress", "quiet"]

Progress = Callable[[str], None]


def quiet(_line: str) -> None:
    """A progress callback that says nothing."""
