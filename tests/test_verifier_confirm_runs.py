"""More runs to confirm: an honest claim measured in too few runs here is measured further.

`verifier.stats.runs_to_confirm` counts the runs after which the whole interval of the
overstatement would be within the tolerance; the verdict records it as `more_runs`, so
`reproduce`'s sequential looks measure them instead of leaving the claim inconclusive (as CI
left the demo's honest torch-rmsnorm claim: measured 1.37x for a 1.32x claim, its upper
bound +10 % against 5 %, "more runs here would narrow the interval", and no run was added).
The attacker's side: a lie never gets confirming runs, and the confirmations over every look
stay within the confidence spent.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_verifier_reproduce import _bench, _reproduce_over
from verifier.reproduce._verdict import Sitting, speedup_verdict
from verifier.stats import (
    MAX_LOOKS,
    SIGMA_FLOOR,
    StatsError,
    inflation_test,
    look_confidence,
    runs_to_confirm,
    student_t_quantile,
)

TOL = 1.05


def _naive_upper(claimed: list[float], measured: list[float], conf: float) -> float:
    """The upper bound of the overstatement, written out (no between-sitting allowance)."""
    lc = [math.log(x) for x in claimed]
    lm = [math.log(x) for x in measured]
    d = sum(lc) / len(lc) - sum(lm) / len(lm)
    mu = sum(lm) / len(lm)
    s = max(math.sqrt(sum((x - mu) ** 2 for x in lm) / (len(lm) - 1)), SIGMA_FLOOR)
    return d + student_t_quantile(conf, len(lm) - 1) * s * math.sqrt(1 / len(lc) + 1 / len(lm))


runs5 = st.lists(st.floats(0.5, 2.0), min_size=5, max_size=5)


@settings(max_examples=60, deadline=None)
@given(runs5, st.lists(st.floats(0.5, 2.0), min_size=2, max_size=8), st.integers(1, 4))
def test_the_count_is_the_fewest_runs_that_would_confirm(
        claimed: list[float], measured: list[float], look: int) -> None:
    """Against the naive bound: with the measured runs' mean and spread repeated, k more runs
    put the upper bound within the tolerance and k - 1 do not."""
    test = inflation_test(claimed, measured, look=look)
    k = runs_to_confirm(test, TOL)
    conf = look_confidence(test.confidence, look)
    n, m = len(measured), len(claimed)
    d, s = math.log(test.inflation), test.sigma

    def upper(total: int) -> float:
        return d + student_t_quantile(conf, total - 1) * s * math.sqrt(1 / m + 1 / total)

    assert upper(n) == pytest.approx(_naive_upper(claimed, measured, conf), abs=1e-9)
    if k is None:
        assert d > math.log(TOL) or upper(n + 200) > math.log(TOL)
    elif k == 0:
        assert upper(n) <= math.log(TOL)
    else:
        assert upper(n + k) <= math.log(TOL) < upper(n + k - 1)


def test_no_count_for_a_claim_beyond_the_tolerance_or_out_of_reach() -> None:
    here = [1.0, 1.02, 0.98, 1.01, 0.99]
    lie = inflation_test([1.25] * 5, here, look=1)
    assert runs_to_confirm(lie, TOL) is None  # the estimate itself is beyond
    # the claim's own runs 30 % apart: no number of runs here narrows the interval enough
    spread = inflation_test([0.7, 1.3, 0.7, 1.3, 1.0], here, look=1)
    wide = inflation_test([1.0] * 5, [0.7, 1.3, 0.75, 1.25, 1.0], look=1)
    assert runs_to_confirm(wide, TOL) is None
    assert runs_to_confirm(spread, TOL) == 0  # only the spread here counts (the module's rule)
    with pytest.raises(StatsError):
        runs_to_confirm(lie, 0.0)
    with pytest.raises(StatsError):
        runs_to_confirm(lie, math.inf)


def test_an_honest_claim_too_wide_to_confirm_says_how_many_runs_would() -> None:
    """CI's torch-rmsnorm sitting: claimed 1.319x, measured 1.369x over five runs 4.5 % apart."""
    claimed = [1.30, 1.33, 1.31, 1.34, 1.31]
    measured = [1.30, 1.42, 1.35, 1.44, 1.34]
    v = speedup_verdict(claimed, measured, Sitting(), look=1)
    assert v.decision == "inconclusive", v.reason
    stats = v.statistics()
    assert stats is not None and stats.more_runs is not None and stats.more_runs >= 1
    assert f"about {stats.more_runs} more run(s) here would confirm it" in v.reason
    # the runs it asks for (one look's batch of five), as they were, do confirm it
    assert stats.more_runs <= 5
    assert speedup_verdict(claimed, measured * 2, Sitting(), look=2).decision == "confirmed"


def test_a_lie_gets_no_confirming_runs() -> None:
    """x1.25 on a wide sitting: undecided, and the count it carries is the test's (to
    refute), never one to confirm."""
    claimed = [1.25 * x for x in (1.0, 1.01, 0.99, 1.0, 1.02)]
    measured = [1.0, 1.2, 0.85, 1.15, 0.9]
    v = speedup_verdict(claimed, measured, Sitting(), look=1)
    assert v.decision == "inconclusive", v.reason
    assert "would confirm" not in v.reason


def _sequential_verdict(claimed: list[float], rng: random.Random, sigma: float,
                        batch: int = 5) -> str:
    """`reproduce`'s looks on one simulated claim: a batch of runs a look, stopping once the
    verdict is decided or no count of further runs is given."""
    runs: list[float] = []
    for look in range(1, MAX_LOOKS + 1):
        runs += [math.exp(rng.gauss(0.0, sigma)) for _ in range(batch)]
        v = speedup_verdict(claimed, runs, Sitting(), look=look)
        stats = v.statistics()
        if v.decision != "inconclusive" or stats is None or stats.more_runs is None:
            return v.decision
    return v.decision


@pytest.mark.parametrize("inflation", [1.08, 1.12])
def test_more_looks_do_not_confirm_a_lie_beyond_the_tolerance(inflation: float) -> None:
    """The attacker's claim overstated a little past the tolerance, its own runs tight, met by
    sittings whose runs are 5 % apart, every look taken that the counts ask for: confirmed
    in at most 1 % of 400 simulated reproductions (the confidence spent over the looks)."""
    rng = random.Random(7)
    confirmed = 0
    for _ in range(400):
        claimed = [inflation * math.exp(rng.gauss(0.0, 0.005)) for _ in range(5)]
        confirmed += _sequential_verdict(claimed, rng, 0.05) == "confirmed"
    assert confirmed <= 4, confirmed


def test_more_looks_confirm_honest_claims_a_first_sitting_left_open() -> None:
    """The same simulation, honest, both sides' runs 3 % apart: one sitting of five runs
    leaves most open (the claim's own five runs limit it), and with the extra looks over a
    third of those are confirmed (without the counts, every one would stay inconclusive: no
    look would be taken)."""
    rng = random.Random(11)
    first_open = confirmed = 0
    for _ in range(200):
        claimed = [math.exp(rng.gauss(0.0, 0.03)) for _ in range(5)]
        state = rng.getstate()
        one = speedup_verdict(claimed, [math.exp(rng.gauss(0.0, 0.03)) for _ in range(5)],
                              Sitting(), look=1)
        if one.decision != "inconclusive":
            continue
        first_open += 1
        rng.setstate(state)
        confirmed += _sequential_verdict(claimed, rng, 0.03) == "confirmed"
    assert first_open >= 20
    assert confirmed >= first_open // 3, (confirmed, first_open)


TIGHT = (1.30, 1.33, 1.31, 1.34, 1.31)
SPREAD = (1.30, 1.42, 1.35, 1.44, 1.34)


def test_reproduce_measures_an_honest_claim_further_until_it_is_confirmed() -> None:
    """Through `reproduce_kernel` (bench runs injected): the first sitting leaves the honest
    claim open, a look measures five more runs, and the claim is confirmed."""
    body, batches, said = _reproduce_over([_bench(SPREAD)], _bench(TIGHT))
    (speed,) = body["claims"]
    assert speed["verdict"] == "confirmed", speed["reason"]
    assert len(batches.asked) >= 2 and speed["statistics"]["measured_runs"] >= 10
    assert any(m.startswith("look 1:") for m in said), said
    # with no time budget for further looks it stays open, saying how many runs would decide
    alone, _, _ = _reproduce_over([_bench(SPREAD)], _bench(TIGHT), budget_s=0)
    assert alone["claims"][0]["verdict"] == "inconclusive"
    assert "would confirm it" in alone["claims"][0]["reason"]


def test_an_honest_claim_no_run_here_can_confirm_says_so() -> None:
    """The demo's sum-rows sitting: runs 5.7 % apart against a claim of ten: no count of runs
    here confirms it, and the reason says what would instead of promising more runs."""
    claimed = [0.792 * x for x in (1.0, 1.01, 0.99, 1.0, 1.01, 0.99, 1.0, 1.0, 1.01, 0.99)]
    measured = [0.73, 0.82, 0.72, 0.81, 0.78]
    v = speedup_verdict(claimed, measured, Sitting(), look=1)
    assert v.decision == "inconclusive", v.reason
    stats = v.statistics()
    assert stats is not None and stats.more_runs is None
    assert "no number of runs here would confirm it at this sitting's spread" in v.reason
    assert "would confirm it, if the runs stayed" not in v.reason


WIDE = (0.36, 0.50, 0.38, 0.49, 0.43)
"""A sitting whose runs read 0.36x to 0.50x: against a claim 28 % above its middle the test
asks for about 75 more runs; 31 % above, about 18."""


def test_looks_stop_where_the_runs_asked_for_cannot_fit() -> None:
    """A reproduction spends its further looks only where the runs the test asks for fit what
    the looks left can measure: about 75 more runs against at most 35 in the 7 looks left
    stops at once, saying both counts, the claim left undecided; 18 are measured (the
    control)."""
    from tests.test_verifier_reproduce import _times

    far = _bench(_times(1.28))
    body, batches, said = _reproduce_over([_bench(WIDE)], far)
    (speed,) = body["claims"]
    assert speed["verdict"] == "inconclusive" and speed["statistics"]["more_runs"] > 35
    assert len(batches.asked) == 1, batches.asked
    assert any("would decide, and at most 35 fit the 7 look(s) left" in m for m in said), said
    _, batches, said = _reproduce_over([_bench(WIDE)], _bench(_times(1.31)))
    assert len(batches.asked) >= 2 and any(m.startswith("look 1:") for m in said), said


def test_the_runs_within_reach() -> None:
    """What the looks can still measure: the looks left times a batch, within the room under
    the run limit; never the time budget's pace (a look starts while any of it is left)."""
    from verifier.reproduce._claims import _within_reach

    assert _within_reach(100, 7, 5) == 35      # seven looks of five
    assert _within_reach(3, 7, 5) == 3         # the run limit
    assert _within_reach(100, 0, 5) == 0       # no look left
