"""One benchmark shape's verdict from typed values: the policy, the runs, the environments.

Pure. The verdict comes from `verifier.stats.inflation_test` (and from whether the
measurement here could be trusted); the reason text is rendered from the same typed
values afterwards, never read back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from attest.predicates import DecisionPolicy, Environment, EnvironmentDiff, SpeedupStatistics
from verifier.benchmark import Apart
from verifier.stats import (
    DEFAULT_CONFIDENCE,
    DEFAULT_TOLERANCE,
    SIGMA_BETWEEN,
    Decision,
    InflationTest,
    StatsError,
    inflation_test,
)

__all__ = [
    "DEFAULT_POLICY",
    "ENV_FIELDS",
    "HARDWARE_FIELDS",
    "SpeedupVerdict",
    "environment_diff",
    "make_policy",
    "same_hardware",
    "speedup_verdict",
]

TEST_NAME = "log-speedup-t"
HARDWARE_FIELDS = ("cpu_model", "cpu_flags", "cores", "machine", "gpu")
"""Fields that make two environments different hardware (a slower re-measurement there
cannot refute). cpu_flags count: a missing AVX-512 changes which code runs."""
ENV_FIELDS = (*HARDWARE_FIELDS, "gpu_driver", "compiler", "os", "python")
MAX_DIFF_CHARS = 512


def make_policy(tolerance: float = DEFAULT_TOLERANCE,
                confidence: float = DEFAULT_CONFIDENCE) -> DecisionPolicy:
    """A checked decision policy (attest validates the ranges)."""
    return DecisionPolicy.from_json({"tolerance": float(tolerance), "confidence": float(confidence),
                                     "test": TEST_NAME}, "policy")


DEFAULT_POLICY = make_policy()


def _render(value: Any) -> str:
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return "null" if value is None else str(value)


def environment_diff(claimed: Environment, measured: Environment) -> tuple[EnvironmentDiff, ...]:
    """Every environment field that differs (at most 32).

    CPU flags are compared as sets ("+avx512f" only here, "-sve" only in the claim);
    libraries one by one ("libraries.numpy").
    """
    out: list[EnvironmentDiff] = []

    def add(name: str, a: Any, b: Any) -> None:
        out.append(EnvironmentDiff(field=name, hardware=name in HARDWARE_FIELDS,
                                   claimed=_render(a)[:MAX_DIFF_CHARS],
                                   measured=_render(b)[:MAX_DIFF_CHARS]))

    for name in ENV_FIELDS:
        a, b = getattr(claimed, name), getattr(measured, name)
        if name == "cpu_flags":
            fa, fb = set(a), set(b)
            if fa != fb:
                add(name, sorted(fa - fb), sorted(fb - fa))
        elif a != b:
            add(name, a, b)
    la, lb = claimed.libraries, measured.libraries
    for lib in sorted(set(la) | set(lb)):
        if la.get(lib) != lb.get(lib):
            add(f"libraries.{lib}", la.get(lib), lb.get(lib))
    return tuple(out[:32])


def same_hardware(diff: Sequence[EnvironmentDiff]) -> bool:
    return not any(d.hardware for d in diff)


def _hardware_phrase(diff: Sequence[EnvironmentDiff]) -> str:
    if not diff:
        return "same environment"
    parts = [f"{d.field} {d.claimed!r} claimed, {d.measured!r} here" for d in diff]
    kind = "different hardware" if not same_hardware(diff) else "same hardware, different software"
    return f"{kind} ({'; '.join(parts)})"[:600]


@dataclass(frozen=True)
class SpeedupVerdict:
    """A shape's verdict, the test behind it (None when no test ran) and its reason."""

    decision: Decision
    test: InflationTest | None
    reason: str

    def statistics(self) -> SpeedupStatistics | None:
        """The test's typed outcome as the claim records it (None when no test ran)."""
        t = self.test
        if t is None:
            return None
        return SpeedupStatistics(
            claimed_runs=t.claimed_runs, measured_runs=t.measured_runs, inflation=t.inflation,
            inflation_interval=t.inflation_interval, measured_interval=t.measured_interval,
            sigma=t.sigma, more_runs=None if t.more_runs is None else min(t.more_runs, 1000),
            between=t.between or None, look=t.look or None)


def speedup_verdict(claimed_runs: Sequence[float], measured_runs: Sequence[float], trusted: bool,
                    untrusted_why: str, diff: Sequence[EnvironmentDiff],
                    policy: DecisionPolicy = DEFAULT_POLICY, *, look: int = 1,
                    between: float = SIGMA_BETWEEN,
                    conditions: Sequence[Apart] = ()) -> SpeedupVerdict:
    """The verdict on one shape's speed-up claim.

    A measurement distrusted for noise is inconclusive; on different hardware a
    refutation becomes inconclusive (the ratio itself may differ there), and a refutation
    or a confirmation does when the two sittings' conditions are apart in a way the
    between-sitting margin was not measured to cover (`conditions`: each difference, named
    in the reason either way; see `verifier.benchmark._conditions.ALLOWED_FOR`). `look` is the sequential look (see
    `verifier.stats`); `between` the between-sitting spread allowed for.
    """
    hw = _hardware_phrase(diff)
    if not trusted:
        return SpeedupVerdict("inconclusive", None,
                              f"measurement here not trusted: {untrusted_why}; {hw}")
    try:
        test = inflation_test(claimed_runs, measured_runs, policy.tolerance, policy.confidence,
                              between, look)
    except StatsError as exc:
        return SpeedupVerdict("inconclusive", None, f"the claim cannot be tested: {exc}; {hw}")
    text = test.describe()
    if test.decision == "refuted" and not same_hardware(diff):
        return SpeedupVerdict("inconclusive", test,
                              f"{text}; but this is {hw}, which may explain a slower ratio")
    covered = [a.describe() for a in conditions if not a.blocks]
    if covered:
        text += (f"; measured under other conditions ({'; '.join(covered)}), which the "
                 "between-sitting margin allows for")
    blocking = [a.describe() for a in conditions if a.blocks]
    if test.decision != "inconclusive" and blocking:
        # either way: a busier sitting here can raise a speed-up as well as lower it
        what = "refute" if test.decision == "refuted" else "confirm"
        return SpeedupVerdict("inconclusive", test,
                              f"{text}; but the claim was measured under conditions too "
                              f"different from these to {what} it ({'; '.join(blocking)}); "
                              f"{hw}")
    return SpeedupVerdict(test.decision, test, f"{text}; {hw}")
