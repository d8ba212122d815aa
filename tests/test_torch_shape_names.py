"""Issue 42 item 7: a torch benchmark names its shape after the problem's `forward` arguments
(`A_0`, `B_1`, not `a0_0`) and writes no GFLOP/s where no FLOP count is known (never a made-up
0.0); an op of the catalogue still must carry its checked GFLOP/s; a claim logged with the old
positional names is still matched to what a reproduction measures."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from attest import ValidationError, examples
from attest.predicates import BenchmarkPredicate, BenchmarkResult
from verifier.benchmark._runs import _combine
from verifier.benchmark._torch_run import input_names
from verifier.reproduce import compare_benchmark

KERNELBENCH = b'''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)

M = 1024
def get_inputs():
    return [torch.randn(M, M), torch.randn(M, M)]
'''


def test_names_come_from_the_reference_forward() -> None:
    assert input_names(KERNELBENCH, 2) == ["A", "B"]
    assert input_names(KERNELBENCH.replace(b"A: torch.Tensor, B", b"x, /, y"), 2) == ["x", "y"]


@pytest.mark.parametrize("source", [
    b"def forward(x): pass",                                         # no Model class
    KERNELBENCH.replace(b"A: torch.Tensor, B: torch.Tensor", b"*args"),  # no names
    KERNELBENCH.replace(b"B: torch.Tensor", b"a_very_long_argument_name"),  # too long a key
    KERNELBENCH.replace(b"A: torch.Tensor", b"_private"),              # not a plain name
    KERNELBENCH.replace(b"A: torch.Tensor, B: torch.Tensor", b"A"),     # fewer than inputs
    b"class Model(:\n",                                              # does not parse
], ids=["no-model", "varargs", "long", "underscore", "too-few", "syntax"])
def test_positional_names_where_the_reference_gives_none(source: bytes) -> None:
    assert input_names(source, 2) == ["a0", "a1"]


def _torch_body() -> dict[str, Any]:
    body = examples.benchmark_runs((1.5, 1.51, 1.49, 1.5, 1.505))
    body["workload"]["op"] = "torch"
    body["workload"]["shapes"] = [{"A_0": 64, "A_1": 64, "B_0": 64, "B_1": 32}]
    result = body["results"][0]
    result["shape"] = dict(body["workload"]["shapes"][0])
    del result["gflops"]
    return body


def test_a_torch_result_carries_no_gflops_and_a_catalogue_op_must() -> None:
    body = _torch_body()
    parsed = BenchmarkPredicate.from_json(body)
    assert parsed.results[0].gflops is None
    assert "gflops" not in parsed.to_json()["results"][0]  # absent, not a made-up 0.0
    # attacker: leave the checked figure out of a catalogue op's result to dodge its check
    matmul = examples.benchmark_runs()
    del matmul["results"][0]["gflops"]
    with pytest.raises(ValidationError, match="gflops"):
        BenchmarkPredicate.from_json(matmul)


def test_runs_without_gflops_combine_without_gflops() -> None:
    runs = BenchmarkPredicate.from_json(_torch_body()).results[0].runs
    assert runs is not None
    per_run = [BenchmarkResult(shape={"A_0": 64}, n=r.n, median_ns=r.median_ns,
                               p5_ns=r.median_ns, p95_ns=r.median_ns,
                               baseline_median_ns=r.baseline_median_ns, speedup=r.speedup,
                               speedup_ci95=r.speedup_ci95) for r in runs]
    assert _combine(per_run).gflops is None


def test_a_claim_with_the_old_positional_names_is_still_matched() -> None:
    """A torch claim logged as `a0_0`... and a fresh measurement naming the same sizes after
    the arguments: the same shape, judged (confirmed here), not 'not measured here'."""
    fresh = BenchmarkPredicate.from_json(_torch_body())
    old = copy.deepcopy(_torch_body())
    named = {"a0_0": 64, "a0_1": 64, "a1_0": 64, "a1_1": 32}
    old["workload"]["shapes"] = [named]
    old["results"][0]["shape"] = dict(named)
    rows = compare_benchmark(BenchmarkPredicate.from_json(old), fresh)
    assert len(rows) == 1 and "not measured here" not in rows[0].reason, rows[0].reason
    assert rows[0].verdict == "confirmed", rows[0].reason
    # other sizes are another shape
    other = copy.deepcopy(old)
    other["results"][0]["shape"]["a1_1"] = other["workload"]["shapes"][0]["a1_1"] = 48
    rows = compare_benchmark(BenchmarkPredicate.from_json(other), fresh)
    assert "not measured here" in rows[0].reason
