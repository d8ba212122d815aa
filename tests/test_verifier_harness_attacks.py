"""Kernels that try to make the harness fall over (issue 22): each gets a report and a verdict.

Whatever arrives from the kernel's process is the kernel's: a malformed answer is a typed
fault of the kernel; a manifest nested 2,000 deep is a typed manifest error; a private
folder 3,000 levels deep is cleaned up without recursion and never costs the report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from verifier import bench, check
from verifier.errors import KernelSpecError
from verifier.kernel import MAX_MANIFEST_DEPTH, KernelSpec
from verifier.sandbox import remove_tree, scratch_dir

ROOT = Path(__file__).resolve().parent.parent
FLAWED = ROOT / "tests" / "flawed_kernels"
MANIFEST = (FLAWED / "answer_status" / "kernel.toml").read_bytes()


def _ktl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from client.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
                          env=env)


# -- the answer pipe -----------------------------------------------------------------------


def test_a_status_written_into_the_answer_pipe_is_the_kernels_fault() -> None:
    report = check(FLAWED / "answer_status", budget="quick", seed=1)
    faults = {c.fault.kind for c in report.checks if c.fault is not None}
    assert not report.passed
    assert "bad_answer" in faults, [c.to_json() for c in report.failures]
    row = report.get("correctness.random")
    assert row.outcome == "fail" and "malformed answer" in row.detail


def test_ktl_check_reports_the_malformed_answer_and_exits_1() -> None:
    out = _ktl("check", "tests/flawed_kernels/answer_status", "--json", "--seed", "1")
    assert out.returncode == 1, out.stderr[-2000:]
    body = json.loads(out.stdout)
    assert body["verdict"] == "fail"
    assert any(c.get("fault", {}).get("kind") == "bad_answer" for c in body["checks"])


def test_bench_of_a_malformed_answer_is_an_untrusted_report() -> None:
    report = bench(FLAWED / "answer_status", shapes=[{"R": 8, "C": 64}], seed=1,
                   time_budget_s=1)
    assert not report.trusted and report.results == ()
    assert "child_failed" in {f.kind for f in report.faults}
    assert any("malformed answer" in f.detail for f in report.faults), report.faults


# -- the manifest --------------------------------------------------------------------------


@pytest.mark.parametrize("nested", [b"[" * 2000 + b"]" * 2000, b"{a = " * 2000 + b"1" + b"}" * 2000,
                                    b"[" * (MAX_MANIFEST_DEPTH + 1) + b"]" * (MAX_MANIFEST_DEPTH + 1)])
def test_a_deeply_nested_manifest_is_a_typed_error(nested: bytes) -> None:
    with pytest.raises(KernelSpecError, match="nested"):
        KernelSpec.parse(MANIFEST + b"\nbomb = " + nested + b"\n")


def test_brackets_inside_strings_and_comments_are_not_nesting() -> None:
    text = MANIFEST.replace(b'model = "deliberately-flawed"',
                            b'model = "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["  # [[[[[[[[[[[[[[[[[[[[[')
    assert KernelSpec.parse(text).generator.model.startswith("[[[")


def test_ktl_check_of_a_nested_manifest_exits_2_with_words(tmp_path: Path) -> None:
    folder = tmp_path / "bomb"
    folder.mkdir()
    (folder / "k.c").write_bytes((FLAWED / "answer_status" / "k.c").read_bytes())
    (folder / "kernel.toml").write_bytes(MANIFEST + b"\nbomb = " + b"[" * 2000 + b"]" * 2000 + b"\n")
    out = _ktl("check", str(folder))
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and "nested 2000 deep" in out.stderr + out.stdout


# -- clean-up --------------------------------------------------------------------------------


def _deep(top: Path, levels: int) -> None:
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            (open(os.open("f", os.O_CREAT | os.O_WRONLY, dir_fd=fd), "w")).close()
            nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)


@pytest.mark.slow
def test_remove_tree_takes_3000_levels_links_and_locked_folders(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    victim = tmp_path / "victim"
    victim.mkdir()
    _deep(victim, 3000)
    (victim / "link").symlink_to(outside)
    (victim / "loop").symlink_to(victim / "loop")
    locked = victim / "locked"
    (locked / "inner").mkdir(parents=True)
    locked.chmod(0)
    assert remove_tree(victim)
    assert not victim.exists()
    assert (outside / "keep").read_text() == "mine"


def test_scratch_dir_never_raises_and_removes(tmp_path: Path) -> None:
    with scratch_dir("ktl-test-") as work:
        _deep(work, 1100)  # deeper than Python's recursion limit
        kept = work
    assert not kept.exists()


@pytest.mark.slow
def test_a_kernel_that_nests_3000_folders_still_gets_its_report(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    report = check(FLAWED / "deep_folder", budget="quick", seed=2)
    assert report.get("correctness.random").outcome == "pass"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("ktl-check-")]
    assert report.get("escape").outcome == "pass"
