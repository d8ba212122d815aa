"""Round 4 of the torch path's review: each class has an attacker of our own here (or in
the test named beside it), and the honest controls pass.

Unit tests run on the pure parts (the rows, the input stream, the cost rule); the few that
start sandboxed Pythons are marked slow beyond one or two.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from verifier.checks._torch_rows import INTERPRETER_ONLY, exercised_row
from verifier.runtimes import audit_solution

ROOT = Path(__file__).resolve().parent
FLAWED = ROOT / "kernelbench" / "flawed"
SOLUTIONS = ROOT / "kernelbench" / "solutions"


# -- item 7: say what was not exercised ----------------------------------------------------

def test_device_twoface_names_the_branch_it_did_not_run() -> None:
    findings = audit_solution((FLAWED / "device_twoface.py").read_bytes())
    row = exercised_row(findings, "triton", gpu=False)
    assert row.outcome == "skip"
    assert INTERPRETER_ONLY in row.detail
    assert "ran only their the CPU side" not in row.detail
    assert "line 33 (.is_cuda)" in row.detail
    assert row.metrics == {"device_branches": 1.0, "interpreter_only": 1.0}


def test_a_torch_solution_without_device_branches_exercised_everything() -> None:
    findings = audit_solution((SOLUTIONS / "gelu.py").read_bytes())
    row = exercised_row(findings, "torch", gpu=False)
    assert row.outcome == "pass" and row.metrics["device_branches"] == 0.0


def test_an_honest_triton_solution_on_the_cpu_is_interpreter_only() -> None:
    findings = audit_solution((SOLUTIONS / "gelu_triton.py").read_bytes())
    row = exercised_row(findings, "triton", gpu=False)
    assert row.outcome == "skip" and "interpreter path only" in row.detail
    assert exercised_row(findings, "triton", gpu=True).outcome == "pass"


# -- item 1: one cost rule for every runtime --------------------------------------------------

def test_scheduling_class_and_priority_changes_are_refused(tmp_path: Path) -> None:
    """fork_idle.py's caller makes itself SCHED_IDLE so its forked helper's CPU shows as its
    own run-queue wait: refused (EPERM, the run goes on), nice too."""
    import json
    import sys

    from verifier.sandbox import Limits, run_sandboxed

    code = ("import json, os\nout = {}\n"
            "for name, call in (('idle', lambda: os.sched_setscheduler(0, os.SCHED_IDLE, "
            "os.sched_param(0))), ('batch', lambda: os.sched_setscheduler(0, os.SCHED_BATCH, "
            "os.sched_param(0))), ('nice', lambda: os.nice(5)), ('prio', lambda: "
            "os.setpriority(os.PRIO_PROCESS, 0, 10))):\n"
            "    try:\n        call(); out[name] = 'allowed'\n"
            "    except OSError as exc:\n        out[name] = exc.errno\n"
            "out['policy'] = os.sched_getscheduler(0)\nprint(json.dumps(out))\n")
    res = run_sandboxed([sys.executable, "-c", code], tmp_path, Limits())
    assert res.ok, res.stderr
    got = json.loads(res.lines[-1][1])
    assert got == {"idle": 1, "batch": 1, "nice": 1, "prio": 1, "policy": 0}, got


def test_calibration_never_subtracts_more_than_the_baselines_own() -> None:
    from verifier.benchmark._torch_bench import calibration_ns

    assert calibration_ns(5_000_000.0, 40_000.0) == 40_000.0  # a slowed frame reader
    assert calibration_ns(30_000.0, 40_000.0) == 30_000.0


def test_the_worker_binds_its_frame_io_before_the_module_loads() -> None:
    """frame_inflate.py wraps `__main__.read_frame`; the loop reads through objects bound
    before the solution was imported, so the wrapper is never called."""
    import os

    from verifier.worker import _torch_child as driver

    r, w = os.pipe()
    io = driver._FrameIO(r, w)
    calls = []
    saved = driver.read_frame
    driver.read_frame = lambda fd, limit: calls.append(fd) or saved(fd, limit)  # type: ignore[assignment]
    try:
        io.answer({"cmd": "nop"})
        assert io.command() == {"cmd": "nop"}
    finally:
        driver.read_frame = saved  # type: ignore[assignment]
        os.close(r)
        os.close(w)
    assert calls == []
    found = audit_solution((ROOT / "torch_flawed" / "frame_inflate.py").read_bytes())
    assert {"harness_access", "patching"} <= {f.kind for f in found}


@pytest.mark.slow
def test_a_forked_childs_cpu_is_charged_to_the_call(tmp_path: Path) -> None:
    """What the accounting reads, not a timing: the probe's child burns >= 0.3 s of its own
    CPU and exits before the answer; the call's tree CPU includes it."""
    pytest.importorskip("torch")
    from tests.test_torch_check import torch_folder
    from verifier.kernel import KernelSpec
    from verifier.runtimes import Call, TorchKernel, TorchSession, build_extensions
    from verifier.sandbox import Limits
    from verifier.worker import CANDIDATE_GRANTS

    kernel = TorchKernel.from_spec(KernelSpec.load(torch_folder(tmp_path, "fork_burn.py")))
    work = tmp_path / "work"
    work.mkdir()
    limits = Limits(cpu_s=120, wall_s=240.0, address_space=CANDIDATE_GRANTS.address_space,
                    open_files=CANDIDATE_GRANTS.open_files, processes=CANDIDATE_GRANTS.processes)
    session = TorchSession(kernel, work, build_extensions(kernel, work), limits)
    try:
        cand = session.start_candidate()
        session.init(7)
        args = [np.random.default_rng(0).standard_normal((16, 64))]
        session.run([Call(args)], 120.0)
        cand.request({"cmd": "call", "calls": [], "threads": 1, "report": True}, 60.0)
        session.run([Call(args)], 120.0)
        # the last command on the candidate was the call: its tree CPU holds the child's
        assert cand.last_cpu_ns >= 0.3e9 * 0.95, (cand.clock.kind, cand.last_cpu_ns)
        assert cand.clock.kind in ("cgroup", "process-tree")
    finally:
        session.close()


# -- items 3 and 6: inputs beyond the example, special values everywhere, no false failure --

R4 = ROOT / "torch_round4"
MANIFEST = """name = "acme/r4"
version = "0.1.0"
op = "torch"
runtime = "torch"
reference = "reference.py"
solution = "solution.py"
sources = ["reference.py", "solution.py"]
entry = "ModelNew"
flags = []
dtype = "float32"
[generator]
agent = "test"
agent_version = "1"
model = "m"
[target]
hardware_class = "cpu"
"""


def kb_folder(tmp: Path, problem: Path, solution: str | Path) -> Path:
    folder = tmp / "kernel"
    folder.mkdir()
    (folder / "reference.py").write_bytes(problem.read_bytes())
    text = solution.read_text() if isinstance(solution, Path) else solution
    (folder / "solution.py").write_text(text)
    (folder / "kernel.toml").write_text(MANIFEST)
    return folder


def _faults(report: object) -> dict[str, str]:
    return {c.name: c.fault.kind for c in report.checks  # type: ignore[attr-defined]
            if c.fault is not None}


@pytest.mark.slow
def test_the_library_gelu_passes_every_row(tmp_path: Path) -> None:
    """Honest control: F.gelu itself. Its float32 NaN at +inf differs only from the float64
    reference: reported in the row, never failed."""
    pytest.importorskip("torch")
    from verifier import check

    report = check(kb_folder(tmp_path, ROOT / "kernelbench" / "problems" / "gelu.py",
                             R4 / "gelu_library.py"), seed=4)
    assert report.passed, [(c.name, c.detail) for c in report.failures]
    special = report.get("special_values")
    assert special.metrics.get("dtype_reference_only", 0.0) >= 1.0, special.detail
    assert "reported, not failed" in special.detail
    assert report.get("correctness.distributions").outcome == "pass"


@pytest.mark.slow
@pytest.mark.parametrize("problem", ["gelu", "softmax", "layer_norm"])
def test_the_reference_module_itself_passes_every_row(tmp_path: Path, problem: str) -> None:
    pytest.importorskip("torch")
    from verifier import check

    source = (ROOT / "kernelbench" / "problems" / f"{problem}.py").read_text()
    report = check(kb_folder(tmp_path, ROOT / "kernelbench" / "problems" / f"{problem}.py",
                             source + "\n\nclass ModelNew(Model):\n    pass\n"), seed=5)
    assert report.passed, [(c.name, c.detail) for c in report.failures]


@pytest.mark.slow
@pytest.mark.parametrize(("problem", "solution", "row"), [
    (ROOT / "kernelbench" / "problems" / "softmax.py", "softmax_nomax", "correctness.distributions"),
    (R4 / "exp_rand_problem.py", "exp_poly", "correctness.distributions"),
    (R4 / "matmul2_problem.py", "matmul_bsane", "special_values"),
])
def test_inputs_only_like_the_example_are_not_enough(tmp_path: Path, problem: Path,
                                                     solution: str, row: str) -> None:
    pytest.importorskip("torch")
    from verifier import check

    report = check(kb_folder(tmp_path, problem, R4 / f"{solution}.py"), seed=6)
    got = _faults(report)
    assert row in got, [(c.name, c.outcome, c.detail) for c in report.checks]
    assert report.get("correctness.random").outcome == "pass"  # the example's inputs pass


# -- item 4: nothing the candidate chooses reaches a statement unbounded ----------------------

@pytest.mark.slow
def test_candidate_strings_reach_the_report_only_as_summaries(tmp_path: Path) -> None:
    """host_names.py names a buffer after the host and raises with its text: the report
    says how many entries and which exception class, with digests, never the words."""
    pytest.importorskip("torch")
    import json

    from tests.test_torch_check import torch_folder
    from verifier import check

    report = check(torch_folder(tmp_path, "host_names.py"), seed=3)
    text = json.dumps(report.to_predicate().to_json())
    assert "LEAKMARK" not in text
    raised = report.get("correctness.random")
    assert raised.outcome == "fail" and "ValueError (message of" in raised.detail
    assert "sha256" in report.get("reference").detail


def test_summaries_are_bounded_and_typed() -> None:
    from verifier.sandbox import exception_summary, names_summary, text_summary

    assert exception_summary("ValueError: 00:11:22:33:44:55") .startswith("ValueError (message of 17 bytes, sha256 ")
    assert "00:11" not in exception_summary("ValueError: 00:11:22:33:44:55")
    own = exception_summary("HostIs_db01: secret")
    assert own.startswith("an exception of its own class") and "db01" not in own
    assert exception_summary("no colon here").startswith("an exception of its own class")
    assert names_summary(["a", "b"], "entries").startswith("2 entries, sha256 ")
    assert len(text_summary("x" * 10_000_000)) < 80


def test_stderr_is_summarised_naming_only_the_workers_own_lines() -> None:
    from verifier.sandbox import stderr_summary

    got = stderr_summary("host db01 00:11:22:33:44:55\ncannot load the kernel library: db01.so")
    assert got.startswith("stderr of ") and "db01" not in got and "00:11" not in got
    assert "'cannot load the kernel library' does" in got
    assert "last line" not in stderr_summary("anything at all\n/home/alice/.venv")
