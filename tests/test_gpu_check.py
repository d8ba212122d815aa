"""benchmarks/gpu_check.sh without a GPU (issue 44): its syntax, its steps against the table
it fills and the fake device's attackers, and its dry run (KTL_GPU_CHECK_FAKE=1), which
runs every step's plumbing on the fake device and must pass as a GPU run would."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _steps() -> list[tuple[str, str, str]]:
    """(expected, kind, label) of each step line of the script."""
    text = SCRIPT.read_text().replace("\\\n", " ")
    found = re.findall(r'^run \d+ ("[^"]+"|\S+) (bench|attack|reproduce) "\$OUT" (\w+)', text, re.M)
    return [(e.strip('"'), kind, label) for e, kind, label in found]


def test_the_script_parses() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_the_table_lists_the_scripts_steps_and_every_attacker_has_a_fake_twin() -> None:
    steps = _steps()
    assert tuple(label for _, _, label in steps) == _module("gpu_table").STEPS
    fakes = _module("bench_gpu_steps").FAKE_ATTACKS
    text = SCRIPT.read_text()
    for solution in re.findall(r"tests/[a-z_]+/([a-z_]+)\.py", text):
        assert solution in fakes, solution
    attacks = [(e, label) for e, kind, label in steps if kind == "attack"]
    assert len(attacks) == 8 and all(e.startswith("refused:") for e, _ in attacks)
    assert ("refused:side_stream", "attack_sidestream") in attacks  # a typed fault, not a doubt


def test_a_table_row_says_when_an_attack_was_not_refused_or_a_step_left_nothing() -> None:
    row = _module("gpu_table").row
    line = {"speedup": 2.0, "ci95": [1.9, 2.1], "trusted": True, "faults": [], "refused": False,
            "seconds": 3.0}
    assert "NOT refused: none" in row("attack_sidestream", line)
    assert "not run" in row("triton_rmsnorm", None)
    bench = {**line, "modes": [{"cold": False, "speedup": 2.0, "ci95": [1.9, 2.1], "n": 40}]}
    assert "warm 2x [1.9, 2.1] ±5.0 %, n=40; trusted" in row("triton_rmsnorm", bench)


def test_the_scripts_expectations_fail_what_a_gpu_run_must_not_pass() -> None:
    """benchmarks/gpu_table.py's `meets`, which gpu_check.sh asks of every step's line."""
    gt = _module("gpu_table")
    ok = {"trusted": True, "during_samples": 12, "cold": False, "seconds": 41.0,
          "modes": [{"cold": False}, {"cold": True}]}
    assert gt.meets("ok", ok) and not gt.meets("cold", ok)
    assert gt.meets("cold", {**ok, "cold": True})
    for bad in ({"trusted": False}, {"during_samples": 0}, {"seconds": 61.0},
                {"modes": [{"cold": False}]}, {"seconds": None}):
        assert not gt.meets("ok", {**ok, **bad}), bad
    refused = {"refused": True, "trusted": False, "faults": ["late_work"]}
    assert not gt.meets("refused:side_stream", refused)  # charged and untrusted is not enough
    assert gt.meets("refused:side_stream", {**refused, "faults": ["side_stream"]})
    assert gt.meets("refused:escaped_work|outputs_wrong", {**refused, "faults": ["outputs_wrong"]})
    assert not gt.meets("refused:outputs_wrong", {**refused, "faults": ["outputs_wrong"],
                                                  "trusted": True})
    assert gt.meets("confirmed", {"verdicts": ["confirmed"]})
    assert not gt.meets("confirmed", {"verdicts": ["confirmed", "inconclusive"]})
    assert not gt.meets("confirmed", {"verdicts": []}) and not gt.meets("ok", None)
    assert gt.meets("any", None)
    assert gt.parse_line('x: {"trusted": true}') == {"trusted": True}
    assert gt.parse_line("x: no answer: boom") is None
    with pytest.raises(ValueError):
        gt.meets("fine", {})


@pytest.mark.slow  # a dozen Python processes importing the verifier: about a minute
def test_the_dry_run_passes_every_step_on_the_fake_device(tmp_path: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    env.pop("KTL_GPU_CHECK_FAKE", None)
    done = subprocess.run(["bash", str(SCRIPT), "--fake"], env=env, capture_output=True,
                          text=True, timeout=400)
    summary = (tmp_path / "summary.txt").read_text()
    assert done.returncode == 0, summary + done.stderr
    for expected, kind, label in _steps():
        line = next(x for x in summary.splitlines() if f"] {label}: {{" in x)
        if kind == "attack":
            assert '"refused": true' in line and re.search(expected.split(":")[1], line), line
        elif kind == "reproduce":
            assert '"verdicts": ["confirmed"]' in line and '"runs": 3' in line
        else:
            assert '"trusted": true' in line and '"cold": true' in line.split('"modes"')[1]
        assert (tmp_path / f"{label}.json").is_file()
    assert "expected" not in summary  # no step missed what it should give
    table = (tmp_path / "table.md").read_text()
    assert table.count("\n| `") == len(_steps()) + 1 and "NOT" not in table
