"""attest.predicates and attest.statement: round trips, strict validation, published schemas."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attest import (
    BENCHMARK_V1,
    KERNEL_V1,
    REPRODUCTION_V1,
    VERIFICATION_V1,
    BenchmarkPredicate,
    KernelPredicate,
    ReproductionPredicate,
    Statement,
    Subject,
    ValidationError,
    VerificationPredicate,
    make_statement,
    parse_predicate,
    parse_statement_payload,
    statement_payload,
)
from attest import examples as ex
from attest import predicates as p

BODIES: dict[str, Callable[[], dict[str, Any]]] = {
    KERNEL_V1: ex.kernel, BENCHMARK_V1: lambda: ex.benchmark(10),
    VERIFICATION_V1: ex.verification, REPRODUCTION_V1: ex.reproduction, p.SUITE_V1: ex.suite,
}
CLASSES = {KERNEL_V1: KernelPredicate, BENCHMARK_V1: BenchmarkPredicate,
           VERIFICATION_V1: VerificationPredicate, REPRODUCTION_V1: ReproductionPredicate,
           p.SUITE_V1: p.SuitePredicate}


def normalized(obj: Any) -> Any:
    """JSON equality that treats 2 and 2.0 alike (as RFC 8785 does)."""
    return json.loads(json.dumps(obj), parse_int=float)


@pytest.mark.parametrize("ptype", list(BODIES))
def test_predicate_round_trip(ptype: str) -> None:
    body = BODIES[ptype]()
    pred = parse_predicate(ptype, body)
    assert isinstance(pred, CLASSES[ptype])
    assert ptype == pred.PREDICATE_TYPE
    assert normalized(pred.to_json()) == normalized(body)
    assert type(pred).from_json(pred.to_json()) == pred
    assert type(pred).from_json(json.loads(json.dumps(pred.to_json()))) == pred


NESTED: list[tuple[type[Any], Callable[[], Any]]] = [
    (p.Environment, ex.environment),
    (p.SourceFile, lambda: ex.kernel()["sources"][0]),
    (p.BuildRecipe, lambda: ex.kernel()["build"]),
    (p.Generator, lambda: ex.kernel()["generator"]),
    (p.Target, lambda: ex.kernel()["target"]),
    (p.Workload, lambda: ex.benchmark(3)["workload"]),
    (p.Method, lambda: ex.benchmark()["method"]),
    (p.BenchmarkResult, lambda: ex.benchmark()["results"][0]),
    (p.BlobRef, lambda: ex.benchmark()["samples"]),
    (p.Check, lambda: ex.verification()["checks"][0]),
    (p.CheckInputs, lambda: ex.verification()["checks"][0]["inputs"]),
    (p.CheckInputs, lambda: ex.verification()["checks"][1]["inputs"]),
    (p.CheckInputs, dict),
    (p.Check, lambda: ex.verification()["checks"][2]),
    (p.ReproductionTarget, lambda: ex.reproduction()["target"]),
    (p.ClaimResult, lambda: ex.reproduction()["claims"][0]),
    (p.ClaimResult, lambda: ex.reproduction()["claims"][1]),
    (p.JudgedEntry, lambda: ex.reproduction()["claims"][0]["entry"]),
    (p.Measurement, lambda: ex.reproduction()["claims"][0]["measured"]),
    (p.Measurement, dict),
]


@pytest.mark.parametrize(("cls", "make"), NESTED)
def test_nested_round_trip(cls: Any, make: Callable[[], Any]) -> None:
    body = make()
    obj = cls.from_json(body)
    assert normalized(obj.to_json()) == normalized(body)
    assert cls.from_json(obj.to_json()) == obj


@pytest.mark.parametrize("ptype", list(BODIES))
def test_statement_round_trip(ptype: str) -> None:
    pred = parse_predicate(ptype, BODIES[ptype]())
    stmt = make_statement(ex.KERNEL_NAME, ex.SOURCE_SHA256, pred)
    doc = stmt.to_json()
    assert doc["_type"] == "https://in-toto.io/Statement/v1"
    assert doc["subject"] == [{"name": ex.KERNEL_NAME, "digest": {"sha256": ex.SOURCE_SHA256}}]
    assert doc["predicateType"] == ptype
    assert Statement.from_json(doc) == stmt
    payload = statement_payload(stmt)
    assert parse_statement_payload(payload) == stmt
    assert Subject.from_json(doc["subject"][0]) == stmt.subjects[0]


Edit = Callable[[dict[str, Any]], None]


def setp(path: list[Any], value: Any) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        target: Any = doc
        for step in path[:-1]:
            target = target[step]
        if value is KeyError:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return edit


def swap_ci(doc: dict[str, Any]) -> None:
    doc["results"][2]["speedup_ci95"] = [2.5, 1.5]


def claim_3x(doc: dict[str, Any]) -> None:
    """Issue 16's claim: 3x [2.8, 3.2] while its own medians give 1.054x."""
    doc["results"][0].update(speedup=3.0, speedup_ci95=[2.8, 3.2], baseline_median_ns=1054.0)


def test_speedup_within_rounding_of_its_medians_is_accepted() -> None:
    doc = ex.benchmark(3)
    doc["results"][0]["baseline_median_ns"] = 2104.0  # 2.104x, logged rounded as 2.1
    doc["results"][1]["median_ns"] = doc["results"][1]["p5_ns"] = 0.5  # under 1 ns counts as 1
    doc["results"][1]["baseline_median_ns"] = 2.1
    doc["results"][1]["gflops"] = 2 * 128**3 / 0.5  # GFLOP/s follow the real median
    assert parse_predicate(BENCHMARK_V1, doc).to_json() == doc
    doc["results"][0]["baseline_median_ns"] = 2160.0  # 2.16x is not 2.1x rounded
    with pytest.raises(ValidationError, match=r"results\[0\]\.speedup: is 2.1 but"):
        parse_predicate(BENCHMARK_V1, doc)


def test_inflated_gflops_are_refused() -> None:
    """Attack: a signed claim of 10x the GFLOP/s its own shape and median time give.
    matmul at 64^3 is 524,288 FLOP; in a median of 1,000 ns that is 524.288 GFLOP/s."""
    doc = ex.benchmark(1)
    assert doc["results"][0]["gflops"] == 524.288
    doc["results"][0]["gflops"] = 5242.88
    with pytest.raises(ValidationError) as info:
        parse_predicate(BENCHMARK_V1, doc)
    assert info.value.path == "predicate.results[0].gflops"
    assert str(info.value) == (
        "predicate.results[0].gflops: is 5243 but matmul at this shape is 5.243e+05 FLOP in "
        "median_ns = 1000, i.e. 524.3 GFLOP/s (more than 1% apart)")
    # understated figures are as wrong as inflated ones: the log keeps what was measured
    doc["results"][0]["gflops"] = 52.4288
    with pytest.raises(ValidationError, match=r"results\[0\]\.gflops: is 52.43 but"):
        parse_predicate(BENCHMARK_V1, doc)


def test_gflops_within_rounding_are_accepted_and_just_beyond_refused() -> None:
    doc = ex.benchmark(1)
    for ok in (524.288 * 1.0099, 524.288 / 1.0099, 524.0):  # logged to a few digits
        doc["results"][0]["gflops"] = ok
        assert parse_predicate(BENCHMARK_V1, doc).results[0].gflops == ok  # type: ignore[attr-defined]
    for bad in (524.288 * 1.0102, 524.288 * 0.9898):
        doc["results"][0]["gflops"] = bad
        with pytest.raises(ValidationError, match="more than 1% apart"):
            parse_predicate(BENCHMARK_V1, doc)


def test_gflops_of_a_zero_median_or_an_empty_shape_are_zero() -> None:
    doc = ex.benchmark(1)
    r = doc["results"][0]
    r["median_ns"] = r["p5_ns"] = 0.0
    r["baseline_median_ns"], r["gflops"] = 2.1, 0.0  # under 1 ns counts as 1 for the speed-up
    parse_predicate(BENCHMARK_V1, doc)
    r["gflops"] = 1.0
    with pytest.raises(ValidationError, match=r"i\.e\. 0 GFLOP/s"):
        parse_predicate(BENCHMARK_V1, doc)
    doc = ex.benchmark(1)
    doc["workload"]["shapes"] = [{"M": 0, "N": 64, "K": 64}]
    doc["results"][0]["shape"] = {"M": 0, "N": 64, "K": 64}
    with pytest.raises(ValidationError, match=r"is 524\.3 but matmul at this shape is 0 FLOP"):
        parse_predicate(BENCHMARK_V1, doc)
    doc["results"][0]["gflops"] = 0.0
    parse_predicate(BENCHMARK_V1, doc)


def test_a_catalogue_op_needs_its_own_dimensions() -> None:
    """Attack: dodge the FLOP count by naming the dimensions differently."""
    doc = ex.benchmark(1)
    doc["workload"]["shapes"] = [{"M": 64, "N": 64}]
    doc["results"][0]["shape"] = {"M": 64, "N": 64}
    with pytest.raises(ValidationError) as info:
        parse_predicate(BENCHMARK_V1, doc)
    assert str(info.value) == (
        "predicate.results[0].shape: op matmul takes dimensions M, N, K, got M, N")


def test_an_op_outside_the_catalogue_has_no_flop_count_to_check() -> None:
    doc = ex.benchmark(1)
    doc["workload"]["op"] = "conv2d"
    doc["results"][0]["gflops"] = 9999.0
    assert parse_predicate(BENCHMARK_V1, doc).workload.op == "conv2d"  # type: ignore[attr-defined]


INVALID: list[tuple[str, Edit, str]] = [
    # kernel/v1
    (KERNEL_V1, setp(["name"], "Acme/Matmul"), "predicate.name: must be a kernel name"),
    (KERNEL_V1, setp(["name"], "acme"), "predicate.name: must be a kernel name"),
    (KERNEL_V1, setp(["name"], "acme/" + "x" * 200), "predicate.name: must be at most 128"),
    (KERNEL_V1, setp(["runtime"], "fortran"), "predicate.runtime: must be one of 'c', 'cuda', 'triton', 'torch'"),
    (KERNEL_V1, setp(["abi_version"], 0), "predicate.abi_version: must be between 1"),
    (KERNEL_V1, setp(["abi_version"], True), "predicate.abi_version: must be an integer"),
    (KERNEL_V1, setp(["abi_version"], 1.0), "predicate.abi_version: must be an integer"),
    (KERNEL_V1, setp(["entry"], "bad name"), "predicate.entry: must be a C identifier"),
    (KERNEL_V1, setp(["sources"], []), "predicate.sources: must have at least 1"),
    (KERNEL_V1, setp(["sources", 0, "path"], "../etc/passwd"), "predicate.sources[0].path"),
    (KERNEL_V1, setp(["sources", 0, "path"], "/abs.c"), "predicate.sources[0].path"),
    (KERNEL_V1, setp(["sources", 0, "sha256"], "AB" * 32), "predicate.sources[0].sha256: must be 64 lowercase hex"),
    (KERNEL_V1, setp(["sources", 0, "sha256"], "ab" * 31), "predicate.sources[0].sha256"),
    (KERNEL_V1, lambda d: d["sources"].append(dict(d["sources"][0])), "predicate.sources[1].path: duplicate path"),
    (KERNEL_V1, setp(["build", "flags"], ["-O3"] * 65), "predicate.build.flags: must have at most 64"),
    (KERNEL_V1, setp(["build", "flags", 0], "-O3\n-evil"), "predicate.build.flags[0]: must not contain control"),
    (KERNEL_V1, setp(["generator", "prompt_sha256"], "xyz"), "predicate.generator.prompt_sha256"),
    (KERNEL_V1, setp(["generator", "extra"], 1), "predicate.generator.extra: unknown field"),
    (KERNEL_V1, setp(["target"], KeyError), "predicate.target: required field is missing"),
    (KERNEL_V1, setp(["parent"], 5), "predicate.parent: must be a string"),
    # benchmark/v1
    (BENCHMARK_V1, swap_ci, "predicate.results[2].speedup_ci95: must be [low, high] with low <= high"),
    (BENCHMARK_V1, setp(["results", 1, "speedup_ci95"], [1.0]), "predicate.results[1].speedup_ci95: must be [low, high]"),
    (BENCHMARK_V1, setp(["results", 0, "median_ns"], math.nan), "predicate.results[0].median_ns: must be a finite number"),
    (BENCHMARK_V1, setp(["results", 0, "median_ns"], math.inf), "predicate.results[0].median_ns: must be a finite number"),
    (BENCHMARK_V1, setp(["results", 0, "gflops"], -1.0), "predicate.results[0].gflops: must be >= 0"),
    (BENCHMARK_V1, setp(["results", 0, "speedup"], "2x"), "predicate.results[0].speedup: must be a number"),
    (BENCHMARK_V1, setp(["results", 0, "p95_ns"], 1.0), "predicate.results[0].median_ns: must lie within"),
    (BENCHMARK_V1, setp(["results", 0, "n"], 0), "predicate.results[0].n: must be between 1"),
    # issue 16: a claimed 3x whose own medians give 1.054x, and intervals missing their point
    (BENCHMARK_V1, claim_3x, "predicate.results[0].speedup: is 3 but its own medians give baseline_median_ns / median_ns = 1.054"),
    (BENCHMARK_V1, setp(["results", 0, "speedup"], 2.25), "predicate.results[0].speedup: is 2.25 but its own medians give"),
    (BENCHMARK_V1, setp(["results", 0, "speedup_ci95"], [2.2, 2.3]), "predicate.results[0].speedup_ci95: [2.2, 2.3] must contain the point estimate speedup = 2.1"),
    (BENCHMARK_V1, setp(["results", 0, "speedup_ci95"], [1.5, 2.0]), "predicate.results[0].speedup_ci95: [1.5, 2] must contain the point estimate"),
    (BENCHMARK_V1, setp(["results", 0, "shape"], {"M": 1}), "predicate.results[0].shape: is not one of workload.shapes"),
    (BENCHMARK_V1, setp(["results", 0, "shape", "M"], -1), 'predicate.results[0].shape.M: must be between 0'),
    (BENCHMARK_V1, setp(["results", 0, "shape"], {"bad key": 1}), "predicate.results[0].shape['bad key']: must be a dimension name"),
    (BENCHMARK_V1, setp(["workload", "dtype"], "int8"), "predicate.workload.dtype: must be one of"),
    (BENCHMARK_V1, setp(["workload", "shapes"], []), "predicate.workload.shapes: must have at least 1"),
    (BENCHMARK_V1, setp(["workload", "seed"], 2**60), "predicate.workload.seed: must be between 0"),
    (BENCHMARK_V1, setp(["method", "timer"], "time.time"), "predicate.method.timer: must be one of"),
    (BENCHMARK_V1, setp(["method", "interleaved"], "yes"), "predicate.method.interleaved: must be true or false"),
    (BENCHMARK_V1, setp(["samples", "media_type"], "json"), "predicate.samples.media_type"),
    (BENCHMARK_V1, setp(["samples", "size"], -5), "predicate.samples.size"),
    (BENCHMARK_V1, setp(["environment", "cores"], 0), "predicate.environment.cores: must be between 1"),
    (BENCHMARK_V1, setp(["environment", "gpu"], 3), "predicate.environment.gpu: must be a string"),
    (BENCHMARK_V1, setp(["environment", "libraries", "numpy"], 2), "predicate.environment.libraries.numpy: must be a string"),
    (BENCHMARK_V1, setp(["environment", "cpu_flags"], "avx2"), "predicate.environment.cpu_flags: must be an array"),
    (BENCHMARK_V1, setp(["notes"], ["x" * 3000]), "predicate.notes[0]: must be at most 2048"),
    (BENCHMARK_V1, setp(["trusted"], KeyError), "predicate.trusted: required field is missing"),
    (BENCHMARK_V1, setp(["results"], [{}] * 1025), "predicate.results: must have at most 1024"),
    # verification/v1
    (VERIFICATION_V1, setp(["checks", 0, "outcome"], "passed"), "predicate.checks[0].outcome: must be one of 'pass', 'fail', 'skip', 'error'"),
    (VERIFICATION_V1, setp(["checks", 1, "outcome"], "error"), "predicate.verdict: cannot be 'pass' while checks[1]"),
    (VERIFICATION_V1, setp(["checks", 0, "metrics", "max_ulp"], None), "predicate.checks[0].metrics.max_ulp: must be a number"),
    (VERIFICATION_V1, setp(["checks", 0, "metrics", "Bad-Name"], 1), "predicate.checks[0].metrics['Bad-Name']: must be a metric name"),
    (VERIFICATION_V1, setp(["checks", 0, "metrics", "max_abs_err"], -0.5), "predicate.checks[0].metrics.max_abs_err: must be >= 0"),
    (VERIFICATION_V1, setp(["checks", 1, "inputs", "repeats"], -1), "predicate.checks[1].inputs.repeats: must be between 0"),
    (VERIFICATION_V1, setp(["checks", 0, "metrics", "max_rel_err"], 2**60), "predicate.checks[0].metrics.max_rel_err"),
    (VERIFICATION_V1, setp(["checks", 0, "inputs", "values"], []), "predicate.checks[0].inputs.values: unknown field"),
    (VERIFICATION_V1, setp(["checks", 0, "name"], "Has Space"), "predicate.checks[0].name"),
    (VERIFICATION_V1, setp(["budget"], "huge"), "predicate.budget: must be one of 'quick', 'full'"),
    (VERIFICATION_V1, setp(["verdict"], "ok"), "predicate.verdict: must be one of"),
    (VERIFICATION_V1, setp(["checks"], []), "predicate.checks: must have at least 1"),
    # reproduction/v1
    (REPRODUCTION_V1, setp(["target", "index"], -1), "predicate.target.index: must be between 0"),
    (REPRODUCTION_V1, setp(["target", "predicate_type"], "https://x/y"), "predicate.target.predicate_type: must be one of"),
    (REPRODUCTION_V1, setp(["target", "leaf_hash"], ""), "predicate.target.leaf_hash"),
    (REPRODUCTION_V1, setp(["claims", 0, "verdict"], "maybe"), "predicate.claims[0].verdict: must be one of"),
    (REPRODUCTION_V1, setp(["claims", 0, "measured", "speed"], 1.0), "predicate.claims[0].measured.speed: unknown field"),
    (REPRODUCTION_V1, setp(["claims", 0, "claimed", "speedup_ci95"], [3, 1]), "predicate.claims[0].claimed.speedup_ci95: must be [low, high]"),
    (REPRODUCTION_V1, setp(["verdict"], "confirmed"), "predicate.verdict: cannot be 'confirmed'"),
    (REPRODUCTION_V1, setp(["claims", 0, "verdict"], "confirmed"), "predicate.verdict: cannot be 'refuted'"),
    (REPRODUCTION_V1, setp(["claims", 0, "reason"], "a\x00b"), "predicate.claims[0].reason: must not contain control"),
]


@pytest.mark.parametrize(("ptype", "edit", "expected"), INVALID,
                         ids=[f"{t.rsplit('/', 2)[-2]}-{i}" for i, (t, _, _) in enumerate(INVALID)])
def test_invalid_predicates_name_the_field(ptype: str, edit: Edit, expected: str) -> None:
    body = BODIES[ptype]()
    edit(body)
    with pytest.raises(ValidationError) as info:
        parse_predicate(ptype, body)
    assert str(info.value).startswith(expected), str(info.value)
    assert info.value.path.startswith("predicate")


def good_statement(ptype: str = KERNEL_V1) -> dict[str, Any]:
    pred = parse_predicate(ptype, BODIES[ptype]())
    return make_statement(ex.KERNEL_NAME, ex.SOURCE_SHA256, pred).to_json()


STATEMENT_INVALID: list[tuple[str, Edit, str]] = [
    (KERNEL_V1, setp(["_type"], "https://in-toto.io/Statement/v0.1"), "_type: must be"),
    (KERNEL_V1, setp(["subject"], []), "subject: must have at least 1"),
    (KERNEL_V1, setp(["subject", 0, "digest"], {"sha512": "00"}), "subject[0].digest.sha512: unknown field"),
    (KERNEL_V1, setp(["subject", 0, "digest", "sha256"], "0" * 63), "subject[0].digest.sha256"),
    (KERNEL_V1, setp(["subject", 0, "name"], "UPPER/case"), "subject[0].name: must be a kernel name"),
    (KERNEL_V1, setp(["subject", 0, "name"], "acme/other"), "predicate.name: must equal the name"),
    (KERNEL_V1, setp(["predicateType"], "https://example.com/x/v1"), "predicateType: unknown predicate type"),
    (KERNEL_V1, setp(["predicate"], KeyError), "predicate: required field is missing"),
    (KERNEL_V1, setp(["extra"], {}), "extra: unknown statement field"),
    (KERNEL_V1, lambda d: d["subject"].append(d["subject"][0]), "subject[1]: duplicates"),
    (BENCHMARK_V1, setp(["predicate", "results", 0, "n"], "50"), "predicate.results[0].n: must be an integer"),
    (REPRODUCTION_V1, setp(["subject", 0, "digest", "sha256"], "1" * 64), "predicate.target.subject_sha256"),
]


@pytest.mark.parametrize(("ptype", "edit", "expected"), STATEMENT_INVALID)
def test_invalid_statements_name_the_field(ptype: str, edit: Edit, expected: str) -> None:
    doc = good_statement(ptype)
    if ptype == REPRODUCTION_V1:
        doc["predicate"]["target"]["subject_sha256"] = doc["subject"][0]["digest"]["sha256"]
    edit(doc)
    with pytest.raises(ValidationError) as info:
        Statement.from_json(doc)
    assert str(info.value).startswith(expected), str(info.value)


def test_reproduction_statement_must_target_its_subject() -> None:
    body = ex.reproduction()
    body["target"]["subject_sha256"] = ex.SOURCE_SHA256
    pred = parse_predicate(REPRODUCTION_V1, body)
    assert make_statement(ex.KERNEL_NAME, ex.SOURCE_SHA256, pred).predicate == pred
    with pytest.raises(ValidationError, match=r"predicate\.target\.subject_sha256"):
        make_statement(ex.KERNEL_NAME, "2" * 64, pred)


@pytest.mark.parametrize("payload", [b"\xff", b"{", b'{"a":1,"a":2}', b'{"a":NaN}', b"[" * 100_000])
def test_payload_must_be_strict_json(payload: bytes) -> None:
    with pytest.raises(ValidationError, match=r"^payload: "):
        parse_statement_payload(payload)


# Any JSON value placed anywhere in a valid body either validates or raises ValidationError
# naming a field path: the parser never crashes with another exception.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_random_replacement_is_accepted_or_named(data: st.DataObject) -> None:
    ptype = data.draw(st.sampled_from(list(BODIES)))
    body = BODIES[ptype]()
    path = data.draw(st.sampled_from(_paths(body)[1:]))
    value = data.draw(JSON_VALUES)
    doc = copy.deepcopy(body)
    setp(list(path), value)(doc)
    try:
        pred = parse_predicate(ptype, doc)
    except ValidationError as exc:
        assert exc.path.startswith("predicate")
    else:
        assert type(pred).from_json(pred.to_json()) == pred


SCHEMA_DIR = Path(__file__).resolve().parent.parent / "attest" / "schemas"


@pytest.mark.parametrize("kind", ["kernel", "benchmark", "verification", "reproduction",
                                  "suite"])
def test_published_schema_matches_the_code(kind: str) -> None:
    published = json.loads((SCHEMA_DIR / f"{kind}-v1.json").read_text())
    assert published == p.predicate_schema(kind)
    assert published["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert published["additionalProperties"] is False
    assert set(published["required"]) == set(BODIES[p.SHORT_NAMES[kind]]())


def test_wire_constants_have_one_home_in_attest() -> None:
    """The kernel-name and digest patterns, the runtimes and the predicate URIs are written
    once, in attest.predicates; ledger, verifier, client and benchmarks import them."""
    import re
    from pathlib import Path

    import attest

    root = Path(__file__).resolve().parent.parent
    copies = {
        attest.PREDICATE_NAMESPACE, attest.HEX64_PATTERN, attest.KERNEL_NAME_PATTERN,
        '"c", "cuda", "triton", "torch"', "^[0-9a-f]{64}$",
    }
    home = root / "attest" / "predicates.py"
    found = []
    for pkg in ("attest", "ledger", "client", "verifier", "benchmarks"):
        for path in (root / pkg).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            found += [f"{path.relative_to(root)}: {c}" for c in copies
                      if path != home and c in text]
    assert not found, found
    assert re.fullmatch(attest.KERNEL_NAME_PATTERN, "acme/sum-rows")
    assert attest.SHORT_NAMES["benchmark"] == attest.BENCHMARK_V1
    assert attest.RUNTIMES == ("c", "cuda", "triton", "torch")


@pytest.mark.parametrize(("cls", "make"), NESTED)
def test_nodes_validate_when_built_directly(cls: Any, make: Callable[[], Any]) -> None:
    """The constructor applies the same rules as from_json (python-tuf: valid once built)."""
    parsed = cls.from_json(make())
    kwargs = {name: getattr(parsed, name) for name in parsed.__dataclass_fields__}
    assert cls(**kwargs) == parsed


def test_a_bad_field_is_refused_by_the_constructor_with_its_path() -> None:
    good = p.Check.from_json(ex.verification()["checks"][0])
    with pytest.raises(ValidationError) as bad_name:
        p.Check(name="Not A Check Name", outcome=good.outcome, detail=good.detail,
                inputs=good.inputs, metrics=good.metrics)
    assert bad_name.value.path == "check.name"
    with pytest.raises(ValidationError) as bad_kind:
        p.Fault(kind="kernel_was_fine_really", shape=None)  # type: ignore[arg-type]
    assert bad_kind.value.path == "fault.kind"
    with pytest.raises(ValidationError) as nested:
        p.Check(name="x", outcome="fail", detail="", inputs={"repeats": -1},  # type: ignore[arg-type]
                metrics={})
    assert nested.value.path == "check.inputs.repeats"


def test_cross_field_rules_hold_for_directly_built_objects() -> None:
    result = p.BenchmarkResult.from_json(ex.benchmark()["results"][0])
    kwargs = {name: getattr(result, name) for name in result.__dataclass_fields__}
    with pytest.raises(ValidationError, match="within"):
        p.BenchmarkResult(**{**kwargs, "median_ns": result.p95_ns * 2})
    pred = p.VerificationPredicate.from_json(ex.verification())
    failing = dataclasses.replace(pred.checks[0], outcome="fail")
    with pytest.raises(ValidationError) as lie:
        p.VerificationPredicate(environment=pred.environment, budget=pred.budget, seed=pred.seed,
                                checks=(failing,), verdict="pass")
    assert lie.value.path == "predicate.verdict"


def test_built_objects_hold_immutable_copies() -> None:
    flags = ["-O2"]
    recipe = p.BuildRecipe(compiler="cc", compiler_version="1", flags=flags)  # type: ignore[arg-type]
    flags.append("-fno-everything")
    assert recipe.flags == ("-O2",)
    run = p.BenchmarkRun(speedup=2, speedup_ci95=(1, 3), median_ns=5, baseline_median_ns=10, n=3)
    assert isinstance(run.median_ns, float)
    assert run.to_json() == {"speedup": 2.0, "speedup_ci95": [1.0, 3.0], "median_ns": 5.0,
                             "baseline_median_ns": 10.0, "n": 3}


def test_a_field_is_declared_once_and_optional_fields_keep_old_bodies_valid() -> None:
    """The mechanism the predicates docstring describes: one declaration gives parse, encode
    and schema; an optional field's absence reads old bodies and writes them unchanged."""
    from attest._spec import Int, Node, Str, json_field

    class Probe(Node, path="probe", doc="a test node"):
        name: str = json_field(Str(8))
        added: int | None = json_field(Int(1, 9), default=None)

    old = {"name": "a"}
    assert Probe.from_json(old).to_json() == old
    assert Probe.from_json({"name": "a", "added": 3}).added == 3
    schema = Probe.spec().schema()
    assert schema["required"] == ["name"] and list(schema["properties"]) == ["name", "added"]
    with pytest.raises(ValidationError) as exc:
        Probe.from_json({"name": "a", "added": 10})
    assert exc.value.path == "probe.added"
    source = (Path(p.__file__)).read_text(encoding="utf-8")
    for hand_written in ("def to_json", "def from_json", "def _build", "Obj({"):
        assert hand_written not in source, hand_written
