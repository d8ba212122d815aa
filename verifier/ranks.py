"""Do the values of one sample tend to be larger than another's? A one-sided rank test.

Pure: numbers in, a p-value out. The Mann-Whitney U statistic counts the pairs (x, y) with
x > y (a tie counts one half). Under the null hypothesis (both samples from one
distribution) every ordering of the pooled values is equally likely; the p-value is the
chance of a U at least as large as the one observed. It is exact (the distribution counted
over the orderings) when the samples hold no ties and n * m <= EXACT_PAIRS, else the normal
approximation with the tie correction and a continuity correction.

A rank test asks only about order, so one huge outlier (a scheduling stall) weighs no more
than any other value above the other sample's: systematic lateness is what it sees.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

__all__ = ["EXACT_PAIRS", "MAX_SAMPLE", "RankError", "rank_test_greater"]

EXACT_PAIRS = 2500
"""Largest n * m for which the exact distribution is counted (at most 2,500 x 2,501 steps)."""
MAX_SAMPLE = 100_000
"""Most values in either sample."""


class RankError(ValueError):
    """Samples a rank test cannot be run on (empty, too large, or not finite)."""


def _u_statistic(x: Sequence[float], y: Sequence[float]) -> tuple[float, list[int]]:
    """U of `x` over `y` from mid-ranks, and the sizes of the pooled values' tie groups."""
    pooled = sorted([(float(v), 0) for v in x] + [(float(v), 1) for v in y])
    rank_sum_x = 0.0
    ties: list[int] = []
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        mid = (i + j) / 2.0 + 1.0  # ranks start at 1
        rank_sum_x += mid * sum(1 for k in range(i, j + 1) if pooled[k][1] == 0)
        ties.append(j - i + 1)
        i = j + 1
    n = len(x)
    return rank_sum_x - n * (n + 1) / 2.0, ties


def _exact_upper(u: int, n: int, m: int) -> float:
    """P(U >= u) for samples of n and m values without ties, counted over all orderings.

    f(i, j)[k]: the share of the orderings of i x's and j y's with U = k; the largest value
    is an x (share i / (i + j); it beats all j y's) or a y (it beats nothing), so
    f(i, j) = i/(i+j) * f(i-1, j) shifted by j + j/(i+j) * f(i, j-1)."""
    size = n * m + 1
    row = [np.eye(1, size).ravel() for _ in range(m + 1)]  # f(0, j): U = 0 surely
    for i in range(1, n + 1):
        new = [np.eye(1, size).ravel()]  # f(i, 0): U = 0 surely
        for j in range(1, m + 1):
            shifted = np.zeros(size)
            shifted[j:] = row[j][: size - j]
            new.append((i * shifted + j * new[j - 1]) / (i + j))
        row = new
    return float(min(1.0, row[m][u:].sum()))


def rank_test_greater(x: Sequence[float], y: Sequence[float]) -> float:
    """One-sided p-value that the values of `x` tend to be larger than those of `y`."""
    n, m = len(x), len(y)
    if not (1 <= n <= MAX_SAMPLE and 1 <= m <= MAX_SAMPLE):
        raise RankError(f"a rank test needs 1 to {MAX_SAMPLE} values a sample, got {n} and {m}")
    if not all(math.isfinite(v) for v in (*x, *y)):
        raise RankError("a rank test needs finite values")
    u, ties = _u_statistic(x, y)
    if n * m <= EXACT_PAIRS and all(t == 1 for t in ties):
        return _exact_upper(round(u), n, m)
    total = n + m
    correction = sum(t ** 3 - t for t in ties) / (total * (total - 1))
    variance = n * m / 12.0 * ((total + 1) - correction)
    if variance <= 0:  # every value equal: no evidence either way
        return 1.0
    z = (u - n * m / 2.0 - 0.5) / math.sqrt(variance)
    return float(1.0 - NormalDist().cdf(z))
