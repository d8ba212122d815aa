"""verifier.ranks against naive references: every ordering counted, every pair compared."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.ranks import EXACT_PAIRS, RankError, rank_test_greater


def _naive_u(x: list[float], y: list[float]) -> float:
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)


def _naive_p(x: list[float], y: list[float]) -> float:
    """P(U >= observed) over every way of choosing which pooled values are x's."""
    pooled = [*x, *y]
    observed = _naive_u(x, y)
    hits = total = 0
    for chosen in itertools.combinations(range(len(pooled)), len(x)):
        xs = [pooled[i] for i in chosen]
        ys = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        total += 1
        hits += _naive_u(xs, ys) >= observed - 1e-9
    return hits / total


distinct = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=11, unique=True)


@settings(max_examples=80, deadline=None)
@given(distinct, st.integers(1, 10))
def test_the_exact_p_value_is_the_share_of_orderings(values: list[float], cut: int) -> None:
    cut = min(cut, len(values) - 1)
    x, y = values[:cut], values[cut:]
    assert rank_test_greater(x, y) == pytest.approx(_naive_p(x, y), abs=1e-12)


def test_complete_separation_is_one_ordering_in_all() -> None:
    # 8 against 8, every x above every y: 1 / C(16, 8)
    assert rank_test_greater(range(10, 18), range(8)) == pytest.approx(1 / 12870)
    assert rank_test_greater(range(8), range(10, 18)) == pytest.approx(1.0)


def test_large_samples_use_the_normal_approximation_close_to_the_exact() -> None:
    import random

    rng = random.Random(4)
    x = [rng.gauss(0.3, 1) for _ in range(50)]
    y = [rng.gauss(0.0, 1) for _ in range(50)]
    exact = rank_test_greater(x, y)  # 50 * 50 = EXACT_PAIRS: still exact
    assert EXACT_PAIRS == 50 * 50
    approx = rank_test_greater([*x, x[0] + 1e-9], y)  # one more value: approximated
    assert abs(exact - approx) < 0.02, (exact, approx)


def test_ties_count_half_and_all_equal_is_no_evidence() -> None:
    assert rank_test_greater([1.0] * 5, [1.0] * 5) == 1.0
    tied = rank_test_greater([1.0, 2.0, 2.0, 3.0], [2.0, 0.5, 0.7])
    assert 0.0 < tied < 1.0


@pytest.mark.parametrize("x,y", [([], [1.0]), ([1.0], []), ([float("nan")], [1.0]),
                                 ([1.0], [float("inf")])])
def test_bad_samples_are_refused(x: list[float], y: list[float]) -> None:
    with pytest.raises(RankError):
        rank_test_greater(x, y)
