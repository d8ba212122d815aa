"""Is a claimed speed-up overstated? A t test on log speed-ups over independent runs.

Pure: numbers in, an `InflationTest` out. Each run (fresh processes, interleaved
kernel and baseline) gives one speed-up; the between-run spread is the noise
that matters, so the test works on the runs, not on one run's bootstrap interval.

With claimed per-run speed-ups c_1..c_m and re-measured ones r_1..r_n:

    d      = mean(log c) - mean(log r)        (log of the estimated inflation)
    s      = max(sd(log r), SIGMA_FLOOR)      (between-run spread, measured HERE)
    se     = s * sqrt(1/m + 1/n),  df = n - 1
    bounds = d -/+ t(confidence, df) * se     (one-sided bounds at `confidence`)

Refuted when the lower bound exceeds log(1 + tolerance): the claim overstates by more
than the tolerance with that confidence. Confirmed when the measurement is consistent
with the claim: the estimated overstatement d is within the tolerance (the interval,
always reported, says how precisely). Inconclusive otherwise (the estimate is beyond
the tolerance but not significantly), with the number of further runs here that would
refute if the estimate and spread stayed as they are.

Only the reproducer's own spread is used: the claimant chooses its runs, and a
claim reporting wildly spread runs must not widen the interval until nothing can
be refuted. Claiming more runs only narrows the interval around the claim.

Between sittings. The claim was measured at another time, under other load; runs within
one sitting do not see that variation. `between` (log units, SIGMA_BETWEEN by default in
`reproduce`: a prior from one observed case, not yet measured; see docs/performance.md, "Where
the thresholds come from") adds it as a known component: the half-width is
sqrt((t * s * sqrt(1/m + 1/n))^2 + (z * between)^2) (t: Student's with n - 1 degrees of
freedom, z: the normal quantile, both at the look's confidence), so no number of runs
here can refute an overstatement smaller than the between-sitting noise allows. A false refutation is worse than an inconclusive.

Sequential looks. When a verdict is undecided, `reproduce` measures more runs and tests
again. Testing repeatedly at the same level would inflate the false-refutation rate, so
look k (1, 2, ...) spends alpha_k = (1 - confidence) / 2^k (a group-sequential design with
a geometric alpha-spending function): the alphas sum to less than 1 - confidence, so the
chance of ever refuting an honest claim over any number of looks, stopped whenever, stays
below it (the union bound needs no independence between looks). `look = 0` is the single
fixed-sample test.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Any, Literal

from attest.predicates import MAX_RUNS

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_TOLERANCE",
    "MAX_LOOKS",
    "SIGMA_BETWEEN",
    "SIGMA_FLOOR",
    "Decision",
    "InflationTest",
    "Sittings",
    "StatsError",
    "inflation_test",
    "look_confidence",
    "max_runs",
    "runs_to_confirm",
    "sequential_test",
    "simulated_rates",
    "simulated_sequential_rates",
    "student_t_cdf",
    "student_t_quantile",
]

Decision = Literal["confirmed", "refuted", "inconclusive"]
DEFAULT_TOLERANCE = 0.05
"""A claim may overstate the re-measured speed-up by this much (5 %) and stand."""
DEFAULT_CONFIDENCE = 0.99
"""How sure the test must be before it refutes (or confirms)."""
SIGMA_FLOOR = 0.005
"""Smallest between-run spread (log units, ~0.5 %) assumed, so identical runs do not
give a zero-width interval."""
SIGMA_BETWEEN = 0.04
"""Spread (log units) of an honest kernel's speed-up between sittings (other load, another
time) beyond the runs' own spread: a prior from the one case issue 25 observed, until the
busy/quiet run measures it; see docs/performance.md ("Where the thresholds come from")."""
MAX_LOOKS = 8


def max_runs() -> int:
    """Most runs a claim or a measurement may have: attest's limit, imported when needed
    (the sandboxed worker imports this package and may not read attest/)."""

    return MAX_RUNS

_MAX_EXTRA = 200


class StatsError(ValueError):
    """Inputs the test cannot use (no runs, a speed-up <= 0, an option out of range)."""


@dataclass(frozen=True)
class InflationTest:
    """The test's typed outcome; `describe()` renders it, nothing parses it back."""

    claimed: float
    measured: float
    claimed_runs: int
    measured_runs: int
    inflation: float
    inflation_interval: tuple[float, float]
    measured_interval: tuple[float, float]
    sigma: float
    tolerance: float
    confidence: float
    decision: Decision
    more_runs: int | None
    between: float = 0.0
    look: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"claimed": self.claimed, "measured": self.measured,
                "claimed_runs": self.claimed_runs, "measured_runs": self.measured_runs,
                "inflation": self.inflation, "inflation_interval": list(self.inflation_interval),
                "measured_interval": list(self.measured_interval), "sigma": self.sigma,
                "tolerance": self.tolerance, "confidence": self.confidence,
                "decision": self.decision, "more_runs": self.more_runs,
                "between": self.between, "look": self.look}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> InflationTest:
        decision = obj["decision"]
        if decision not in ("confirmed", "refuted", "inconclusive"):
            raise StatsError(f"unknown decision {decision!r}")
        lo, hi = obj["inflation_interval"]
        mlo, mhi = obj["measured_interval"]
        more = obj["more_runs"]
        return cls(float(obj["claimed"]), float(obj["measured"]), int(obj["claimed_runs"]),
                   int(obj["measured_runs"]), float(obj["inflation"]), (float(lo), float(hi)),
                   (float(mlo), float(mhi)), float(obj["sigma"]), float(obj["tolerance"]),
                   float(obj["confidence"]), decision, None if more is None else int(more),
                   float(obj.get("between", 0.0)), int(obj.get("look", 0)))

    def describe_interval(self) -> str:
        """`claimed 1.25x, measured 1.02x [0.98, 1.06]: overstated by 23 % [18 %, 27 %]`: the
        figures, with no decision (the measured interval labelled as this sitting's)."""
        lo, hi = self.inflation_interval
        mlo, mhi = self.measured_interval
        head = (f"claimed {self.claimed:.3f}x ({_runs(self.claimed_runs)}), measured "
                f"{self.measured:.3f}x [{mlo:.3f}, {mhi:.3f}] ({_runs(self.measured_runs)}, "
                f"between-run spread {100 * self.sigma:.1f} %): {_pct_phrase(self.inflation)} "
                f"[{_signed(lo)}, {_signed(hi)}]")
        if self.between:
            head += f"; between-sitting spread {100 * self.between:.1f} % allowed"
        if self.look:
            head += f"; look {self.look}"
        return head

    def describe(self) -> str:
        """`claimed 1.25x, measured 1.02x [0.98, 1.06]: overstated by 23 % [18 %, 27 %]; ...`"""
        head = self.describe_interval()
        tol = f"{100 * self.tolerance:g} %"
        conf = f"{100 * self.confidence:g} %"
        if self.decision == "refuted":
            return f"{head}; overstated by more than the {tol} tolerance with {conf} confidence"
        if self.decision == "confirmed":
            return f"{head}; consistent with the claim: the estimate is within the {tol} tolerance"
        if self.more_runs is None:
            limit = ("the allowance for the spread between sittings and the claim's own runs "
                     "limit the precision" if self.between else
                     "the claim's own runs limit the precision")
            return (f"{head}; beyond the {tol} tolerance but not with {conf} confidence, and more "
                    f"runs here would not decide ({limit})")
        return (f"{head}; beyond the {tol} tolerance but not with {conf} confidence; about "
                f"{self.more_runs} more run(s) here would decide")


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _signed(ratio: float) -> str:
    return f"{100 * (ratio - 1):+.0f} %"


def _pct_phrase(ratio: float) -> str:
    if ratio >= 1:
        return f"overstated by {100 * (ratio - 1):.0f} %"
    return f"understated by {100 * (1 - ratio):.0f} %"


# ---- Student's t ---------------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        step = d * c
        h *= step
        if abs(step - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` > 0 degrees of freedom."""
    if not df > 0 or math.isnan(t):
        raise StatsError("student_t_cdf needs df > 0 and a number t")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@lru_cache(maxsize=4096)
def student_t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (bisection on the CDF; |t| <= 1e6)."""
    if not 0.0 < p < 1.0:
        raise StatsError("student_t_quantile needs 0 < p < 1")
    if p == 0.5:
        return 0.0
    lo, hi = -1e6, 1e6
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if student_t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, abs(mid)):
            break
    return 0.5 * (lo + hi)


# ---- the test -------------------------------------------------------------------------------


def _logs(values: Sequence[float], what: str) -> list[float]:
    limit = max_runs()
    if not 1 <= len(values) <= limit:
        raise StatsError(f"{what}: need between 1 and {limit} runs, got {len(values)}")
    out = []
    for v in values:
        if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
            raise StatsError(f"{what}: every speed-up must be a finite number > 0, got {v!r}")
        out.append(math.log(v))
    return out


def _mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs)


def _sd(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return 0.0
    mu = _mean(xs)
    return math.sqrt(math.fsum((x - mu) ** 2 for x in xs) / (len(xs) - 1))


def _decide(d: float, half: float, limit: float) -> Decision:
    if d - half > limit:
        return "refuted"
    if d <= limit:
        return "confirmed"
    return "inconclusive"


def _half(level: float, sigma: float, m: int, n: int, between: float) -> float:
    """The one-sided half-width at `level` (see the module docstring)."""
    within = student_t_quantile(level, n - 1) * sigma * math.sqrt(1 / m + 1 / n)
    if not between:
        return within
    return math.hypot(within, NormalDist().inv_cdf(level) * between)


def look_confidence(confidence: float, look: int) -> float:
    """The confidence look `look` tests at: 1 - (1 - confidence) / 2^look (0: no spending)."""
    if look <= 0:
        return confidence
    return 1.0 - (1.0 - confidence) / (2.0 ** min(look, 60))


def _fewest_more(n: int, decides: Callable[[int], bool]) -> int | None:
    """Fewest further runs (1.._MAX_EXTRA) after `n` for which `decides(total runs)` holds;
    None when none does."""
    return next((extra for extra in range(1, _MAX_EXTRA + 1) if decides(n + extra)), None)


def _more_runs(d: float, n: int, limit: float, half_at: Callable[[int], float]) -> int | None:
    """Fewest further runs here that would refute, if `d` and the spread stayed as they are;
    `half_at(total)`: the half-width after `total` runs here."""
    return _fewest_more(n, lambda total: _decide(d, half_at(total), limit) != "inconclusive")


def inflation_test(
    claimed: Sequence[float], measured: Sequence[float],
    tolerance: float = DEFAULT_TOLERANCE, confidence: float = DEFAULT_CONFIDENCE,
    between: float = 0.0, look: int = 0,
) -> InflationTest:
    """Compare claimed and re-measured per-run speed-ups (see the module docstring).

    `between`: the between-sitting spread allowed for; `look`: which sequential look this
    is (its confidence is spent as the docstring says; 0: a single test). One measured run
    cannot estimate the spread: the decision is then inconclusive. Raises StatsError for
    unusable inputs.
    """
    if not (isinstance(between, int | float) and 0.0 <= between <= 1.0):
        raise StatsError(f"between must be a spread between 0 and 1 (log units), got {between!r}")
    if not (isinstance(look, int) and 0 <= look <= 60):
        raise StatsError(f"look must be between 0 and 60, got {look!r}")
    if not (isinstance(tolerance, int | float) and 0.0 <= tolerance <= 1.0):
        raise StatsError(f"tolerance must be between 0 and 1 (a fraction), got {tolerance!r}")
    if not (isinstance(confidence, int | float) and 0.5 <= confidence < 1.0):
        raise StatsError(f"confidence must be at least 0.5 and below 1, got {confidence!r}")
    lc, lm = _logs(claimed, "claimed"), _logs(measured, "measured")
    m, n = len(lc), len(lm)
    d = _mean(lc) - _mean(lm)
    sigma = max(_sd(lm), SIGMA_FLOOR)
    limit = math.log1p(tolerance)
    if n < 2:
        half = math.inf
        m_half = math.inf
        decision: Decision = "inconclusive"
        more: int | None = 1
    else:
        level = look_confidence(confidence, look)
        half = _half(level, sigma, m, n, between)
        m_half = student_t_quantile(level, n - 1) * sigma / math.sqrt(n)
        decision = _decide(d, half, limit)
        more = (_more_runs(d, n, limit, lambda total: _half(level, sigma, m, total, between))
                if decision == "inconclusive" else None)
    mu = _mean(lm)
    return InflationTest(
        claimed=math.exp(_mean(lc)), measured=math.exp(mu), claimed_runs=m, measured_runs=n,
        inflation=math.exp(d), inflation_interval=(_exp(d - half), _exp(d + half)),
        measured_interval=(_exp(mu - m_half), _exp(mu + m_half)), sigma=sigma,
        tolerance=float(tolerance), confidence=float(confidence), decision=decision,
        more_runs=more, between=float(between), look=look)


def runs_to_confirm(test: InflationTest, limit: float) -> int | None:
    """Fewest further runs here after which `test`'s whole interval of the overstatement
    would lie within `limit` (a ratio: 1 + the tolerance, less any shift allowed for
    conditions), if its estimate and spread stayed as they are; at the look's confidence and
    with its between-sitting allowance. 0 when it already does; None when no count up to
    _MAX_EXTRA would (the estimate is beyond `limit`, or the claim's own runs or the
    allowance limit the precision). Where `inflation_test`'s `more_runs` says how many runs
    would refute, this says how many would confirm: an honest claim measured in too few
    runs here is measured further instead of left undecided. Pure."""
    if not (isinstance(limit, int | float) and limit > 0 and math.isfinite(limit)):
        raise StatsError(f"limit must be a finite positive ratio, got {limit!r}")
    if test.inflation <= 0 or test.measured_runs < 1:
        raise StatsError("the test has no usable estimate")
    d, top = math.log(test.inflation), math.log(limit)
    level = look_confidence(test.confidence, test.look)
    m, n = test.claimed_runs, test.measured_runs

    def within(total: int) -> bool:
        return d + _half(level, test.sigma, m, total, test.between) <= top

    if n >= 2 and within(n):
        return 0
    return None if d > top else _fewest_more(n, within)


def _exp(x: float) -> float:
    if x == -math.inf:
        return 0.0
    return math.exp(min(x, 700.0)) if math.isfinite(x) else 1e300


def simulated_rates(  # noqa: PLR0913 (the knobs of a simulation, as inflation_test takes them)
    inflation: float, sigma: float, runs: int, trials: int, seed: int = 0,
    tolerance: float = DEFAULT_TOLERANCE, confidence: float = DEFAULT_CONFIDENCE,
) -> dict[Decision, float]:
    """Share of each decision when claims inflated by `inflation` meet honest re-measurements.

    Both sides draw `runs` log-normal speed-ups with between-run spread `sigma`; the
    claim's are multiplied by `inflation` (1.0: honest). Deterministic for a seed.
    """
    if not 1 <= trials <= 1_000_000:
        raise StatsError("trials must be between 1 and 1,000,000")
    rng = random.Random(seed)
    counts: dict[Decision, int] = {"confirmed": 0, "refuted": 0, "inconclusive": 0}
    for _ in range(trials):
        claim = [inflation * math.exp(rng.gauss(0.0, sigma)) for _ in range(runs)]
        here = [math.exp(rng.gauss(0.0, sigma)) for _ in range(runs)]
        counts[inflation_test(claim, here, tolerance, confidence).decision] += 1
    return {k: v / trials for k, v in counts.items()}


def sequential_test(
    claimed: Sequence[float], batches: Sequence[Sequence[float]],
    tolerance: float = DEFAULT_TOLERANCE, confidence: float = DEFAULT_CONFIDENCE,
    between: float = 0.0,
) -> InflationTest:
    """Test after each batch of measured runs (look 1, 2, ...), stopping at the first
    decision; the last look's test when none decides. The measured runs accumulate, capped
    at `max_runs()` (later batches are ignored past it)."""
    if not batches:
        raise StatsError("a sequential test needs at least one batch of measured runs")
    runs: list[float] = []
    test: InflationTest | None = None
    for look, batch in enumerate(batches[:MAX_LOOKS], start=1):
        runs = (runs + list(batch))[:max_runs()]
        test = inflation_test(claimed, runs, tolerance, confidence, between, look)
        if test.decision != "inconclusive":
            break
    assert test is not None
    return test


@dataclass(frozen=True)
class Sittings:
    """Simulated sittings of a sequential reproduction: the claim's `claimed_runs`
    log-normal runs multiplied by `inflation`, then up to `looks` batches of `batch` runs
    here, every run with between-run spread `sigma`; `shift` (log units) moves the whole
    sitting here, as another day's load would."""

    inflation: float
    sigma: float
    claimed_runs: int
    batch: int
    looks: int
    shift: float = 0.0


def simulated_sequential_rates(
    sittings: Sittings, trials: int, seed: int = 0, tolerance: float = DEFAULT_TOLERANCE,
    confidence: float = DEFAULT_CONFIDENCE, between: float = 0.0,
) -> dict[Decision, float]:
    """Share of each decision of `sequential_test` on `trials` simulated `sittings`,
    stopping at the first decision (optional stopping). Deterministic for a seed."""
    if not 1 <= trials <= 1_000_000:
        raise StatsError("trials must be between 1 and 1,000,000")
    rng = random.Random(seed)
    sim = sittings
    counts: dict[Decision, int] = {"confirmed": 0, "refuted": 0, "inconclusive": 0}
    for _ in range(trials):
        claim = [sim.inflation * math.exp(rng.gauss(0.0, sim.sigma))
                 for _ in range(sim.claimed_runs)]
        here = [[math.exp(sim.shift + rng.gauss(0.0, sim.sigma)) for _ in range(sim.batch)]
                for _ in range(sim.looks)]
        counts[sequential_test(claim, here, tolerance, confidence, between).decision] += 1
    return {k: v / trials for k, v in counts.items()}
