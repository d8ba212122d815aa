"""The sandbox: limits, scrubbed environment, private folder, timeouts, and runtimes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from verifier import KernelSpec, RuntimeUnavailableError, check, get_runtime
from verifier.sandbox import Limits, base_env, run_sandboxed

PROBE = """
import json, os, resource
limits = {name: resource.getrlimit(getattr(resource, name))
          for name in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE",
                       "RLIMIT_NPROC")}
print(json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "limits": limits,
                  "ns": os.readlink("/proc/self/ns/net")}))
"""


def test_child_gets_limits_scrubbed_env_and_private_cwd(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTL_SECRET_TOKEN", "do-not-leak")
    limits = Limits(cpu_s=7, wall_s=30, address_space=2 * 1024**3, file_size=1234567, open_files=33)
    res = run_sandboxed([sys.executable, "-c", PROBE], tmp_path, limits)
    assert res.ok, res.stderr
    probe = json.loads(res.lines[-1][1])
    assert "KTL_SECRET_TOKEN" not in probe["env"]
    assert set(probe["env"]) == {*base_env(), "HOME", "TMPDIR", "PYTHONPATH"}
    assert probe["env"]["HOME"] == probe["env"]["TMPDIR"] == str(tmp_path)
    assert probe["cwd"] == str(tmp_path)
    assert probe["limits"]["RLIMIT_CPU"] == [7, 8]
    assert probe["limits"]["RLIMIT_AS"] == [2 * 1024**3] * 2
    assert probe["limits"]["RLIMIT_FSIZE"] == [1234567] * 2
    assert probe["limits"]["RLIMIT_NOFILE"] == [33, 33]
    assert probe["limits"]["RLIMIT_CORE"] == [0, 0]
    if res.layers.user_namespace:
        assert probe["limits"]["RLIMIT_NPROC"] == [limits.processes] * 2
    assert res.layers.network_namespace == (probe["ns"] != os.readlink("/proc/self/ns/net"))


def test_wall_clock_timeout_kills_the_group(tmp_path: Path) -> None:
    code = "import os, time\nos.fork()\ntime.sleep(60)"
    res = run_sandboxed([sys.executable, "-c", code], tmp_path, Limits(wall_s=1.0))
    assert res.timed_out and not res.ok and res.wall_s < 10
    assert res.describe(Limits(wall_s=1.0)).startswith("hang")


def test_crash_and_cpu_limit_are_described(tmp_path: Path) -> None:
    res = run_sandboxed([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"],
                        tmp_path, Limits())
    assert "SIGSEGV" in res.describe(Limits())
    spin = run_sandboxed([sys.executable, "-c", "while True: pass"], tmp_path,
                         Limits(cpu_s=1, wall_s=30))
    assert "CPU-time limit" in spin.describe(Limits(cpu_s=1))


def test_planned_runtimes_report_unavailable(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    (tmp_path / "kernel.toml").write_text(
        'name = "acme/cu"\nversion = "1"\nop = "sum"\nruntime = "cuda"\nsources = ["k.cu"]\n'
        'entry = "k"\n[generator]\nagent = "a"\nagent_version = "1"\nmodel = "m"\n'
        '[target]\nhardware_class = "sm_90"\n')
    spec = KernelSpec.load(tmp_path)
    assert get_runtime("cuda").unavailable_reason()
    with pytest.raises(RuntimeUnavailableError):
        get_runtime("cuda").build(spec, "release", tmp_path / "build")
    report = check(tmp_path, budget="quick", seed=1)
    assert not report.passed and report.get("build").outcome == "error"


def test_build_failure_is_a_failed_check(tmp_path: Path) -> None:
    (tmp_path / "k.c").write_text("this is not C\n")
    (tmp_path / "kernel.toml").write_text(
        'name = "acme/bad"\nversion = "1"\nop = "sum"\nruntime = "c"\nsources = ["k.c"]\n'
        'entry = "k"\n[generator]\nagent = "a"\nagent_version = "1"\nmodel = "m"\n'
        '[target]\nhardware_class = "x86_64"\n')
    report = check(tmp_path, budget="quick", seed=1)
    build = report.get("build")
    assert build.outcome == "fail" and build.fault is not None and build.fault.kind == "build"


def test_missing_entry_symbol_is_a_verdict(tmp_path: Path) -> None:
    (tmp_path / "k.c").write_text("void other(void) {}\n")
    (tmp_path / "kernel.toml").write_text(
        'name = "acme/noentry"\nversion = "1"\nop = "sum"\nruntime = "c"\nsources = ["k.c"]\n'
        'entry = "sum_rows"\n[generator]\nagent = "a"\nagent_version = "1"\nmodel = "m"\n'
        '[target]\nhardware_class = "x86_64"\n')
    report = check(tmp_path, budget="quick", seed=1)
    assert not report.passed  # the linker refuses it: the kernel never runs
    build = report.get("build")
    assert build.outcome == "fail" and build.fault is not None and build.fault.kind == "build"


def test_filesystem_is_confined_to_the_private_folder(tmp_path: Path) -> None:
    from verifier.sandbox import _landlock

    if _landlock.abi_version() < 1:
        pytest.skip("no Landlock in this kernel")
    secret = tmp_path / "signing-key.pem"
    secret.write_text("private")
    work = tmp_path / "work"
    work.mkdir()
    code = (
        "import os, sys\n"
        f"for path in ({str(secret)!r}, '/etc/hostname', '/root', "
        f"{str(Path(__file__).resolve().parent.parent / 'pyproject.toml')!r}):\n"
        "    try:\n"
        "        open(path).read() if os.path.isfile(path) else os.listdir(path)\n"
        "        print('READ', path)\n"
        "    except OSError as exc:\n"
        "        print('DENIED', path, exc.errno)\n"
        f"try:\n    open({str(tmp_path / 'planted')!r}, 'w').write('x'); print('WROTE')\n"
        "except OSError:\n    print('NOWRITE')\n"
        "open('inside.txt', 'w').write('ok'); print('INSIDE')\n"
    )
    res = run_sandboxed([sys.executable, "-c", code], work, Limits())
    out = [line for _, line in res.lines]
    assert res.ok, res.stderr
    assert all(not line.startswith("READ") for line in out), out
    assert "NOWRITE" in out and "INSIDE" in out
    assert not (tmp_path / "planted").exists() and (work / "inside.txt").read_text() == "ok"


def test_child_cannot_signal_its_parent_and_dies_opening_tcp(tmp_path: Path) -> None:
    from verifier.sandbox import _landlock

    if _landlock.abi_version() < 6:
        pytest.skip("Landlock signal scoping needs ABI 6")
    code = (
        "import os, socket\n"
        "try:\n    os.kill(os.getppid(), 0); print('SIGNALLED')\n"
        "except PermissionError:\n    print('NOSIGNAL', flush=True)\n"
        "try:\n    socket.create_connection(('127.0.0.1', 9), timeout=1); print('CONNECTED')\n"
        "except OSError as exc:\n    print('NOCONNECT', exc.errno)\n"
    )
    res = run_sandboxed([sys.executable, "-c", code], tmp_path, Limits())
    out = [line for _, line in res.lines]
    assert "NOSIGNAL" in out and not any(line.startswith(("CONNECTED", "NOCONNECT")) for line in out)
    assert res.denied_syscall == "socket" and not res.ok, res


def test_host_identity_is_hidden_from_the_child(tmp_path: Path) -> None:
    """Round 4: a candidate named its state buffers after the host's MAC, launcher path and
    cgroup names. The sandbox shows none of them: /sys keeps only the CPU topology, the host
    name is fixed, /proc/self/cgroup is rooted at the run's group, /proc/1/cmdline is wiped."""
    import socket

    from verifier.sandbox import _landlock

    work = tmp_path / "work"
    work.mkdir()
    code = (
        "import glob, json, os, socket\n"
        "out = {'host': socket.gethostname(), 'macs': [], 'cmdline': '', 'cgroup': ''}\n"
        "for path in glob.glob('/sys/class/net/*/address') + "
        "glob.glob('/sys/devices/**/net/*/address', recursive=True)[:64]:\n"
        "    try:\n        out['macs'].append(open(path).read().strip())\n"
        "    except OSError:\n        pass\n"
        "for key, path in (('cmdline', '/proc/1/cmdline'), ('cgroup', '/proc/self/cgroup')):\n"
        "    try:\n        out[key] = open(path, 'rb').read().decode(errors='replace')\n"
        "    except OSError:\n        pass\n"
        "out['topology'] = os.path.exists('/sys/devices/system/cpu/online')\n"
        "print(json.dumps(out))\n")
    res = run_sandboxed([sys.executable, "-c", code], work, Limits())
    assert res.ok, res.stderr
    seen = json.loads(res.lines[-1][1])
    assert seen["host"] == "ktl-sandbox" or socket.gethostname() == seen["host"] == "ktl-sandbox"
    assert seen["cmdline"].strip("\0") == "", seen["cmdline"]
    assert sys.executable not in seen["cmdline"] and str(tmp_path) not in seen["cmdline"]
    for line in seen["cgroup"].splitlines():
        assert line.rsplit(":", 1)[-1] == "/", seen["cgroup"]
    if _landlock.abi_version() >= 1:
        assert seen["macs"] == [], seen["macs"]
        assert seen["topology"]
