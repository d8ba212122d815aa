"""`ktl bench` on kernels defined by a PyTorch module: ModelNew against Model in PyTorch
eager, both sandboxed, timed from outside; timed outputs are rechecked.

Statistical logic is tested on injected samples elsewhere (test_verifier_bench.py); here
only the outcomes a kernel cannot talk its way out of are asserted (a 50 ms sleep
against a microsecond op, outputs wrong after the first calls, a refusal)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is installed by `make test`")

from attest.predicates import BenchmarkPredicate
from tests.test_torch_check import torch_folder
from verifier import BenchSettings, RuntimeUnavailableError, VerifierError, bench, bench_runs


@pytest.mark.slow  # 7-11 s, among make test's longest: CI's slow step runs it
def test_honest_solution_is_timed_against_eager_and_its_body_validates(tmp_path: Path) -> None:
    report = bench_runs(torch_folder(tmp_path, "honest.py"), runs=1,
                        settings=BenchSettings(time_budget_s=2.0))
    parsed = report.to_predicate()
    assert BenchmarkPredicate.from_json(parsed.to_json()) == parsed
    assert parsed.method.baseline == "torch-eager"
    assert parsed.torch is not None and parsed.torch.baselines == ("torch-eager",)
    assert parsed.workload.op == "torch" and parsed.workload.dtype == "float32"
    assert len(parsed.torch.init_seeds) == 1
    run = report.runs[0]
    assert run.results and run.results[0].n >= 2
    assert not run.faults
    # issue 42: the shape is named after the reference's `forward(self, x)`, and a module has
    # no known FLOP count, so no GFLOP/s (never a made-up 0.0)
    assert dict(parsed.results[0].shape) == {"x_0": 16, "x_1": 64}
    assert parsed.results[0].gflops is None and "gflops" not in parsed.to_json()["results"][0]
    assert any("torch.compile baseline not measured" in n for n in run.notes)


@pytest.mark.slow
def test_patched_clocks_do_not_help_a_slow_solution(tmp_path: Path) -> None:
    run = bench(torch_folder(tmp_path, "timer.py"), BenchSettings(time_budget_s=2.0, min_reps=2))
    assert run.results[0].speedup < 0.1  # 50 ms of sleep per call against microseconds


@pytest.mark.slow
def test_outputs_of_timed_calls_are_rechecked(tmp_path: Path) -> None:
    run = bench(torch_folder(tmp_path, "firstn.py"), BenchSettings(time_budget_s=2.0))
    assert not run.trusted
    assert "outputs_wrong" in {f.kind for f in run.faults}


@pytest.mark.slow
def test_work_left_to_a_thread_is_caught_while_timing(tmp_path: Path) -> None:
    run = bench(torch_folder(tmp_path, "thread.py"), BenchSettings(time_budget_s=2.0))
    assert not run.trusted
    assert {"escaped_work", "outputs_wrong"} & {f.kind for f in run.faults}


def test_triton_on_a_cpu_is_not_timed_and_says_why(tmp_path: Path) -> None:
    with pytest.raises(RuntimeUnavailableError, match="interpreter"):
        bench(torch_folder(tmp_path, "honest.py", runtime="triton"))


def test_shapes_do_not_apply_to_torch_kernels(tmp_path: Path) -> None:
    with pytest.raises(VerifierError, match="get_inputs"):
        bench(torch_folder(tmp_path, "honest.py"), BenchSettings(shapes=[{"M": 4}]))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_torch_compile_is_a_second_baseline_and_the_reference_survives_it(tmp_path: Path) -> None:
    # Inductor looked the user up through nscd's socket, which the sandbox denies: the
    # reference was killed at its first compiled call and the baseline never measured
    run = bench(torch_folder(tmp_path, "honest.py"),
                BenchSettings(time_budget_s=2.0, min_reps=2, compile_baseline=True))
    assert run.torch is not None and run.torch["baselines"] == ["torch-eager", "torch-compile"]
    assert any(n.startswith("against torch.compile of the reference: speed-up") for n in run.notes)
    assert not any("skipped" in n for n in run.notes), run.notes
    assert run.results and not run.faults


def test_the_problem_is_probed_once_per_source_in_a_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run of a set times the same reference at the same sizes: its one-call probe (a
    sandboxed torch import, 6-9 s a run here) is asked once per source and budget; another
    source is probed anew, and a failed probe is raised again each time, never kept."""
    from types import SimpleNamespace

    from verifier.benchmark import _torch_bench as tb
    from verifier.runtimes import Footprint, ProbeFailed

    asked: list[bytes] = []
    fp = Footprint(call_bytes=1 << 20, param_bytes=1 << 10)

    def probe(source: bytes, budget: Footprint, scale: bool = True) -> SimpleNamespace:
        asked.append(source)
        if source == b"bad":
            raise ProbeFailed("the problem's process exited with status 1")
        return SimpleNamespace(plan=SimpleNamespace(footprint=fp))

    monkeypatch.setattr(tb, "probe_problem", probe)
    monkeypatch.setattr(tb, "_PROBED", {})
    said: list[str] = []
    assert tb._problem_footprint(b"ref", said.append) == fp
    assert tb._problem_footprint(b"ref", said.append) == fp
    assert asked == [b"ref"] and "as measured before in this process" in said[-1]
    assert tb._problem_footprint(b"other", said.append) == fp and asked[-1] == b"other"
    for _ in range(2):
        with pytest.raises(VerifierError, match="not benchmarked at the problem's own sizes"):
            tb._problem_footprint(b"bad", said.append)
    assert asked.count(b"bad") == 2
    for k in range(tb._PROBED_MAX + 3):  # bounded: the oldest answers are dropped
        tb._problem_footprint(b"src%d" % k, said.append)
    assert len(tb._PROBED) == tb._PROBED_MAX
