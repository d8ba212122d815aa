"""The real `ktl check` and `ktl bench` commands: tables, --json bodies, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from client.cli.kernel import parse_shape
from client.errors import InputError

ROOT = Path(__file__).resolve().parent.parent


def _ktl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from client.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=240, cwd=ROOT, check=False)


def test_check_honest_prints_rows_and_exits_0() -> None:
    out = _ktl("check", "examples/sum-rows", "--seed", "3")
    assert out.returncode == 0, out.stderr
    for name in ("correctness.random", "guards.canaries", "sanitizer.asan_ubsan"):
        assert name in out.stdout
    assert "PASS" in out.stdout


def test_check_flawed_json_exits_1() -> None:
    out = _ktl("check", "tests/flawed_kernels/oob_write", "--json", "--seed", "1")
    assert out.returncode == 1
    body = json.loads(out.stdout)
    assert body["verdict"] == "fail" and body["seed"] == 1
    assert any(c["name"] == "guards.canaries" and c["outcome"] == "fail" for c in body["checks"])


def test_check_bad_folder_exits_2() -> None:
    out = _ktl("check", "no-such-kernel")
    assert out.returncode == 2 and "not a folder" in out.stderr


@pytest.mark.slow  # 7-11 s, among make test's longest: CI's slow step runs it
def test_bench_json_and_samples(tmp_path: Path) -> None:
    samples = tmp_path / "samples.json"
    out = _ktl("bench", "examples/sum-rows", "--json", "--shape", "R=64,C=256", "--time-budget", "1",
               "--seed", "9", "--samples-out", str(samples), "--runs", "2")
    assert out.returncode in (0, 1), out.stderr
    body = json.loads(out.stdout)
    assert body["workload"]["shapes"] == [{"R": 64, "C": 256}] and body["workload"]["seed"] == 9
    assert body["samples"]["size"] == len(samples.read_bytes())
    runs = json.loads(samples.read_bytes())["runs"]
    # an untrusted first run ends the set (a loaded machine): then one run's samples
    assert runs and all(r["seed"] == 9 for r in runs)
    assert len(runs) == 2 or (len(runs) == 1 and not body["trusted"])
    if body["trusted"]:
        assert body["schema_version"] == 2 and body["method"]["runs"] == 2
        assert len(body["results"][0]["runs"]) == 2 and body["method"]["cpu_pinned"] is True
    assert out.returncode == (0 if body["trusted"] else 1)


@pytest.mark.slow  # 7-11 s, among make test's longest: CI's slow step runs it
def test_bench_escaping_work_exits_1() -> None:
    """The lazy kernel is never trusted, and for the right reason on a loaded machine too:
    the thread each call starts is still running at the call's answer."""
    out = _ktl("bench", "tests/flawed_kernels/lazy_output", "--shape", "R=128,C=512",
               "--time-budget", "2")
    assert out.returncode == 1
    assert "trusted: NO" in out.stdout
    assert "work escaping the timed call" in out.stdout, out.stdout


def _ktl_measured(*args: str) -> tuple[subprocess.CompletedProcess[str], float, int]:
    """Run `ktl` in a fresh process; (result, wall seconds, peak RSS of ktl and its children)."""
    code = ("import resource, subprocess, sys, time\n"
            "t = time.monotonic()\n"
            "p = subprocess.run([sys.executable, '-c', 'from client.cli import main; main()', "
            "*sys.argv[1:]], capture_output=True, text=True, timeout=240)\n"
            "sys.stderr.write(p.stderr)\n"
            "print(p.stdout)\n"
            "print('KTL-MEASURED', p.returncode, time.monotonic() - t, "
            "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         timeout=300, cwd=ROOT, check=False)
    last = [line for line in out.stdout.splitlines() if line.startswith("KTL-MEASURED")][-1].split()
    return (subprocess.CompletedProcess(out.args, int(last[1]), out.stdout, out.stderr),
            float(last[2]), int(last[3]) * 1024)


@pytest.mark.slow  # over 10 s of make test's CPU; CI runs it in make slow
def test_fifo_swapping_kernel_neither_hangs_nor_bloats_ktl() -> None:
    """Attack 10: the kernel swaps every file a harness might read back for a FIFO."""
    for args in (("check", "tests/flawed_kernels/fifo_swap", "--seed", "1"),
                 ("bench", "tests/flawed_kernels/fifo_swap", "--shape", "R=128,C=512",
                  "--time-budget", "2")):
        out, wall, rss = _ktl_measured(*args)
        assert out.returncode in (0, 1), out.stderr
        assert wall < 200 and rss < 1536 * 2**20, (wall, rss)


def test_bench_bad_shape_exits_2() -> None:
    out = _ktl("bench", "examples/sum-rows", "--shape", "R=1;rm")
    assert out.returncode == 2 and "--shape" in out.stderr


def test_parse_shape() -> None:
    assert parse_shape("M=256,N=1,K=7") == {"M": 256, "N": 1, "K": 7}
    for bad in ("", "M", "M=", "M=1,M=2", "M=-1", "1=2", "M=1,,N=2"):
        with pytest.raises(InputError):
            parse_shape(bad)


@pytest.mark.slow  # about 20 s of make test's CPU; CI runs it in make slow
def test_bench_cold_on_the_device_path_records_the_mode_and_the_mid_batch_samples() -> None:
    """`--device cpu` runs a torch kernel on the device path without a GPU (torch's CPU
    build): `--cold` flushes the L2 between calls and the statement says so."""
    pytest.importorskip("torch", reason="torch is installed by `make test`")
    args = ("bench", "examples/torch-rmsnorm", "--device", "cpu", "--json", "--runs", "1",
            "--time-budget", "1", "--seed", "2")
    for cold in (True, False):
        out = _ktl(*args, *(("--cold",) if cold else ()))
        assert out.returncode in (0, 1), out.stderr
        body = json.loads(out.stdout)
        assert body["device"]["cold"] is cold and body["device"]["model"]
        conditions = body["device_conditions"]
        assert 0 < conditions.get("during_samples", 0) <= conditions["samples"]
        assert out.returncode == (0 if body["trusted"] else 1)


@pytest.mark.slow
def test_bench_cold_or_a_device_where_there_is_none_exits_2() -> None:
    from verifier import gpu as _gpu

    refused = [("examples/sum-rows", "--shape", "R=64,C=256", "--cold"),
               ("examples/sum-rows", "--device", "cpu")]
    if _gpu.probe().error is not None:
        refused.append(("examples/sum-rows", "--device", "cuda"))
    for args in refused:
        out = _ktl("bench", *args, "--time-budget", "1", "--runs", "1")
        assert out.returncode == 2, (args, out.stderr)
        assert "--cold" in out.stderr or "--device" in out.stderr, out.stderr
    out = _ktl("bench", "examples/sum-rows", "--device", "tpu")
    assert out.returncode == 2 and "--device" in out.stderr
