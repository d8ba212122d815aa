"""Parsers and limits of the log server: query integers, digests, strict JSON, the rate limiter, config."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.server import ApiError, ServerConfig
from ledger.server._admit import parse_json
from ledger.server._budget import Budget, SharedBuckets
from ledger.server._params import MAX_INT, hex64, parse_int


@given(st.integers(0, MAX_INT))
def test_parse_int_accepts_canonical_decimals(n: int) -> None:
    assert parse_int(str(n), "n") == n


@given(st.text(max_size=25))
def test_parse_int_accepts_nothing_else(text: str) -> None:
    canonical = text.isascii() and text.isdigit() and (text == "0" or not text.startswith("0"))
    if canonical and int(text) <= MAX_INT:
        assert parse_int(text, "n") == int(text)
    else:
        with pytest.raises(ApiError) as info:
            parse_int(text, "n")
        assert info.value.status == 400 and "n" in info.value.message


def test_parse_int_bounds() -> None:
    with pytest.raises(ApiError, match="between 1 and 5"):
        parse_int("6", "limit", 1, 5)
    with pytest.raises(ApiError, match="between 1 and 5"):
        parse_int("0", "limit", 1, 5)


@given(st.text(max_size=70))
def test_hex64_only_lowercase_64_hex(text: str) -> None:
    ok = len(text) == 64 and all(c in "0123456789abcdef" for c in text)
    if ok:
        assert hex64(text, "digest") == text
    else:
        with pytest.raises(ApiError):
            hex64(text, "digest")


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids), max_leaves=10))
def test_parse_json_round_trips_plain_json(value: object) -> None:
    import json

    assert parse_json(json.dumps(value).encode()) == value


@pytest.mark.parametrize("body", [b'{"a":1,"a":2}', b"[NaN]", b"[Infinity]", b"\xff", b"{", b"[1]]",
                                  b"[" * 100_000])
def test_parse_json_rejects(body: bytes) -> None:
    with pytest.raises(ApiError) as info:
        parse_json(body)
    assert info.value.code == "malformed_json"


@given(st.lists(st.tuples(st.floats(0, 5), st.integers(1, 3)), max_size=60))
def test_rate_limiter_never_exceeds_burst_plus_refill(steps: list[tuple[float, int]]) -> None:
    rate, burst = 2.0, 5.0
    limiter, budget = SharedBuckets(None), Budget("b", rate, burst)
    now = 0.0
    granted = 0
    for dt, cost in steps:
        now += dt
        if limiter.take(budget, "client", cost, now) == 0:
            granted += cost
        assert granted <= burst + rate * now + 1e-9


def test_rate_limiter_retry_after_and_isolation() -> None:
    limiter, b = SharedBuckets(None), Budget("b", 1.0, 2.0)
    assert limiter.take(b, "a", 1, 0.0) == 0 and limiter.take(b, "a", 1, 0.0) == 0
    wait = limiter.take(b, "a", 1, 0.0)
    assert wait == pytest.approx(1.0)
    assert limiter.take(b, "b", 1, 0.0) == 0, "another address has its own bucket"
    assert limiter.take(b, "a", 1, 1.0) == 0
    assert limiter.take(b, "a", 3, 5.0) == float("inf"), "more than the burst never fits"
    assert limiter.take(Budget("other", 1.0, 2.0), "a", 2, 1.0) == 0, "budgets are apart"


def test_budgets_in_one_file_are_shared_by_every_process_that_maps_it(tmp_path: Path) -> None:
    # Issue 26 row 7: each worker had its own bucket, so N workers granted N budgets.
    import multiprocessing

    path = tmp_path / "budgets.bin"
    b = Budget("bytes", 1e-6, 100.0)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        granted = sum(pool.starmap(_take_many, [(str(path), 10)] * 4))
    assert granted == 10  # 4 processes x 10 takes of 10 from one bucket of 100
    assert SharedBuckets(path).take(b, "a", 10.0) > 0


def test_budgets_file_in_a_folder_not_made_yet(tmp_path: Path) -> None:
    # A PostgreSQL frontend started with --key from elsewhere has no data folder of its own:
    # its workers failed to boot on budgets.bin (docs/operating.md's second frontend refused).
    buckets = SharedBuckets(tmp_path / "front2" / "budgets.bin")
    try:
        assert buckets.take(Budget("b", 1.0, 2.0), "a", 1.0) == 0
    finally:
        buckets.close()
    assert (tmp_path / "front2" / "budgets.bin").is_file()


def _take_many(path: str, n: int) -> int:
    buckets = SharedBuckets(Path(path))
    got = sum(buckets.take(Budget("bytes", 1e-6, 100.0), "a", 10.0) == 0 for _ in range(n))
    buckets.close()
    return got


def test_server_config_round_trip_and_limits() -> None:
    cfg = ServerConfig(data_dir="/x", origin="a.example/log", max_batch=10)
    assert ServerConfig.from_json(cfg.to_json()) == cfg
    assert ServerConfig(write_token="t").to_json()["write_token"] == "***"
    for bad in ({"max_entry_bytes": 70000}, {"max_batch": 0}, {"rate_per_second": 0.0},
                {"max_blob_bytes": 0}):
        with pytest.raises(ValueError):
            ServerConfig(**bad)  # type: ignore[arg-type]
