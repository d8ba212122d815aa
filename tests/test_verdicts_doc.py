"""docs/reproducing.md's "Verdicts" section says what the code does: its exit codes, thresholds and margins are read
from the code here, so the page cannot drift from it."""

from __future__ import annotations

from pathlib import Path

from attest.predicates import VERDICTS
from attest.verdicts import HALFWIDTH_WEAK, MIN_RUNS, PINNED_BUSY_WEAK, STEAL_WEAK
from client.cli.reproduce import _EXIT
from verifier.reproduce._verdict import MARGIN_FOR

PAGE = (Path(__file__).resolve().parent.parent / "docs" / "reproducing.md").read_text(
    encoding="utf-8")
DOC = " ".join(PAGE[PAGE.index("## Verdicts: what the judged party cannot steer"):].split())


def test_the_exit_codes_are_the_commands() -> None:
    assert set(_EXIT) == set(VERDICTS)
    for verdict, code in _EXIT.items():
        row = next(line for line in DOC.split("| **")[1:] if line.startswith(verdict.upper()))
        assert f"| {code} " in row, (verdict, code, row[:300])


def test_the_thresholds_and_margins_are_the_codes() -> None:
    assert f"steal time above {100 * STEAL_WEAK:g} %" in DOC
    assert f"other work above {100 * PINNED_BUSY_WEAK:g} % of its pinned CPU" in DOC
    assert f"wider than +-{100 * HALFWIDTH_WEAK:g} %" in DOC
    assert f"fewer than {MIN_RUNS} independent runs" in DOC
    assert f"| other CPUs kept busy | {100 * MARGIN_FOR['runnable']:g} % |" in DOC
    assert f"| other load on the pinned CPU | {100 * MARGIN_FOR['pinned_cpu_busy']:g} % |" in DOC
