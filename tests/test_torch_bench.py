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
    """Every run of a set, every further look and both checks of a reproduction ask the same
    reference's one-call probe (a sandboxed torch import, 6-9 s here): it is run once per exact
    source and settings in a process, for the bench and the check path alike. Another source
    (one byte apart) or other settings are probed anew, a failure is raised again each time,
    never kept, each caller gets its own copy, and the memo is bounded."""
    from types import SimpleNamespace

    from verifier.benchmark import _torch_bench as tb
    from verifier.runtimes import CHECK_BUDGET, Footprint, ProbeFailed, ProblemProbe, _problem

    asked: list[tuple[bytes, bool]] = []
    fp = Footprint(call_bytes=1 << 20, param_bytes=1 << 10)
    big = Footprint(call_bytes=100 << 20, param_bytes=1 << 10)  # over the check's 64 MiB

    def probe(source: bytes, budget: Footprint, timeout_s: float, scale: bool,
              ceiling: Footprint | None) -> ProblemProbe:
        asked.append((source, scale))
        if source == b"bad":
            raise ProbeFailed("the problem's process exited with status 1")
        plan = SimpleNamespace(footprint=big if source == b"big" else fp)
        return ProblemProbe((), plan, {"ok": True}, False)  # type: ignore[arg-type]

    monkeypatch.setattr(_problem, "_probe_now", probe)
    monkeypatch.setattr(_problem, "_PROBED", {})
    said: list[str] = []
    assert tb._problem_footprint(b"ref", said.append) == fp
    assert tb._problem_footprint(b"ref", said.append) == fp
    assert asked == [(b"ref", False)] and "as measured before in this process" in said[-1]
    first = _problem.probe_problem(b"ref", CHECK_BUDGET)  # the check path: other settings
    first.body["ok"] = "changed by a caller"
    assert _problem.probe_problem(b"ref", CHECK_BUDGET).body == {"ok": True}
    assert asked == [(b"ref", False), (b"ref", True)]
    assert tb._problem_footprint(b"ref ", said.append) == fp and asked[-1] == (b"ref ", False)
    for _ in range(2):
        with pytest.raises(VerifierError, match="not benchmarked at the problem's own sizes"):
            tb._problem_footprint(b"bad", said.append)
    assert asked.count((b"bad", False)) == 2
    # the ceiling (which follows the memory free) only lets a call over the budget run: an
    # answer kept under one holds under another it fits, and is asked again where it does not
    roomy, tight = (Footprint(call_bytes=n << 20, param_bytes=1 << 30, flops=10**12)
                    for n in (200, 150))
    _problem.probe_problem(b"big", CHECK_BUDGET, ceiling=roomy)
    _problem.probe_problem(b"big", CHECK_BUDGET, ceiling=tight)
    assert asked.count((b"big", True)) == 1
    _problem.probe_problem(b"big", CHECK_BUDGET, ceiling=Footprint(call_bytes=90 << 20,
                                                                   param_bytes=1 << 30))
    _problem.probe_problem(b"big", CHECK_BUDGET)
    assert asked.count((b"big", True)) == 3
    _problem.probe_problem(b"ref", CHECK_BUDGET, ceiling=tight)  # within the budget: kept
    assert asked.count((b"ref", True)) == 1
    for k in range(_problem.PROBED_MAX + 3):  # bounded: the oldest answers are dropped
        tb._problem_footprint(b"src%d" % k, said.append)
    assert len(_problem._PROBED) == _problem.PROBED_MAX
