"""A torch check calls a group of calls a hang only after a time scaled to how slow its calls
have been (`Gathered.timeout_s`): on a loaded machine a big problem's calls are slow, not
hung. Run on injected clocks, never on a timing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import verifier.checks._torch_gathered as gathered
from verifier.checks._torch_gathered import (
    CALL_TIMEOUT_S,
    HANG_FACTOR,
    MAX_CALL_TIMEOUT_S,
    Gathered,
)


class _Session:
    """Stands in for a TorchSession: each run takes `seconds` on the injected clock."""

    def __init__(self, clock: list[float], seconds: list[float]) -> None:
        self.clock, self.seconds, self.asked = clock, seconds, []  # type: list[float]

    def run(self, calls: list[Any], timeout_s: float, threads: int = 1,
            escapes: Any = None) -> list[Any]:
        self.asked.append(timeout_s)
        self.clock[0] += self.seconds.pop(0)
        return []


def test_a_slow_machine_gives_later_groups_time_in_proportion(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(gathered.time, "monotonic", lambda: clock[0])
    # six calls that took 3 s each on a loaded machine, then eight concurrency calls
    session = _Session(clock, [18.0, 30.0, 1.0])
    run = Gathered(session, np.random.default_rng(0))  # type: ignore[arg-type]
    run.calls("correctness.random", [object()] * 6, "seeds")
    run.calls("concurrency", [object()] * 8, "two threads", threads=2)
    assert session.asked[0] == CALL_TIMEOUT_S  # nothing measured yet: the floor
    assert session.asked[1] == HANG_FACTOR * 3.0 * 8  # 480 s, not 60 s
    assert run.per_call_s == pytest.approx(3.75)
    # bounded: however slow the calls were, a hang is called within MAX_CALL_TIMEOUT_S
    run.calls("large", [object()] * 50, "large")
    assert session.asked[2] == MAX_CALL_TIMEOUT_S


def test_a_quiet_machine_keeps_the_floor() -> None:
    run = Gathered(None, np.random.default_rng(0))  # type: ignore[arg-type]
    run.per_call_s = 0.05
    assert run.timeout_s(8) == CALL_TIMEOUT_S
