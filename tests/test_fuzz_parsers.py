"""Every parser under hypothesis: only our typed errors, and parse -> serialize round trips.

The targets and their properties are in `tests/fuzz_targets.py`; inputs are random bytes and
mutations (flips, insertions, deletions, truncations) of the checked-in seeds. Each target
runs a few hundred examples here (about a second); `tests/fuzz_atheris.py` runs the same
targets for as long as you like (docs/development.md, "Fuzzing").
"""

from __future__ import annotations

import pytest
from fuzz_targets import TARGETS, TYPED, corpus, run_one
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = 300


@st.composite
def _mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.integers(0, 3))
        pos = draw(st.integers(0, len(data)))
        if op == 0 and data:
            data[min(pos, len(data) - 1)] ^= 1 << draw(st.integers(0, 7))
        elif op == 1:
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == 2:
            del data[pos:pos + draw(st.integers(1, 16))]
        else:
            del data[pos:]
    return bytes(data)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_seed_parses_and_round_trips(name: str) -> None:
    seeds = corpus(name)
    assert seeds, f"tests/fuzz_corpus/{name} is empty"
    for seed in seeds:
        run_one(name, seed)  # a round-trip failure raises AssertionError here
    parsed = 0
    for seed in seeds:
        try:
            TARGETS[name](seed)
            parsed += 1
        except TYPED:
            pass
    assert parsed >= 1, f"no seed of {name} parses: the target would only test rejection"


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_fuzzed_input_gives_a_typed_error_or_a_round_trip(name: str) -> None:
    seeds = corpus(name)

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.one_of(_mutated(seeds), st.binary(max_size=512)))
    def check(data: bytes) -> None:
        run_one(name, data)

    check()
