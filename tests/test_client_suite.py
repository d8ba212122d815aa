"""`ktl suite`: discovery of problems and solutions in KernelBench's layouts, resuming after an
interrupt, --jobs bounded by the CPUs, shards run as separate processes then merged, and the
figures in KernelBench's terms (correct %, fast_p) beside ours."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from client.errors import EXIT_MEMORY, InputError, SuiteInterrupted
from client.suite import (
    Entry,
    EntryResult,
    Event,
    SuiteSettings,
    default_bound,
    discover,
    load_results,
    merge,
    parse_size,
    run_suite,
    shard_of,
    summarize,
    to_csv,
)

SUITE = Path(__file__).resolve().parent / "kernelbench_suite"
PROBLEM = "import torch\nclass Model(torch.nn.Module):\n    pass\n"


def _tree(tmp: Path) -> tuple[Path, Path]:
    problems, solutions = tmp / "problems", tmp / "solutions"
    for level, names in ((1, ["1_A.py", "2_B.py", "10_C.py"]), (2, ["1_D.py", "3_E.py"])):
        (problems / f"level{level}").mkdir(parents=True)
        for n in names:
            (problems / f"level{level}" / n).write_text(PROBLEM)
    (solutions / "level1").mkdir(parents=True)
    (solutions / "level1" / "1_A.py").write_text("class ModelNew: pass\n")
    (solutions / "level1" / "10_anything.py").write_text("class ModelNew: pass\n")
    (solutions / "run").mkdir()
    (solutions / "run" / "level_2_problem_3_sample_0_kernel.py").write_text("x = 1\n")
    (solutions / "run" / "level_2_problem_1_sample_1_kernel.py").write_text("x = 2\n")
    return problems, solutions


def _settings(tmp: Path, **kw: object) -> SuiteSettings:
    problems, solutions = _tree(tmp) if not (tmp / "problems").exists() else (
        tmp / "problems", tmp / "solutions")
    return SuiteSettings(problems, solutions, tmp / "out", **kw)  # type: ignore[arg-type]


def test_discovery_pairs_every_naming_and_keeps_problems_without_a_solution(tmp_path: Path) -> None:
    entries = discover(_settings(tmp_path))
    got = {e.key: (e.solution.name if e.solution else None) for e in entries}
    assert got == {"level1/1_A": "1_A.py", "level1/2_B": None, "level1/10_C": "10_anything.py",
                   "level2/1_D": None, "level2/3_E": "level_2_problem_3_sample_0_kernel.py"}
    assert [e.problem_id for e in entries] == [1, 2, 10, 1, 3]  # numeric order, not text
    other = discover(_settings(tmp_path, sample=1))
    assert {e.key for e in other if e.solution} == {"level1/1_A", "level1/10_C", "level2/1_D"}
    assert [e.key for e in discover(_settings(tmp_path, levels=(2,)))] == ["level2/1_D",
                                                                           "level2/3_E"]


def test_jsonl_generations(tmp_path: Path) -> None:
    problems, _ = _tree(tmp_path)
    gens = tmp_path / "gens.jsonl"
    gens.write_text(json.dumps({"level": 1, "problem_id": 2, "sample_id": 0, "kernel": "k = 1"})
                    + "\n\n" + json.dumps({"level": 2, "problem_id": 1, "code": "k = 2"}) + "\n")
    entries = discover(SuiteSettings(problems, gens, tmp_path / "out"))
    with_sol = {e.key: e.solution.read_text() for e in entries if e.solution}
    assert with_sol == {"level1/2_B": "k = 1", "level2/1_D": "k = 2"}
    for bad, why in (("{", "not JSON"), ('{"level": 1}', "needs integer level"),
                     ('[1]', "not an object")):
        gens.write_text(bad + "\n")
        with pytest.raises(InputError, match=why):
            discover(SuiteSettings(problems, gens, tmp_path / "out2"))
    twice = json.dumps({"level": 1, "problem_id": 2, "kernel": "a"})
    gens.write_text(twice + "\n" + twice + "\n")
    with pytest.raises(InputError, match="given twice"):
        discover(SuiteSettings(problems, gens, tmp_path / "out3"))


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--shard"):
        _settings(tmp_path, shard=(3, 2))
    with pytest.raises(InputError, match="may use"):
        run_suite(_settings(tmp_path, jobs=len(os.sched_getaffinity(0)) + 1), lambda e: None)
    with pytest.raises(InputError, match="no level"):
        discover(SuiteSettings(tmp_path / "solutions" / "run", tmp_path / "solutions", tmp_path / "o"))


Runner = Callable[[Entry, SuiteSettings, "int | None"], EntryResult]


def _fake(statuses: dict[str, tuple[str, float | None, bool | None]]
          ) -> tuple[Runner, list[str]]:
    seen: list[str] = []

    def runner(entry: Entry, settings: SuiteSettings, cpu: int | None) -> EntryResult:
        seen.append(entry.key)
        status, speedup, trusted = statuses.get(entry.key, ("correct", 1.2, True))
        return EntryResult(entry.key, entry.level, entry.problem_id, status, "done",
                           speedup=speedup, trusted=trusted)

    return runner, seen


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    runner, seen = _fake({})

    def interrupting(entry: Entry, s: SuiteSettings, cpu: int | None) -> EntryResult:
        if len(seen) == 2:
            raise KeyboardInterrupt
        return runner(entry, s, cpu)

    with pytest.raises(SuiteInterrupted, match="2 of 5 entries finished"):
        run_suite(settings, lambda e: None, interrupting)
    assert len(load_results(settings.out)) == 2
    events: list[Event] = []
    runner2, seen2 = _fake({})
    results = run_suite(settings, events.append, runner2)
    assert seen2 == ["level1/10_C", "level2/1_D", "level2/3_E"]  # only what was not done
    assert events[0].done == 2 and events[-1].done == 5 and events[-1].total == 5
    assert len(results) == 5


def test_ctrl_c_stops_the_run_and_keeps_no_row_of_the_entry_in_flight(tmp_path: Path) -> None:
    """Ctrl-C reaches the main thread while an entry's step runs: nothing more starts, and the
    entry in flight is not recorded (its row would be the interruption's: an error that a
    resumed run would then skip)."""
    settings = _settings(tmp_path)
    runner, seen = _fake({})
    started = threading.Event()

    def slow(entry: Entry, s: SuiteSettings, cpu: int | None) -> EntryResult:
        if len(seen) == 1:
            started.set()
            time.sleep(3.0)  # the step in flight when the interrupt comes
            return EntryResult(entry.key, entry.level, entry.problem_id, "error", "check",
                               reason="ktl check: interrupted")
        return runner(entry, s, cpu)

    def press_ctrl_c() -> None:
        started.wait(10)
        os.kill(os.getpid(), signal.SIGINT)

    # Ctrl-C as a terminal's shell leaves it (a test runner's worker may ignore SIGINT)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=press_ctrl_c, daemon=True).start()
        with pytest.raises(SuiteInterrupted) as caught:
            run_suite(settings, lambda e: None, slow)
    finally:
        signal.signal(signal.SIGINT, before)
    assert (caught.value.done, caught.value.total, caught.value.exit_code) == (1, 5, 130)
    assert [r.key for r in load_results(settings.out)] == ["level1/1_A"]
    assert len(seen) == 1  # nothing started after the interrupt
    runner2, seen2 = _fake({})
    assert len(run_suite(settings, lambda e: None, runner2)) == 5
    assert seen2 == ["level1/2_B", "level1/10_C", "level2/1_D", "level2/3_E"]


def test_sigterm_stops_ktl_suite_run_saying_how_to_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch system preempts with SIGTERM: `ktl suite run` stops as on Ctrl-C, exit 130,
    saying what was kept and that the same command resumes."""
    import functools

    from click.testing import CliRunner

    import client.cli.suite as cli_suite
    from client.cli import main

    problems, solutions = _tree(tmp_path)
    runner, seen = _fake({})

    def slow(entry: Entry, s: SuiteSettings, cpu: int | None) -> EntryResult:
        if len(seen) == 2:
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
            time.sleep(3.0)
        return runner(entry, s, cpu)

    monkeypatch.setattr(cli_suite, "run_suite", functools.partial(run_suite, runner=slow))
    # in-process, the memory bound would stay on this test process (RLIMIT_DATA), and every
    # later sanitizer build it starts would abort reserving its shadow memory
    monkeypatch.setattr(cli_suite, "apply_bound", lambda size: size or 1 << 30)
    res = CliRunner().invoke(main, ["suite", "run", str(problems), str(solutions), "--out",
                                    str(tmp_path / "out"), "--no-bench"])
    assert res.exit_code == 130, res.output
    assert "stopped: interrupted: 2 of 5 entries finished and kept" in res.output
    assert "run the same command again to resume" in res.output
    assert len(load_results(tmp_path / "out")) == 2
    assert signal.getsignal(signal.SIGTERM) is not None  # the handler was put back


def _answers(monkeypatch: pytest.MonkeyPatch, **by_step: tuple[int, object, str]) -> None:
    """`ktl` steps answered with (exit code, JSON printed, stderr) per step (import, check)."""
    import client.suite._run as suite_run

    def ktl(args: list[str], cpu: int | None, timeout_s: float) -> subprocess.CompletedProcess[str]:
        code, body, err = by_step[args[0]]
        if args[0] == "import":
            Path(args[args.index("--out") + 1]).mkdir(parents=True, exist_ok=True)
        return subprocess.CompletedProcess(args, code, json.dumps(body), err)

    monkeypatch.setattr(suite_run, "_ktl", ktl)


def _import_error(kind: str | None, message: str) -> tuple[int, object, str]:
    err: dict[str, object] = {"type": "ImportRefused", "message": message, "exit_code": 2}
    if kind is not None:
        err["kind"] = kind
    return 2, {"error": err}, f"error: {message}"


@pytest.mark.parametrize(("kind", "message", "status", "refusal"), [
    ("solution", "the solution defines no ModelNew", "incorrect", ""),
    ("does_not_fit", "one call needs 8.00 GiB", "refused", "does_not_fit"),
    # attacker's cases: the words of a message (which a problem or solution can steer)
    # never decide: a solution's own error reading like a machine limit is still incorrect,
    # and a problem's error naming ModelNew is still the problem's
    ("solution", "one call needs 8.00 GiB; killed", "incorrect", ""),
    ("problem", "ModelNew solution raised", "refused", "problem"),
    (None, "no kind printed", "refused", "problem"),
])
def test_an_import_failure_is_judged_by_its_typed_kind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str | None, message: str,
        status: str, refusal: str) -> None:
    from client.suite import run_entry

    settings = _settings(tmp_path)
    entry = next(e for e in discover(settings) if e.solution is not None)
    _answers(monkeypatch, **{"import": _import_error(kind, message)})
    got = run_entry(entry, settings, None)
    assert (got.status, got.refusal, got.stage) == (status, refusal, "import")
    assert message in got.reason


def _check_rows(*rows: dict[str, object]) -> tuple[int, object, str]:
    return 1, {"checks": list(rows)}, ""


def test_a_check_in_error_is_refused_only_for_a_typed_machine_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from client.suite import run_entry

    settings = _settings(tmp_path, bench=False)
    entry = next(e for e in discover(settings) if e.solution is not None)
    limit = {"name": "reference", "outcome": "error", "detail": "the reference module could "
             "not run: one call needs 9 GiB", "metrics": {"limit_does_not_fit": 1.0}}
    _answers(monkeypatch, **{"import": (0, {}, ""), "check": _check_rows(limit)})
    got = run_entry(entry, settings, None)
    assert (got.status, got.refusal) == ("refused", "does_not_fit")
    # the same words without the metric (a kernel's exception text, say): the harness's error
    worded = {**limit, "metrics": {}}
    _answers(monkeypatch, **{"import": (0, {}, ""), "check": _check_rows(worded)})
    got = run_entry(entry, settings, None)
    assert (got.status, got.refusal) == ("error", "")
    # scaled is the reference row's typed metric (its detail is cut at the first ';')
    passed = {"name": "reference", "outcome": "pass", "metrics": {"scaled": 1.0},
              "detail": "checked at N=512; the problem's N is 4,096"}
    _answers(monkeypatch, **{"import": (0, {}, ""), "check": (0, {"checks": [passed]}, "")})
    got = run_entry(entry, settings, None)
    assert got.status == "correct" and got.scaled and got.sizes == "checked at N=512"
    assert summarize([got])["all"]["scaled"] == 1
    gpu = {"name": "build", "outcome": "error", "detail": "not run: CUDA",
           "metrics": {"limit_needs_gpu": 1.0}}
    _answers(monkeypatch, **{"import": (0, {}, ""), "check": _check_rows(gpu)})
    assert run_entry(entry, settings, None).refusal == "needs_gpu"


def test_ktl_import_prints_the_refusals_kind_as_json(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from client.cli import main

    (tmp_path / "p.py").write_text(PROBLEM)
    (tmp_path / "s.py").write_text("class NotIt: pass\n")
    res = CliRunner().invoke(main, ["import", "kernelbench", str(tmp_path / "p.py"),
                                    str(tmp_path / "s.py"), "--out", str(tmp_path / "k"),
                                    "--json"])
    assert res.exit_code == 2, res.output
    error = json.loads(res.stdout)["error"]
    assert error["kind"] == "solution" and "ModelNew" in error["message"]


def test_jobs_are_pinned_each_to_its_own_cpu(tmp_path: Path) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU")
    used: list[int | None] = []

    def runner(entry: Entry, settings: SuiteSettings, cpu: int | None) -> EntryResult:
        used.append(cpu)
        return EntryResult(entry.key, entry.level, entry.problem_id, "correct")

    run_suite(_settings(tmp_path, jobs=2), lambda e: None, runner)
    assert len(used) == 5 and set(used) <= set(cpus[:2]) and None not in used


def test_figures_in_kernelbench_terms_beside_ours() -> None:
    rows = [EntryResult("level1/1", 1, 1, "correct", speedup=2.5, trusted=True),
            EntryResult("level1/2", 1, 2, "correct", speedup=1.2, trusted=False),
            EntryResult("level1/3", 1, 3, "correct", speedup=0.9, trusted=True),
            EntryResult("level1/4", 1, 4, "incorrect", failed_checks=["correctness.random"],
                        findings=["torch_only"]),
            EntryResult("level2/1", 2, 1, "refused", refusal="does_not_fit",
                        reason="import: one call needs 8.00 GiB of inputs and outputs")]
    s = summarize(rows)
    a = s["all"]
    assert a["entries"] == 5 and a["correct_pct"] == 60.0
    assert a["fast_p"] == {"1": 40.0, "1.5": 20.0, "2": 20.0}
    assert a["trusted_pct"] == 40.0 and a["fast_p_trusted"] == {"1": 20.0, "1.5": 20.0, "2": 20.0}
    assert a["refused"] == {"one call does not fit this machine": 1}
    assert a["failed_checks"] == {"correctness.random": 1} and a["findings"] == {"torch_only": 1}
    assert s["level2"]["entries"] == 1 and s["level1"]["correct_pct"] == 75.0
    text = to_csv(rows)
    assert text.splitlines()[0].startswith("key,level,problem_id,status,refusal")
    assert "level1/4,1,4,incorrect" in text and "level2/1,2,1,refused,does_not_fit" in text
    # the kind is the typed field, never the reason's words: a reason that reads like
    # another limit changes nothing, and a row written before refusals were typed says so
    worded = EntryResult("level2/2", 2, 2, "refused", refusal="needs_gpu",
                         reason="import: one call needs 8.00 GiB; killed")
    older = EntryResult("level2/3", 2, 3, "refused", reason="one call needs 8.00 GiB")
    assert summarize([worded, older])["all"]["refused"] == {
        "needs a GPU": 1, "not recorded (an older result file)": 1}
    with pytest.raises(InputError, match="unknown refusal"):
        EntryResult.from_json({**worded.to_json(), "refusal": "because I say so"})


def test_the_median_time_is_split_into_import_and_check_then_bench() -> None:
    rows = [EntryResult("level1/1", 1, 1, "correct", seconds=90.0, bench_seconds=30.0),
            EntryResult("level1/2", 1, 2, "correct", seconds=70.0, bench_seconds=20.0),
            EntryResult("level1/3", 1, 3, "refused", seconds=10.0)]
    a = summarize(rows)["all"]
    assert (a["median_seconds"], a["median_check_seconds"], a["median_bench_seconds"]) == (
        70.0, 50.0, 25.0)
    assert summarize(rows[2:])["all"]["median_bench_seconds"] == 0.0
    assert "bench_seconds" in to_csv(rows).splitlines()[0]


def test_merge_refuses_two_different_results_for_one_key() -> None:
    a = [EntryResult("level1/1", 1, 1, "correct")]
    assert [r.key for r in merge([a, a])] == ["level1/1"]
    with pytest.raises(InputError, match="different results"):
        merge([a, [EntryResult("level1/1", 1, 1, "incorrect")]])


def _ktl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from client.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_shards_as_separate_processes_then_merge(tmp_path: Path) -> None:
    """Two `ktl suite run --shard K/2` processes (solutions refused at import, before any
    problem runs: fast), then `ktl suite merge` of their folders = every entry once."""
    problems, solutions = _tree(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-c", "from client.cli import main; main()",
                               "suite", "run", str(problems), str(solutions), "--no-bench",
                               "--shard", f"{k}/2", "--out", str(tmp_path / f"s{k}"), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in (1, 2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    keys = [{r["key"] for r in json.loads(o[0])["results"]} for o in outs]
    assert keys[0] and keys[1] and not keys[0] & keys[1]
    done = _ktl("suite", "merge", str(tmp_path / "s1"), str(tmp_path / "s2"),
                "--out", str(tmp_path / "all"), "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert {r["key"] for r in body["results"]} == keys[0] | keys[1]
    assert body["summary"]["all"]["entries"] == 5 and body["summary"]["all"]["correct"] == 0
    statuses = {r["key"]: (r["status"], r["reason"]) for r in body["results"]}
    assert statuses["level1/2_B"] == ("incorrect", "no solution was given for this problem")
    assert "ModelNew" in statuses["level2/3_E"][1]
    for name in ("summary.json", "results.json", "results.csv"):
        assert (tmp_path / "all" / name).is_file()
    assert _ktl("suite", "merge", str(tmp_path / "nothing"), "--out",
                str(tmp_path / "x")).returncode == 2


def test_shards_partition_the_entries(tmp_path: Path) -> None:
    entries = discover(_settings(tmp_path))
    parts = [shard_of(entries, (k, 3)) for k in (1, 2, 3)]
    assert sorted(e.key for p in parts for e in p) == sorted(e.key for e in entries)


@pytest.mark.slow
def test_suite_over_our_own_problems_end_to_end(tmp_path: Path) -> None:
    done = _ktl("suite", "run", str(SUITE), str(SUITE / "solutions" / "honest"), "--level", "3",
                "--bench-runs", "1", "--time-budget", "2", "--out", str(tmp_path / "o"), "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    (row,) = body["results"]
    assert row["status"] == "correct" and row["speedup"] is not None, row
    assert body["summary"]["all"]["correct_pct"] == 100.0


def test_exceeding_ktls_own_memory_bound_is_said_not_a_kill(tmp_path: Path) -> None:
    """`--memory-limit` bounds ktl's own process (RLIMIT_DATA): a solutions file larger than
    the bound ends with the bound in numbers and exit 6, never a signal."""
    problems = tmp_path / "p"
    (problems / "level1").mkdir(parents=True)
    (problems / "level1" / "1_A.py").write_text(PROBLEM)
    line = json.dumps({"level": 1, "problem_id": 1, "kernel": "x" * (1 << 20)}) + "\n"
    (tmp_path / "s.jsonl").write_text(line * 60)
    done = _ktl("suite", "run", str(problems), str(tmp_path / "s.jsonl"), "--no-bench",
                "--memory-limit", "170M", "--out", str(tmp_path / "o"))
    assert done.returncode == EXIT_MEMORY, (done.returncode, done.stderr[-400:])
    assert "ktl reached its own memory bound: 178,257,920 bytes" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_step_past_the_memory_bound_is_a_refusal_in_numbers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `ktl` step that reached the bound (exit 6) makes its entry refused, with the bound,
    counted under its own kind in the summary."""
    import client.suite._run as run

    monkeypatch.setattr(run, "KTL", (sys.executable, "-c", "raise SystemExit(6)"))
    settings = _settings(tmp_path)
    entry = next(e for e in discover(settings) if e.solution is not None)
    result = run.run_entry(entry, settings, None)
    assert result.status == "refused" and "ktl's own memory bound" in result.reason
    assert summarize([result])["all"]["refused"] == {"ktl's own memory bound": 1}


def test_memory_limit_sizes() -> None:
    assert parse_size("8G") == 8 << 30 and parse_size("512M") == 512 << 20
    assert parse_size("auto") == default_bound() > 0
    for bad in ("lots", "1K", "-3G"):
        with pytest.raises(InputError):
            parse_size(bad)
