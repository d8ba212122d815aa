"""`make demo`: its summary check, the inflated claim, and the real `ktl serve` it drives."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from rich.console import Console
from test_pages_helpers import benchmark_body

from attest import BENCHMARK_V1, parse_predicate
from attest import examples as ex
from demo.run import (
    INFLATE,
    INFLATE_MOST,
    LIE_BENCH_RUNS,
    PUBLISH_RUNS,
    Demo,
    DemoError,
    SummaryRow,
    check_summary,
    example_kernels,
    inflate_benchmark,
    lie_factor,
    lie_target,
    rows_from_reproduction,
    running_log,
    summary_table,
)

REPO = Path(__file__).resolve().parent.parent


def _row(kernel: str, verdict: str, honest: bool = True, claim: str = "s[M=1]") -> SummaryRow:
    return SummaryRow(kernel, "matmul", 1, f"benchmark.speedup[{claim}]", 2.0, 2.1, verdict,
                      honest, 3)


def test_row_round_trip() -> None:
    row = _row("a/b", "confirmed")
    assert SummaryRow.from_json(json.loads(json.dumps(row.to_json()))) == row
    row = SummaryRow("a/b", "op", 1, "s", 1.0, None, "inconclusive", True, 3, spread=0.1,
                     inflation=1.02, tolerance=0.05, noisy=True)
    assert SummaryRow.from_json(json.loads(json.dumps(row.to_json()))) == row
    with pytest.raises(DemoError):
        SummaryRow.from_json({"kernel": "a/b"})


def test_an_inconclusive_honest_claim_is_shown_not_failed() -> None:
    rows = [_row("a/b", "confirmed"), _row("c/d", "inconclusive"),
            _row("a/b", "refuted", honest=False)]
    assert check_summary(rows, ["a/b", "c/d"]) == []


def test_a_machine_that_confirms_no_honest_claim_is_not_a_failure() -> None:
    """The CI run where every honest claim stayed open (runs 11-15 % apart: no claim of 15
    runs is confirmable within 5 % at 99 % there): a timing, which the demo's check must not
    assert on; a refuted honest claim or an unrefuted lie still fails it."""
    rows = [_row("a/b", "inconclusive"), _row("c/d", "inconclusive"),
            _row("a/b", "refuted", honest=False)]
    assert check_summary(rows, ["a/b", "c/d"]) == []
    assert check_summary([*rows[:2], _row("a/b", "inconclusive", honest=False)],
                         ["a/b", "c/d"]) != []
    assert check_summary([_row("a/b", "refuted"), *rows[1:]], ["a/b", "c/d"]) != []


@pytest.mark.parametrize(("spread", "confirmable"), [(0.11, False), (0.15, False), (0.03, True)])
def test_runs_11_percent_apart_confirm_no_claim_of_15_runs(spread: float, confirmable: bool
                                                           ) -> None:
    """What docs/demo.md says of DEMO_EXIT: with runs 11-15 % apart no claim of 15 runs can
    be confirmed within 5 % at 99 %, however many runs a reproduction adds; at 3 % it can."""
    from verifier.stats import inflation_test, runs_to_confirm

    def runs(n: int) -> list[float]:  # n speed-ups whose logs have mean 0 and sd `spread`
        zs = [(i - (n - 1) / 2) for i in range(n)]
        sd = math.sqrt(sum(z * z for z in zs) / (n - 1))
        return [math.exp(spread * z / sd) for z in zs]

    test = inflation_test(runs(15), runs(5), look=1)
    assert test.sigma == pytest.approx(spread) and test.inflation == pytest.approx(1.0)
    assert (runs_to_confirm(test, 1.05) is not None) is confirmable


def test_expected_outcome_passes() -> None:
    rows = [_row("a/b", "confirmed"), _row("c/d", "confirmed"),
            _row("a/b", "refuted", honest=False), _row("a/b", "inconclusive", honest=False, claim="x")]
    assert check_summary(rows, ["a/b", "c/d"]) == []


@pytest.mark.parametrize(
    ("rows", "says"),
    [
        ([_row("a/b", "refuted"), _row("a/b", "refuted", honest=False)], "honest claim came out refuted"),
        ([_row("a/b", "confirmed")], "the inflated claim was not reproduced"),
        ([_row("a/b", "confirmed"), _row("a/b", "inconclusive", honest=False)], "was not refuted"),
        ([_row("a/b", "confirmed"), _row("a/b", "refuted", honest=False),
          _row("a/b", "confirmed", honest=False, claim="y")], "inflated claim came out confirmed"),
        ([_row("a/b", "refuted", honest=False)], "a/b: no benchmark claim was reproduced"),
        ([_row("a/b", "maybe"), _row("a/b", "refuted", honest=False)], "unknown verdict"),
    ],
)
def test_unexpected_outcomes_are_named(rows: list[SummaryRow], says: str) -> None:
    problems = check_summary(rows, ["a/b"])
    assert any(says in p for p in problems), problems


def test_inflated_benchmark_is_still_a_valid_predicate() -> None:
    body = benchmark_body([1.5, 0.5])
    lie = inflate_benchmark(body)
    assert INFLATE == 1.25  # the "20 % throughput increase", a little worse; not 3x
    parse_predicate(BENCHMARK_V1, lie)  # a lie that validates: only reproduction catches it
    for before, after in zip(body["results"], lie["results"], strict=True):
        assert after["speedup"] == pytest.approx(1.25 * before["speedup"])
        assert after["speedup_ci95"] == pytest.approx([1.25 * x for x in before["speedup_ci95"]])
        assert after["baseline_median_ns"] == pytest.approx(1.25 * before["baseline_median_ns"])
    assert body["results"][0]["speedup"] == 1.5  # the original is untouched
    with pytest.raises(DemoError):
        inflate_benchmark({"results": []})


def test_inflation_covers_every_run_consistently() -> None:
    body = ex.benchmark_runs((1.0, 1.1, 0.9))
    lie = inflate_benchmark(body)
    parse_predicate(BENCHMARK_V1, lie)
    for before, after in zip(body["results"][0]["runs"], lie["results"][0]["runs"], strict=True):
        assert after["speedup"] == pytest.approx(1.25 * before["speedup"])
        assert after["speedup_ci95"] == pytest.approx([1.25 * x for x in before["speedup_ci95"]])
        assert after["baseline_median_ns"] == pytest.approx(1.25 * before["baseline_median_ns"])
        assert after["median_ns"] == before["median_ns"]


def test_the_lie_is_planted_where_the_honest_claim_reproduced() -> None:
    rows = [_row("a/b", "inconclusive"), _row("c/d", "confirmed"), _row("c/d", "confirmed", claim="y"),
            _row("e/f", "confirmed")]
    assert lie_target(["a/b", "c/d", "e/f"], rows) == 1
    assert lie_target(["a/b"], rows) == 0
    # none confirmed: the one judged at all, not the first
    assert lie_target(["x/y", "a/b"], rows) == 1
    assert lie_target(["x/y", "z/z"], rows) == 0


def test_the_lie_goes_to_the_claim_that_reproduced_most_exactly() -> None:
    """The failure seen in CI: attention's honest 0.15x reproduced at 0.17x, so its x1.25 lie
    was only 11 % above the truth and came out inconclusive; matmul's 0.34x reproduced at 0.34x."""
    def row(kernel: str, claimed: float, reproduced: float | None, verdict: str = "confirmed",
            claim: str = "s[M=1]") -> SummaryRow:
        return SummaryRow(kernel, "op", 1, f"benchmark.speedup[{claim}]", claimed, reproduced,
                          verdict, True, 3)
    names = ["attention", "matmul", "softmax", "sum"]
    rows = [row("attention", 0.15, 0.17), row("matmul", 0.34, 0.345),
            row("softmax", 0.33, 0.30, "refuted"), row("sum", 0.57, 0.571),
            row("sum", 0.57, 0.70, claim="t")]
    assert lie_target(names, rows) == 1
    # A claim with no reproduced figure is never the closest.
    assert lie_target(["attention", "x"], [row("attention", 0.15, 0.17), row("x", 1.0, None)]) == 0
    # A claimed speed-up overstated by the publisher counts as far as one understated.
    assert lie_target(["a", "b"], [row("a", 1.0, 0.8), row("b", 1.0, 1.2)]) == 1


def test_the_lie_goes_where_one_sitting_judges_most_surely() -> None:
    """The CI run where torch-rmsnorm's honest 1.56x reproduced at exactly 1.56x but with
    a wide interval (few, long runs): its x1.25 lie was left undecided by a first sitting.
    A kernel a little further from its claim but measured tightly is the surer target."""
    def row(kernel: str, claimed: float, reproduced: float, spread: float | None
            ) -> SummaryRow:
        return SummaryRow(kernel, "op", 1, "benchmark.speedup[s]", claimed, reproduced,
                          "confirmed", True, 3, spread=spread)
    names = ["torch-rmsnorm", "attention", "sum"]
    rows = [row("torch-rmsnorm", 1.56, 1.56, 0.12), row("attention", 0.18, 0.181, 0.03),
            row("sum", 1.46, 1.42, 0.03)]
    assert lie_target(names, rows) == 1
    # the drift still counts: far from its claim, a tight interval does not win
    assert lie_target(["a", "b"], [row("a", 1.0, 1.0, 0.05), row("b", 1.0, 1.2, 0.01)]) == 0
    # the worst claim of a kernel decides for it
    assert lie_target(["a", "b"], [row("a", 1.0, 1.0, 0.02), row("a", 1.0, 1.0, 0.2),
                                   row("b", 1.0, 1.0, 0.1)]) == 1


def _judged_row(kernel: str, verdict: str, inflation: float | None, spread: float | None,
                tolerance: float | None = 0.05) -> SummaryRow:
    return SummaryRow(kernel, "op", 1, "benchmark.speedup[s]", 1.0, None, verdict, True, 3,
                      spread=spread, inflation=inflation, tolerance=tolerance)


def test_the_lie_is_as_large_as_this_machine_needs_to_judge_it() -> None:
    """The CI run whose runs were 11 % apart: a x1.25 lie read 17 % over (drift), its
    interval [-16 %, +64 %]: no count of runs could refute it. Where the honest reproduction
    judged closely the lie is x1.25; where loosely, the tolerance plus LIE_MARGIN x (drift +
    half-width), never over INFLATE_MOST; unknown (no estimate, interval or tolerance):
    INFLATE_MOST."""
    tight = [_judged_row("k", "confirmed", 1.01, 0.04)]
    assert lie_factor(tight, "k") == INFLATE
    loose = [_judged_row("k", "inconclusive", 0.98, math.log(1.43 / 0.67) / 2)]
    want = math.exp(math.log(1.05) + 1.5 * (abs(math.log(0.98)) + math.log(1.43 / 0.67) / 2))
    assert lie_factor(loose, "k") == pytest.approx(want)
    assert INFLATE < lie_factor(loose, "k") < INFLATE_MOST
    # the worst of the kernel's claims decides; other kernels and lies do not count
    lie_row = SummaryRow("k", "op", 1, "s", 1.0, None, "refuted", False, 3, spread=2.0,
                         inflation=3.0)
    assert lie_factor([*tight, *loose, lie_row, _judged_row("j", "inconclusive", 1.0, 2.0)],
                      "k") == pytest.approx(want)
    # a wider tolerance needs a larger lie: it must stand beyond it
    assert lie_factor([_judged_row("k", "inconclusive", 1.0, 0.2, 0.2)], "k") > \
        lie_factor([_judged_row("k", "inconclusive", 1.0, 0.2, 0.05)], "k")
    assert lie_factor([_judged_row("k", "inconclusive", 1.0, 5.0)], "k") == INFLATE_MOST
    for unknown in ([], [_judged_row("k", "inconclusive", None, 0.1)],
                    [_judged_row("k", "inconclusive", 1.0, None)],
                    [_judged_row("k", "inconclusive", 1.0, 0.01, None)]):
        assert lie_factor(unknown, "k") == INFLATE_MOST


def test_a_noisy_sitting_is_judged_by_its_estimate() -> None:
    """A measurement too noisy to show a reproduced figure still has the test's estimate:
    the lie's target and size read it (a noisy row is not "unknown")."""
    noisy = _judged_row("a", "inconclusive", 1.02, 0.1)
    assert noisy.reproduced is None
    assert lie_target(["x", "a"], [_judged_row("x", "inconclusive", None, 0.1), noisy]) == 1
    assert lie_target(["a", "b"], [noisy, _judged_row("b", "inconclusive", 1.0, 0.05)]) == 1
    # a confirmed kernel is preferred to a closer one that was not confirmed
    assert lie_target(["a", "b"], [_judged_row("a", "inconclusive", 1.0, 0.01),
                                   _judged_row("b", "confirmed", 1.03, 0.05)]) == 1


@pytest.mark.parametrize(("interval", "spread"), [
    ([1.0, 1.0], 0.0), ([0.9, 1.1], math.log(1.1 / 0.9) / 2), ([1, 2], math.log(2) / 2),
    (None, None), ([1.0], None), ([1.1, 0.9], None), ([0.0, 1.0], None), ([True, 2.0], None),
    (["0.9", "1.1"], None), ([1.0, math.inf], None), ([math.nan, 1.0], None),
])
def test_a_claims_spread_is_read_from_its_interval(interval: object, spread: float | None
                                                   ) -> None:
    claim = {"claim": "benchmark.speedup[M=8]", "verdict": "confirmed",
             "claimed": {"speedup": 1.0}, "measured": {"speedup": 1.0},
             "statistics": {"inflation": 1.0, "inflation_interval": interval}}
    [got] = rows_from_reproduction({"claims": [claim]}, kernel="a/b", op="op", entry=1,
                                   honest=True, reproduction_entry=None)
    assert got.spread == (None if spread is None else pytest.approx(spread))
    assert SummaryRow.from_json(json.loads(json.dumps(got.to_json()))) == got


def test_rows_from_reproduction_reads_speedup_claims_only() -> None:
    predicate = {"claims": [
        {"claim": "benchmark.speedup[M=8]", "verdict": "refuted",
         "claimed": {"speedup": 6.0}, "measured": {"speedup": 2.0}, "reason": "below",
         "statistics": {"inflation": 3.0, "inflation_interval": [2.5, 3.5]}},
        {"claim": "verification.verdict", "verdict": "confirmed",
         "claimed": {"verdict": "pass"}, "measured": {"verdict": "pass"}, "reason": ""},
    ]}
    rows = rows_from_reproduction(predicate, kernel="a/b", op="matmul", entry=4, honest=False,
                                  reproduction_entry=9)
    # the figure is shown as reproduced because the test ran on it (statistics)
    assert rows == [SummaryRow("a/b", "matmul", 4, "benchmark.speedup[M=8]", 6.0, 2.0,
                               "refuted", False, 9, "below", spread=rows[0].spread,
                               inflation=3.0)]
    assert summary_table(rows).row_count == 1


def _speedup_claim(verdict: str, low: float) -> dict[str, object]:
    return {"claim": "benchmark.speedup[M=8]", "verdict": verdict, "claimed": {"speedup": 0.21},
            "measured": {"speedup": 0.16}, "reason": "words the demo does not read",
            "statistics": {"inflation": 1.33, "inflation_interval": [low, 1.53]}}


def test_a_verdict_held_back_by_the_sittings_is_read_from_the_numbers() -> None:
    """Held back: inconclusive although the interval's lower bound is past 1 + tolerance
    (the test refuted; other hardware or conditions stopped the verdict)."""
    def rows(*claims: dict[str, object]) -> list[SummaryRow]:
        return rows_from_reproduction({"policy": {"tolerance": 0.05}, "claims": list(claims)},
                                      kernel="a/b", op="matmul", entry=4, honest=False,
                                      reproduction_entry=None)

    assert [r.held_back for r in rows(_speedup_claim("inconclusive", 1.15))] == [True]
    # the test itself undecided, or decided and given: nothing held back
    assert [r.held_back for r in rows(_speedup_claim("inconclusive", 0.98))] == [False]
    assert [r.held_back for r in rows(_speedup_claim("refuted", 1.15))] == [False]
    assert [r.held_back for r in rows({**_speedup_claim("inconclusive", 1.15),
                                       "statistics": None})] == [False]
    row = rows(_speedup_claim("inconclusive", 1.15))[0]
    assert SummaryRow.from_json(row.to_json()) == row


def _scripted_sittings(tmp_path: Path, sittings: list[list[SummaryRow]]
                       ) -> tuple[Demo, list[int]]:
    """A demo whose reproductions answer `sittings` in turn (the list may be changed
    between calls), and the list its calls are counted in."""
    demo = Demo(tmp_path, Console(file=io.StringIO()))
    calls: list[int] = []

    def sitting(*_args: object, **_kw: object) -> list[SummaryRow]:
        calls.append(1)
        return sittings[len(calls) - 1]

    demo._sitting = sitting  # type: ignore[method-assign]
    return demo, calls


def test_a_held_back_claim_gets_one_more_sitting(tmp_path: Path) -> None:
    """The same rule for every claim: one more sitting when the first held its verdict
    back, never a third (a reproducer who retried until refuted would be fishing)."""
    held = _row("a/b", "inconclusive", honest=False)
    held = SummaryRow(**{**held.__dict__, "held_back": True})
    sittings = [[held], [held], [_row("a/b", "refuted", honest=False)]]
    demo, calls = _scripted_sittings(tmp_path, sittings)
    demo._reproduced({}, {"index": 7}, tmp_path, None, honest=False)  # type: ignore[arg-type]
    assert len(calls) == 2 and demo.rows == [held]
    demo.rows.clear()
    sittings[:2] = [[_row("a/b", "refuted", honest=False)]] * 2
    calls.clear()
    demo._reproduced({}, {"index": 7}, tmp_path, None, honest=False)  # type: ignore[arg-type]
    assert len(calls) == 1 and demo.rows[0].verdict == "refuted"


def test_an_undecided_honest_claim_gets_one_more_sitting_and_no_third(tmp_path: Path) -> None:
    """The fresh clone's failure: an honest claim left open by one sitting whose runs were
    9.6 % apart (not overstated, not held back) is reproduced once more, like any
    inconclusive claim, never a third time; a decided or unsupported one is not."""
    open_row = _row("a/b", "inconclusive")
    assert not open_row.overstated and not open_row.held_back
    sittings = [[open_row], [_row("a/b", "confirmed")], [_row("a/b", "refuted")]]
    demo, calls = _scripted_sittings(tmp_path, sittings)
    demo._reproduced({}, {"index": 5}, tmp_path, None, honest=True)  # type: ignore[arg-type]
    assert len(calls) == 2 and [r.verdict for r in demo.rows] == ["confirmed"]
    for verdict in ("confirmed", "unsupported", "refuted"):
        demo.rows.clear()
        sittings[:] = [[_row("a/b", verdict)], [_row("a/b", "confirmed")]]
        calls.clear()
        demo._reproduced({}, {"index": 5}, tmp_path, None, honest=True)  # type: ignore[arg-type]
        assert len(calls) == 1 and demo.rows[0].verdict == verdict
    demo.rows.clear()
    sittings[:] = [[open_row], [open_row], [_row("a/b", "confirmed")]]
    calls.clear()
    demo._reproduced({}, {"index": 5}, tmp_path, None, honest=True)  # type: ignore[arg-type]
    assert len(calls) == 2 and demo.rows == [open_row]


def test_an_undecided_overstatement_is_read_from_the_estimate() -> None:
    """Overstated: inconclusive with the estimated inflation past 1 + tolerance (the CI
    failure: claimed 1.71x, measured 1.50x, overstated by 14 % [-3 %, +34 %])."""
    def row(verdict: str, inflation: object, low: float = 0.97,
            tolerance: object = 0.05) -> SummaryRow:
        claim = {**_speedup_claim(verdict, low),
                 "statistics": {"inflation": inflation, "inflation_interval": [low, 1.34]}}
        return rows_from_reproduction({"policy": {"tolerance": tolerance}, "claims": [claim]},
                                      kernel="a/b", op="sum", entry=4, honest=False,
                                      reproduction_entry=None)[0]

    assert row("inconclusive", 1.14).overstated and not row("inconclusive", 1.14).held_back
    # within the tolerance, or decided, or numbers that are not numbers: no more sittings
    assert not row("inconclusive", 1.04).overstated
    assert not row("refuted", 1.14).overstated
    assert not row("confirmed", 1.14).overstated
    assert not row("inconclusive", True).overstated
    assert not row("inconclusive", "1.14").overstated
    assert not row("inconclusive", 1.14, tolerance=None).overstated
    # held back (the test decided) is overstated too
    held = row("inconclusive", 1.33, low=1.15)
    assert held.held_back and held.overstated
    assert SummaryRow.from_json(row("inconclusive", 1.14).to_json()) == row("inconclusive", 1.14)


@pytest.mark.parametrize("honest", [True, False])
def test_an_undecided_overstatement_gets_one_more_sitting_never_a_third(
        tmp_path: Path, honest: bool) -> None:
    """Honest or planted alike: one more sitting for a claim left inconclusive beyond the
    tolerance; whatever the second says is the verdict, even inconclusive again."""
    first = SummaryRow(**{**_row("a/b", "inconclusive", honest=honest).__dict__,
                          "inflation": 1.14, "tolerance": 0.05})
    assert first.overstated
    second = _row("a/b", "refuted" if not honest else "confirmed", honest=honest)
    sittings = [[first], [first], [second]]
    demo, calls = _scripted_sittings(tmp_path, sittings)
    demo._reproduced({}, {"index": 7}, tmp_path, None, honest=honest)  # type: ignore[arg-type]
    assert len(calls) == 2 and demo.rows == [first]
    # an inconclusive claim within the tolerance is sat again too (the same rule), once
    demo.rows.clear()
    calls.clear()
    sittings[:] = [[_row("a/b", "inconclusive", honest=honest)], [second]]
    demo._reproduced({}, {"index": 7}, tmp_path, None, honest=honest)  # type: ignore[arg-type]
    assert len(calls) == 2 and demo.rows == [second]


def test_the_lie_is_benchmarked_just_before_it_is_published(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted claim is a fresh `ktl bench` of the kernel x the demo's factor (not the honest claim
    measured minutes earlier, whose drift since can shrink the lie below what the test may
    refute), published beside the honest verification with the dishonest key."""
    honest_dir = tmp_path / "k"
    honest_dir.mkdir()
    (honest_dir / "kernel.toml").write_text("name = 'x'\n")
    fresh = {"results": [{"speedup": 1.5, "speedup_ci95": [1.4, 1.6],
                          "baseline_median_ns": 10.0,
                          "runs": [{"speedup": 1.5, "speedup_ci95": [1.4, 1.6],
                                    "baseline_median_ns": 10.0}]}], "notes": []}
    demo = Demo(tmp_path / "work", Console(file=io.StringIO()))
    demo.kernels.mkdir(parents=True, exist_ok=True)
    demo.factor = 1.6
    ran: list[list[str]] = []
    published: list[tuple[Path, Path, Path | None]] = []

    class FakeKtl:
        def run(self, args: list[str], **_kw: object) -> object:
            ran.append(list(args))
            return fresh

    demo.ktl = FakeKtl()  # type: ignore[assignment]
    demo.services = []
    demo.publish = lambda d, k, s, r=None: published.append((d, k, r)) or {}  # type: ignore[method-assign]
    read: list[Path] = []
    monkeypatch.setattr("demo.run._statement_of",
                        lambda path: read.append(path) or {"predicate": {"verdict": "pass"}})
    demo._publish_inflated({"entries": [{"kind": "verification", "entry_path": "v.json"},
                                        {"kind": "benchmark", "entry_path": "b.json"}]},
                           honest_dir, tmp_path / "cheat.key", None)  # type: ignore[arg-type]
    assert read == [Path("v.json")]  # the honest benchmark is not what the lie inflates
    lie_dir = demo.kernels / "k-inflated"
    # as many runs as an honest claim carries: with the default 5, the lie's own runs
    # bounded the test (a CI sitting could refute it at no count of runs)
    assert ran == [["bench", str(lie_dir), *LIE_BENCH_RUNS]]
    assert LIE_BENCH_RUNS[:2] == ("--runs", str(PUBLISH_RUNS))
    assert (lie_dir / "kernel.toml").is_file()
    (d, key, results), = published
    assert d == lie_dir and key == tmp_path / "cheat.key" and results is not None
    body = json.loads(results.read_text())
    assert body["verification"] == {"verdict": "pass"}
    assert body["benchmark"]["results"][0]["speedup"] == pytest.approx(1.5 * 1.6)
    assert body["benchmark"]["results"][0]["runs"][0]["speedup"] == pytest.approx(1.5 * 1.6)


def test_reproductions_wait_for_the_demos_own_servers_to_go_quiet() -> None:
    """Injected tick readings: busy windows (a log integrating, witnesses cosigning) are
    waited out; a quiet window ends the wait; a limit stops it (the reproduction goes
    ahead and its verdict says if the conditions held it back)."""
    from demo.run import _TICKS, wait_quiet

    busy = int(_TICKS)  # one CPU second per window of 1 s: fully busy
    readings = iter([0, busy, 2 * busy, 2 * busy])
    slept: list[float] = []
    assert wait_quiet(lambda: next(readings), limit_s=10, window_s=1.0,
                      sleep=slept.append)
    assert slept == [1.0, 1.0, 1.0]
    always = iter(range(0, 100 * busy, busy))
    slept.clear()
    assert not wait_quiet(lambda: next(always), limit_s=3, window_s=1.0, sleep=slept.append)
    assert slept == [1.0, 1.0, 1.0]


def test_session_ticks_counts_a_spinning_process_of_the_session() -> None:
    """A real process in a session of its own: its CPU shows in its session's ticks (a
    reading that only grows; asserted on growth, not on an amount)."""
    from demo.run import session_ticks

    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                            start_new_session=True)
    try:
        first = session_ticks({spin.pid})
        deadline = time.monotonic() + 20
        while session_ticks({spin.pid}) <= first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert session_ticks({spin.pid}) > first
        assert session_ticks({-5}) == 0
    finally:
        spin.kill()
        spin.wait()


def test_the_default_demo_tells_the_story_on_fewer_kernels() -> None:
    """Issue 42 item 5: a C kernel, the load_inline module and a Triton kernel by default;
    `--all` every example; a folder holding none of the default ones: all of it."""
    from demo.run import DEMO_KERNELS, demo_kernels

    chosen = demo_kernels(REPO / "examples", gpu=False)
    assert [k.name for k in chosen] == sorted(DEMO_KERNELS)
    assert demo_kernels(REPO / "examples", every=True) == example_kernels(REPO / "examples")
    assert len(demo_kernels(REPO / "examples", every=True)) > len(chosen)


def test_on_a_gpu_the_demo_times_triton_and_cuda_examples_on_the_device_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44 item 4, the part a CPU can test: where the probe finds a GPU, the demo adds
    the GPU examples, publishes Triton with a speed-up claim (no interpreter reason), and
    `ktl bench` (which publish and reproduce call) picks the device path with device auto
    for a torch/triton module and a cuda kernel alike."""
    import verifier.benchmark._route as route
    from demo.run import DEMO_KERNELS, GPU_DEMO_KERNELS, demo_kernels
    from verifier.benchmark import BenchSettings
    from verifier.gpu import GpuInfo
    from verifier.kernel import KernelSpec

    chosen = [k.name for k in demo_kernels(REPO / "examples", gpu=True)]
    assert chosen == sorted(DEMO_KERNELS + GPU_DEMO_KERNELS)
    gpu = GpuInfo(None, 1, "NVIDIA H100", "9.0", 570)
    monkeypatch.setattr("verifier.gpu.probe", lambda: gpu)
    monkeypatch.setattr("client.publish.probe", lambda: gpu)  # imported there at the top
    from demo.run import _not_timed_here

    assert _not_timed_here(REPO / "examples" / "triton-bias-gelu") is None
    picked: list[str] = []
    monkeypatch.setattr(route, "gpu_probe", lambda: gpu)
    monkeypatch.setattr(route, "gpu_device", lambda: "the gpu")
    monkeypatch.setattr(route, "device_bench", lambda spec, s, dev, *a: picked.append(
        f"device_bench {spec.runtime} {s.device} {dev}"))
    monkeypatch.setattr(route, "cabi_bench", lambda spec, s, dev, *a: picked.append(
        f"cabi_bench {spec.runtime} {s.device} {dev}"))
    monkeypatch.setattr(route, "module_runtime_missing", lambda name: None)
    for name in ("triton-rmsnorm", "cuda-softmax"):
        route.on_device(KernelSpec.load(REPO / "examples" / name), BenchSettings(), lambda m: None)
    assert picked == ["device_bench triton cuda the gpu", "cabi_bench cuda cuda the gpu"]


def test_an_unsupported_lie_is_not_paid_on_and_passes() -> None:
    """Issue 42: a lie whose own record makes it weak, not confirmed here, is unsupported:
    never paid on, as expected; an honest unsupported claim is shown, not failed."""
    rows = [_row("a/b", "confirmed"), _row("c/d", "unsupported"),
            _row("a/b", "unsupported", honest=False)]
    assert check_summary(rows, ["a/b", "c/d"]) == []
    rows = [_row("a/b", "confirmed"), _row("a/b", "inconclusive", honest=False)]
    assert any("was not refuted" in p for p in check_summary(rows, ["a/b"]))
    # both cores busy: every honest claim weak (its own record), unsupported, the lie too
    rows = [_row("a/b", "unsupported"), _row("a/b", "unsupported", honest=False)]
    assert check_summary(rows, ["a/b"]) == []


def test_an_untrusted_measurement_is_not_shown_as_reproduced() -> None:
    """Issue 42 item 7: the summary showed an untrusted 1.67x as reproduced. A row whose
    measurement here was not trusted (no test ran, so no statistics) shows no figure."""
    body = {"policy": {"tolerance": 0.05}, "claims": [
        {"claim": "benchmark.speedup[R=8,C=16]", "verdict": "inconclusive",
         "claimed": {"speedup": 1.0}, "measured": {"speedup": 1.67},
         "reason": "the measurement here is not trusted: too unstable"}]}
    (row,) = rows_from_reproduction(body, kernel="a/b", op="sum", entry=3, honest=True,
                                    reproduction_entry=None)
    assert row.reproduced is None and row.claimed == 1.0
    # tested on a measurement distrusted for noise alone (it may refute): still no figure
    body["claims"][0]["verdict"] = "refuted"
    body["claims"][0]["statistics"] = {"inflation": 1.4, "inflation_interval": [1.2, 1.6],
                                       "noisy": True}
    (row,) = rows_from_reproduction(body, kernel="a/b", op="sum", entry=3, honest=False,
                                    reproduction_entry=None)
    assert row.reproduced is None and row.verdict == "refuted" and row.noisy


def _ci_lie(verdict: str = "inconclusive", noisy: bool | None = True,
                    inflation: float = 1.12) -> dict[str, object]:
    """The lie's claim as CI's reproduction gave it on 2026-12-07: refuted in a first sitting
    of 15 runs, then a second of 5 runs reading 0.69x to 0.989x, distrusted for noise."""
    stats: dict[str, object] = {"inflation": inflation, "inflation_interval": [0.74, 1.70],
                                "look": 1}
    if noisy is not None:
        stats["noisy"] = noisy
    return {"policy": {"tolerance": 0.05}, "claims": [
        {"claim": "benchmark.speedup[R=1024,C=1024]", "verdict": verdict,
         "claimed": {"speedup": 0.938}, "measured": {"speedup": 0.837},
         "reason": "refuted in the first sitting; the second could not decide",
         "statistics": stats}]}


def _lie_rows(body: dict[str, object]) -> list[SummaryRow]:
    return rows_from_reproduction(body, kernel="a/b", op="sum", entry=11, honest=False,
                                  reproduction_entry=12)


def test_a_lie_this_machine_could_not_decide_is_shown_not_failed() -> None:
    """CI on 2026-12-07: the lie refuted in one sitting and left open by a noisy second one.
    Whether a sitting here decides is a timing; the machine's own typed output (a noisy
    measurement, or an estimate beyond the tolerance the test could not decide) says it
    could not judge, so the check shows it and passes."""
    honest = [_row("a/b", "confirmed")]
    (lie,) = _lie_rows(_ci_lie())
    assert lie.noisy and lie.undecided_here and not lie.as_expected
    assert check_summary([*honest, lie], ["a/b"]) == []
    # trusted, but estimated 12 % over the 5 % tolerance and undecided: also this machine's
    (lie,) = _lie_rows(_ci_lie(noisy=None))
    assert lie.overstated and lie.undecided_here
    assert check_summary([*honest, lie], ["a/b"]) == []
    out = Console(record=True, width=200)
    out.print(summary_table([*honest, lie], 1.26))
    assert "undecided here (not a failure)" in out.export_text()


def test_a_lie_measured_as_if_honest_still_fails() -> None:
    """The attacker's side of the allowance: a lie inconclusive on a trusted measurement
    that estimates it within the tolerance (the lie not seen at all), a confirmed lie, or a
    lie claimed undecided beside another left open on a trusted measurement all fail; so
    does a noisy honest claim refuted. A claimant cannot set `noisy`: it is the
    reproduction's own statistics."""
    honest = [_row("a/b", "confirmed")]
    (seen_as_honest,) = _lie_rows(_ci_lie(noisy=None, inflation=1.03))
    assert not seen_as_honest.undecided_here
    assert any("was not refuted" in p for p in check_summary([*honest, seen_as_honest], ["a/b"]))
    (confirmed,) = _lie_rows(_ci_lie(verdict="confirmed"))
    assert not confirmed.undecided_here
    assert any("came out confirmed" in p for p in check_summary([*honest, confirmed], ["a/b"]))
    (noisy_lie,) = _lie_rows(_ci_lie())
    assert any("was not refuted" in p
               for p in check_summary([*honest, noisy_lie, seen_as_honest], ["a/b"]))
    honest_noisy = dataclasses.replace(_row("a/b", "refuted"), noisy=True)
    assert any("honest claim came out refuted" in p
               for p in check_summary([honest_noisy, noisy_lie], ["a/b"]))


def test_examples_are_found() -> None:
    found = example_kernels(REPO / "examples")
    assert found and all((k / "kernel.toml").is_file() for k in found)


def test_real_log_server_starts_serves_and_stops(tmp_path: Path) -> None:
    with running_log(tmp_path / "log", tmp_path / "home") as server:
        assert server.url.startswith("http://127.0.0.1:")
        info = requests.get(f"{server.url}/api/v1/log", timeout=10).json()
        assert info["verifier_key"] == server.verifier_key and info["tree_size"] == 0
        page = requests.get(f"{server.url}/", timeout=10)
        assert page.status_code == 200 and "Content-Security-Policy" in page.headers
        proc = server.proc
    assert proc.poll() is not None


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("KTL_RUN_SLOW") != "1",
                    reason="the full demo runs in CI as `make demo DEMO_EXIT=1`; "
                           "set KTL_RUN_SLOW=1 to run it from pytest too")
def test_full_demo_end_to_end(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "demo.run", "--exit", "--data", str(tmp_path / "demo")],
        capture_output=True, text=True, timeout=900, cwd=REPO, check=False,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "no honest claim refuted, the inflated claim" in out.stdout


def test_demo_without_examples_fails_clearly(tmp_path: Path) -> None:
    empty = tmp_path / "no-examples"
    empty.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "demo.run", "--exit", "--data", str(tmp_path / "w"),
         "--examples", str(empty)],
        capture_output=True, text=True, timeout=60, cwd=REPO, check=False,
    )
    assert out.returncode == 1
    assert "no example kernels" in out.stdout
    assert "work folder kept" in out.stdout


def test_demo_refuses_an_existing_work_folder(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "demo.run", "--exit", "--data", str(tmp_path)],
        capture_output=True, text=True, timeout=60, cwd=REPO, check=False,
    )
    assert out.returncode == 2 and "already exists" in out.stderr


@pytest.mark.slow  # about 90 s: a real log, witnesses and a kernel published and reproduced
@pytest.mark.timeout(900)  # a loaded machine's noisy sittings are looked at again (issue 42)
def test_demo_serves_until_stopped_then_stops_the_log(tmp_path: Path) -> None:
    """Without --exit the log keeps serving; SIGTERM (like Ctrl-C) stops it, orphaning nothing."""
    import shutil
    import signal
    import time

    examples = tmp_path / "examples"
    examples.mkdir()
    shutil.copytree(REPO / "examples" / "sum-rows", examples / "sum-rows")
    log = tmp_path / "demo.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "demo.run", "--data", str(tmp_path / "w"),
             "--examples", str(examples)],
            stdout=sink, stderr=subprocess.STDOUT, cwd=REPO,
        )
    try:
        # what it waits for is the explorer, not a speed: under load the lie's reproduction
        # measures more runs while its sitting is noisy (up to its 180 s budget, twice)
        deadline = time.monotonic() + 720
        while "press Ctrl-C" not in log.read_text() and proc.poll() is None:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        text = log.read_text()
        assert proc.poll() is None, text[-3000:]
        url = next(line.split()[-1] for line in text.splitlines() if line.startswith("Explorer:"))
        assert requests.get(url, timeout=10).status_code == 200
        assert "Claims and what independent reproduction found" in text
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        assert "stopping the log" in log.read_text()
        with pytest.raises(requests.ConnectionError):
            requests.get(url, timeout=5)
    finally:
        if proc.poll() is None:  # stop it the way that also stops its log server
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_demo_help_is_answered() -> None:
    out = subprocess.run([sys.executable, "-m", "demo.run", "-h"], capture_output=True,
                         text=True, timeout=60, cwd=REPO, check=False)
    assert out.returncode == 0 and "--exit" in out.stdout and "--keep" in out.stdout


@pytest.mark.parametrize(("log_stays", "folder_stays"), [(True, True), (False, True),
                                                         (False, False)])
def test_closing_hints_name_only_what_remains(tmp_path: Path, log_stays: bool,
                                              folder_stays: bool) -> None:
    from types import SimpleNamespace

    from rich.console import Console

    from demo.run import Demo

    console = Console(record=True, width=200)
    demo = Demo(tmp_path, console, log_stays=log_stays, folder_stays=folder_stays)
    demo.receipts = [str(tmp_path / "kernel.tlog-proof")]
    server = SimpleNamespace(url="http://127.0.0.1:1234", verifier_key="k+1+AA")
    demo._where(server, [({"subject_sha256": "ab" * 32}, tmp_path)])  # type: ignore[arg-type]
    text = console.export_text()
    assert ("http://127.0.0.1:1234" in text) == log_stays
    assert ("ktl verify" in text) == folder_stays
    assert ("The log stops now" in text) != log_stays


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_installs_no_test_extras() -> None:
    def installs(target: str) -> list[str]:
        out = subprocess.run(["make", "-n", "-B", target], capture_output=True, text=True,
                             timeout=60, cwd=REPO, check=True)
        return [line for line in out.stdout.splitlines() if "pip install" in line]

    assert installs("demo") and not any("test" in line for line in installs("demo"))
    assert any("'.[test" in line for line in installs("test"))


def test_summary_cells_are_text_not_markup() -> None:
    from rich.console import Console

    from demo.run import summary_table

    console = Console(record=True, width=250)
    row = SummaryRow("[reverse]a/b[/reverse]", "sum\x1b]8;;http://evil.example\x07", 3,
                     "benchmark.speedup[R=512,C=1024]", 1.5, 1.4, "confirmed", True)
    console.print(summary_table([row]))
    text = console.export_text()
    assert "[reverse]a/b[/reverse]" in text and "R=512,C=1024" in text and "\x1b" not in text
    # the lie is marked with the factor it was planted with
    lie = SummaryRow("a/b", "sum", 4, "benchmark.speedup[R=8]", 2.4, None, "refuted", False)
    console.print(summary_table([row, lie], 1.6))
    assert "(inflated x1.6)" in console.export_text()


def test_torch_examples_are_published_and_triton_is_checked_with_a_reason() -> None:
    from demo.run import _not_timed_here, _runtime_unavailable

    torch_example = REPO / "examples" / "torch-rmsnorm"
    triton_example = REPO / "examples" / "triton-bias-gelu"
    assert torch_example in example_kernels(REPO / "examples")
    assert triton_example in example_kernels(REPO / "examples")
    assert _not_timed_here(torch_example) is None
    reason = _not_timed_here(triton_example)
    assert reason is not None and "interpreter" in reason
    if _runtime_unavailable(torch_example) is None:
        return
    assert "torch" in str(_runtime_unavailable(torch_example))


def test_honest_claims_are_published_with_the_demos_runs(tmp_path: Path) -> None:
    """An honest claim measured by `ktl publish` carries PUBLISH_RUNS runs (`--runs`); the
    planted lie, given as results, is published without it (publish refuses --runs with
    results: they were measured already)."""
    from types import SimpleNamespace

    from demo.run import PUBLISH_RUNS

    demo = Demo(tmp_path, Console(file=io.StringIO()))
    asked: list[list[str]] = []
    demo.ktl = SimpleNamespace(run=lambda args, **_: asked.append(list(args)) or {})  # type: ignore[assignment]
    server = SimpleNamespace(url="http://127.0.0.1:1", verifier_key="k+1+AA")
    demo.publish(tmp_path, tmp_path / "k", server)  # type: ignore[arg-type]
    demo.publish(tmp_path, tmp_path / "k", server, tmp_path / "r.json")  # type: ignore[arg-type]
    honest, lie = asked
    assert honest[honest.index("--runs") + 1] == str(PUBLISH_RUNS) and "--results" not in honest
    assert "--runs" not in lie and lie[lie.index("--results") + 1] == str(tmp_path / "r.json")
    from verifier import DEFAULT_RUNS

    assert PUBLISH_RUNS > DEFAULT_RUNS  # more than a claim carries by default


@pytest.mark.parametrize(("lie", "says"), [("refuted", "the inflated claim refuted"),
                                           ("unsupported", "the inflated claim unsupported")])
def test_the_outcome_line_says_the_lie_and_the_time_either_way(tmp_path: Path, lie: str,
                                                              says: str) -> None:
    out = io.StringIO()
    demo = Demo(tmp_path / "work", Console(file=out, width=200))
    demo.rows = [_row("a/b", "inconclusive"), _row("a/b", lie, honest=False)]
    demo._outcome([])
    text = out.getvalue()
    assert says in text and " s)" in text, text
    assert "1 honest claim(s) inconclusive" in text


def test_the_outcome_line_says_a_lie_left_undecided_and_why(tmp_path: Path) -> None:
    out = io.StringIO()
    demo = Demo(tmp_path / "work", Console(file=out, width=200))
    demo.rows = [_row("a/b", "confirmed"), *_lie_rows(_ci_lie())]
    demo._outcome(check_summary(demo.rows, ["a/b"]))
    text = out.getvalue()
    assert "the inflated claim left undecided by this machine" in text and " s)" in text, text
    assert "refuted in the first sitting; the second could not decide" in text
    assert "not what the demo expects" not in text
