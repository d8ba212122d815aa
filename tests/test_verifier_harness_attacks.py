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

from verifier import BenchSettings, bench, check
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
    report = bench(FLAWED / "answer_status",
                   BenchSettings(shapes=[{"R": 8, "C": 64}], seed=1, time_budget_s=1))
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


# -- the compiler and its diagnostics ---------------------------------------------------------


def _host_secrets() -> list[str]:
    found = []
    for path in [*Path("/sys/class/net").glob("*/address"), Path("/etc/hostname")]:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if len(text) >= 4 and text != "00:00:00:00:00:00":
            found.append(text)
    return found


def test_an_include_of_host_files_leaks_nothing_into_the_report() -> None:
    report = check(FLAWED / "include_host", budget="quick", seed=1)
    row = report.get("build")
    assert row.outcome == "fail" and row.fault is not None and row.fault.kind == "build"
    assert "k.c:6: fatal error" in row.detail and "Permission denied" in row.detail
    body = json.dumps(report.to_json())
    for secret in _host_secrets():
        assert secret not in body
        for part in secret.split(":"):
            if len(part) >= 3:
                assert f"'{part}'" not in body


GCC_STDERR = """In file included from k.c:6:
/sys/class/net/eth0/address:1:3: error: expected identifier or \u2018(\u2019 before \u2018:\u2019 token
    1 | 02:fc:00:00:00:01
      |   ^
k.c:9:5: error: unknown type name \u2018fe\u2019
    9 | fe d5 a3 65
      | ^~
k.c:12: warning: "SECRET" redefined
/usr/bin/ld: k.o: in function `f': k.c:(.text+0x5): undefined reference to `host_key_02fc'
collect2: error: ld returned 1 exit status
"""


def test_diagnostics_keep_file_line_kind_and_drop_what_was_read() -> None:
    from verifier.runtimes._build import MAX_DIAGNOSTICS, reduce_diagnostics

    text = reduce_diagnostics(GCC_STDERR)
    assert "<address>:1: error: expected identifier or '…' before '…' token" in text
    assert "k.c:9: error: unknown type name '…'" in text
    assert "k.c:12: warning: '…' redefined" in text
    assert "linker: undefined reference to '…'" in text
    for leaked in ("02:fc", "fe d5", "SECRET", "host_key", "/sys/class", "In file included"):
        assert leaked not in text
    flood = reduce_diagnostics("k.c:1:1: error: x\n" * 10 + "".join(
        f"k.c:{i}:1: error: e\n" for i in range(2, 1000)))
    assert flood.count("; ") <= MAX_DIAGNOSTICS + 1 and "more diagnostics not shown" in flood


def test_nvcc_diagnostics_are_kept_in_their_own_format_and_reduced_the_same_way() -> None:
    from verifier.runtimes._build import reduce_diagnostics

    text = reduce_diagnostics('k.cu(1): error: expected a declaration\n  this is not CUDA\n  ^\n'
                              '/sys/class/net/eth0/address(1): error: identifier "fe" is undefined\n'
                              '1 error detected in the compilation of "k.cu".\n')
    assert "k.cu:1: error: expected a declaration" in text
    assert "<address>:1: error: identifier '…' is undefined" in text
    for leaked in ("this is not CUDA", '"fe"', "/sys/class"):
        assert leaked not in text
