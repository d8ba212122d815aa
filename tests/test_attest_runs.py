"""benchmark/v1 and reproduction/v1 schema_version 2: runs, policy, statistics; old entries decode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from attest import (
    BENCHMARK_V1,
    REPRODUCTION_V1,
    BenchmarkPredicate,
    ReproductionPredicate,
    ValidationError,
    parse_predicate,
)
from attest import examples as ex
from attest.entry import decode_entry, verify_entry

OLD_ENTRY = Path(__file__).resolve().parent / "vectors" / "benchmark-v1-schema1-entry.json"


def _norm(obj: Any) -> Any:
    return json.loads(json.dumps(obj), parse_int=float)


@pytest.mark.parametrize("make,ptype", [(ex.benchmark_runs, BENCHMARK_V1),
                                        (ex.reproduction_v2, REPRODUCTION_V1)])
def test_version_2_round_trip(make: Any, ptype: str) -> None:
    body = make()
    pred = parse_predicate(ptype, body)
    assert _norm(pred.to_json()) == _norm(body)
    assert type(pred).from_json(json.loads(json.dumps(pred.to_json()))) == pred


def test_version_1_bodies_encode_as_before() -> None:
    for make, ptype in ((ex.benchmark, BENCHMARK_V1), (ex.reproduction, REPRODUCTION_V1)):
        body = make()
        pred = parse_predicate(ptype, body)
        assert "schema_version" not in pred.to_json()
        assert _norm(pred.to_json()) == _norm(body)


def test_run_speedups() -> None:
    two = parse_predicate(BENCHMARK_V1, ex.benchmark_runs((1.0, 1.5)))
    one = parse_predicate(BENCHMARK_V1, ex.benchmark())
    assert isinstance(two, BenchmarkPredicate) and isinstance(one, BenchmarkPredicate)
    assert two.results[0].run_speedups() == (1.0, 1.5)
    assert one.results[0].run_speedups() == (2.1,)


def _bad(ptype: str, body: dict[str, Any], where: str, words: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_predicate(ptype, body)
    assert where in str(err.value) and words in str(err.value), str(err.value)


def test_inconsistent_runs_are_rejected() -> None:
    body = ex.benchmark_runs()
    body["method"]["runs"] = 4
    _bad(BENCHMARK_V1, body, "results[0].runs", "method.runs = 4")
    body = ex.benchmark_runs()
    del body["results"][0]["runs"]
    _bad(BENCHMARK_V1, body, "results[0].runs", "required")
    body = ex.benchmark_runs()
    del body["method"]["runs"]
    _bad(BENCHMARK_V1, body, "method.runs", "required")
    body = ex.benchmark_runs()
    del body["schema_version"]
    _bad(BENCHMARK_V1, body, "results[0].runs", "needs schema_version 2")
    body = ex.benchmark_runs()
    body["schema_version"] = 3
    _bad(BENCHMARK_V1, body, "schema_version", "")
    body = ex.benchmark_runs(tuple(1.0 for _ in range(65)))
    _bad(BENCHMARK_V1, body, "runs", "64")
    body = ex.benchmark_runs()
    body["results"][0]["runs"][1]["speedup"] = float("nan")
    _bad(BENCHMARK_V1, body, "results[0].runs[1].speedup", "")


def test_policy_is_checked_and_tied_to_version_2() -> None:
    body = ex.reproduction_v2()
    body["policy"]["confidence"] = 1.0
    _bad(REPRODUCTION_V1, body, "policy.confidence", "below 1")
    body = ex.reproduction_v2()
    body["policy"]["tolerance"] = 2.0
    _bad(REPRODUCTION_V1, body, "policy.tolerance", "between 0 and 1")
    body = ex.reproduction_v2()
    del body["policy"]
    _bad(REPRODUCTION_V1, body, "policy", "required with schema_version 2")
    body = ex.reproduction()
    body["policy"] = ex.reproduction_v2()["policy"]
    _bad(REPRODUCTION_V1, body, "policy", "only allowed")
    body = ex.reproduction_v2()
    body["claims"][0]["environment_diff"][0]["field"] = "cpu model!"
    _bad(REPRODUCTION_V1, body, "environment_diff[0].field", "environment field")
    body = ex.reproduction_v2()
    body["claims"][0]["statistics"]["measured_runs"] = 0
    _bad(REPRODUCTION_V1, body, "statistics.measured_runs", "")


def test_a_stored_pre_runs_entry_still_decodes_and_verifies() -> None:
    entry = decode_entry(OLD_ENTRY.read_bytes())
    verified = verify_entry(entry)
    pred = verified.statement.predicate
    assert isinstance(pred, BenchmarkPredicate)
    assert pred.schema_version == 1 and pred.method.runs is None
    (result,) = pred.results
    assert result.runs is None and result.run_speedups() == (result.speedup,)


def test_reproduction_predicate_typed_fields() -> None:
    pred = parse_predicate(REPRODUCTION_V1, ex.reproduction_v2())
    assert isinstance(pred, ReproductionPredicate)
    assert pred.policy is not None and pred.policy.tolerance == 0.05
    stats = pred.claims[0].statistics
    assert stats is not None and stats.claimed_runs == 5 and stats.more_runs is None
    diff = pred.claims[0].environment_diff
    assert diff is not None and diff[0].field == "libraries.numpy" and not diff[0].hardware
