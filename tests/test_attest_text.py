"""The one pluralising helper every package's messages use ("1 shape", not "1 shapes")."""

from __future__ import annotations

import re
from pathlib import Path

from attest.text import plural

ROOT = Path(__file__).resolve().parent.parent


def test_plural() -> None:
    assert plural(1, "shape") == "1 shape"
    assert plural(0, "shape") == "0 shapes"
    assert plural(2, "entry", "entries") == "2 entries"
    assert plural(1, "entry", "entries") == "1 entry"


def test_no_message_counts_shapes_without_it() -> None:
    """A count written as `{n} shapes` reads "1 shapes" for one; use plural()."""
    raw = re.compile(r"\{[^{}]*\} shapes\b")
    hits = [f"{p.relative_to(ROOT)}:{i}" for pkg in ("verifier", "client", "ledger")
            for p in sorted((ROOT / pkg).rglob("*.py"))
            for i, line in enumerate(p.read_text().splitlines(), 1) if raw.search(line)]
    assert hits == []
