"""Attacks on the sandbox itself (issue 10, item 7): each a kernel of ours, each caught.

Every kernel here tries to reach outside its sandbox. The test runs the real
`check` on it and asserts the right row fails with the right reason (or, for an
attack whose only effect would be a leak, that nothing leaked), and that the
process running the check neither dies, hangs nor grows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import resource
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier import check
from verifier.sandbox import Limits, probe_layers, run_sandboxed
from verifier.sandbox._layers import NO_LAYERS, SandboxLayers
from verifier.sandbox._output import CappedReader
from verifier.sandbox._seccomp import (
    ADDRESS_TABLES,
    AUDIT_ARCH_AARCH64,
    AUDIT_ARCH_X86_64,
    CLONE_NAMESPACES,
    DENIED,
    RET_ALLOW,
    RET_KILL_PROCESS,
    RET_USER_NOTIF,
    TABLES,
    build_address_filter,
    build_filter,
    parse_notification,
)

ROOT = Path(__file__).resolve().parent.parent
COST_KERNELS = ROOT / "tests" / "cost_kernels"
FLAWED = ROOT / "tests" / "flawed_kernels"

# kernel -> (the row that must fail, words its detail must contain)
SANDBOX_ATTACKS = {  # attack -> (the row that catches it, the typed fault kind it records)
    "unix_socket": ("correctness.random", "sandbox_violation"),  # socket: denied, run killed
    "prlimit_parent": ("correctness.random", "sandbox_violation"),  # prlimit64 on another pid
    "ptrace_peek": ("correctness.random", "sandbox_violation"),  # ptrace
    "long_line": ("correctness.random", "output_flood"),  # a stdout line past the cap
    "macro_bomb": ("build", "build"),  # the compiler at its memory limit
    # the setsid grandchild, orphaned to the sandbox's reaper, is still a process the kernel
    # left alive at each call's answer
    "fork_escape": ("escape", "escaped"),
}
HARMLESS_ATTACKS = ("root_device",)
"""Attacks the sandbox makes fail silently: the check must pass (nothing leaked, no wait)."""
PARENT_RSS_GROWTH_CAP = 256 * 2**20


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextlib.contextmanager
def _unix_listeners() -> object:
    """The daemons the unix_socket kernel knocks on (if this machine lets us bind them)."""
    socks = []
    for addr in ("/tmp/ktl-attack-unix.sock", "\0ktl-attack-abstract"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if not addr.startswith("\0"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(addr)
            sock.bind(addr)
            sock.listen(4)
            sock.setblocking(False)
            socks.append(sock)
        except OSError:
            sock.close()
    try:
        yield socks
    finally:
        for sock in socks:
            name = sock.getsockname()
            sock.close()
            if isinstance(name, str) and name.startswith("/"):
                with contextlib.suppress(OSError):
                    os.unlink(name)


@pytest.mark.parametrize("name", sorted(SANDBOX_ATTACKS))
def test_sandbox_attack_is_caught_and_ktl_survives(name: str) -> None:
    cpu_before = resource.getrlimit(resource.RLIMIT_CPU)
    rss_before = _peak_rss()
    start = time.monotonic()
    with _unix_listeners() as listeners:
        report = check(FLAWED / name, budget="quick", seed=1)
        for sock in listeners:  # type: ignore[attr-defined]
            with pytest.raises(BlockingIOError):
                sock.accept()  # nobody got through
    row, kind = SANDBOX_ATTACKS[name]
    found = report.get(row)
    assert found.outcome == "fail", found.detail
    assert found.fault is not None and found.fault.kind == kind, found
    assert not report.passed
    assert resource.getrlimit(resource.RLIMIT_CPU) == cpu_before  # the judge kept its CPU
    assert _peak_rss() - rss_before < PARENT_RSS_GROWTH_CAP
    assert time.monotonic() - start < 120


def _escapees() -> list[str]:
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        with contextlib.suppress(OSError):
            if comm.read_text().strip() == "ktl-escapee":
                found.append(comm.parent.name)
    return found


@pytest.mark.parametrize("name", HARMLESS_ATTACKS)
def test_silent_attack_gets_nothing_and_leaves_nothing(name: str) -> None:
    start = time.monotonic()
    report = check(FLAWED / name, budget="quick", seed=1)
    # no leak in outputs: every row passes but the static audit, which sees the attempt
    assert [c.name for c in report.failures] == ["audit.library"], \
        [(c.name, c.detail) for c in report.failures]
    assert time.monotonic() - start < 120  # did not wait for the sleeping grandchild
    assert _escapees() == []


def test_child_holds_no_capabilities_sees_no_process_and_no_block_device(tmp_path: Path) -> None:
    code = ("import os\n"
            "print([l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1])\n"
            "print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
            "for dev in ('/dev/vda', '/dev/sda', '/dev/loop0', '/dev/mem', '/etc/shadow'):\n"
            "    try:\n        open(dev, 'rb').read(1); print('READ', dev)\n"
            "    except OSError:\n        pass\n")
    res = run_sandboxed([sys.executable, "-c", code], tmp_path, Limits())
    assert res.ok, res.stderr
    out = [line for _, line in res.lines]
    assert not any(line.startswith("READ") for line in out), out
    if res.layers.no_capabilities:
        assert out[0] == "0000000000000000"
    if res.layers.private_proc:
        assert max(eval(out[1])) < 10  # only the sandbox's own few processes
    if os.geteuid() == 0:
        assert res.layers.user_namespace, "as root the child must not keep root's capabilities"


def test_process_count_is_limited(tmp_path: Path) -> None:
    script = "i=0; while [ $i -lt 400 ]; do sleep 5 & i=$((i+1)); done 2>/dev/null; echo forked $i"
    limits = Limits(wall_s=30.0, processes=32)
    res = run_sandboxed(["/bin/sh", "-c", script], tmp_path, limits)
    if not res.layers.process_limit:
        pytest.skip("no process limit here (no user namespace)")
    assert res.layers.process_limit == 32
    assert res.wall_s < 25  # the sleeps died with the run; nobody waited for them


def test_output_total_is_capped_and_kills(tmp_path: Path) -> None:
    limits = Limits(wall_s=30.0, stdout_bytes=1 << 20)
    res = run_sandboxed(["/bin/sh", "-c", "yes short-line"], tmp_path, limits)
    assert res.output_excess == "total" and not res.ok
    assert "more than 1048576 bytes of stdout" in res.describe(limits)
    flood = run_sandboxed(["/bin/sh", "-c", "yes err >&2"], tmp_path,
                          Limits(wall_s=30.0, stderr_bytes=1 << 20))
    assert flood.output_excess == "stderr" and not flood.ok


def test_capped_reader_splits_lines_and_stops_on_excess() -> None:
    rd, wr = os.pipe()
    hits: list[int] = []
    reader = CappedReader(rd, line_bytes=8, total_bytes=64, max_lines=3, on_excess=lambda: hits.append(1))
    reader.start()
    os.write(wr, b"a\nbb\nccc\ndddd\n123456789\n")
    os.close(wr)
    reader.stop()
    os.close(rd)
    assert [line for _, line in reader.lines] == ["a", "bb", "ccc"]  # max_lines kept
    assert reader.excess == "line" and hits == [1]


# -- the filter, run through a small classic-BPF interpreter ---------------------------


def _run_bpf(program: bytes, nr: int, arch: int, args: tuple[int, ...] = (0,) * 6) -> int:
    data = struct.pack("=iIQ6Q", nr, arch, 0, *args)
    code = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    for _ in range(len(code) + 1):
        op, jt, jf, k = code[pc]
        if op == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
        elif op == 0x06:
            return k
        elif op == 0x05:
            pc += k
        elif op in (0x15, 0x45, 0x35):
            hit = acc == k if op == 0x15 else bool(acc & k) if op == 0x45 else acc >= k
            pc += jt if hit else jf
        else:
            raise AssertionError(f"unexpected opcode {op:#x}")
        pc += 1
    raise AssertionError("program did not return")


@pytest.mark.parametrize("arch", [AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64])
@pytest.mark.parametrize("deny", [RET_KILL_PROCESS, RET_USER_NOTIF])
def test_filter_denies_listed_calls_and_checks_arguments(arch: int, deny: int) -> None:
    prog, table = build_filter(deny), TABLES[arch]
    for name in DENIED:
        assert _run_bpf(prog, table[name], arch) == deny, name
    assert _run_bpf(prog, table["prlimit64"], arch) == RET_ALLOW            # on itself
    assert _run_bpf(prog, table["prlimit64"], arch, (4242, 0, 0, 0, 0, 0)) == deny
    assert _run_bpf(prog, table["prlimit64"], arch, (1 << 32, 0, 0, 0, 0, 0)) == deny
    assert _run_bpf(prog, table["setpriority"], arch, (0, 0, 19, 0, 0, 0)) == RET_ALLOW
    assert _run_bpf(prog, table["setpriority"], arch, (0, 77, 19, 0, 0, 0)) == 0x50001  # EPERM
    assert _run_bpf(prog, table["setpriority"], arch, (2, 0, 19, 0, 0, 0)) == 0x50001  # PRIO_USER
    assert _run_bpf(prog, table["sched_setaffinity"], arch, (9, 0, 0, 0, 0, 0)) == 0x50001
    assert _run_bpf(prog, table["clone"], arch, (0x11, 0, 0, 0, 0, 0)) == RET_ALLOW  # fork
    assert _run_bpf(prog, table["clone"], arch, (0x10000011, 0, 0, 0, 0, 0)) == deny
    assert _run_bpf(prog, table["clone3"], arch) == 0x50026                      # ENOSYS
    assert _run_bpf(prog, 0, arch) == RET_ALLOW                                   # an ordinary call


@pytest.mark.parametrize("arch", [AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64])
def test_unaccounted_runs_deny_clone_vm_processes_and_affinity_changes(arch: int) -> None:
    """Without a cgroup, /proc sees a CLONE_VM process as no thread of the worker: denied.
    Threads (CLONE_VM | CLONE_THREAD), forks and vfork-less spawns pass; affinity is fixed."""
    prog, table = build_filter(RET_USER_NOTIF, deny_unaccountable=True), TABLES[arch]
    plain = build_filter(RET_USER_NOTIF)
    thread = 0x3D0F00  # glibc's pthread_create flags (CLONE_VM | CLONE_THREAD | ...)
    helper = 0x100 | 17  # CLONE_VM | SIGCHLD: a process sharing the worker's memory
    vfork = 0x4100 | 17  # CLONE_VM | CLONE_VFORK | SIGCHLD
    for flags, want in ((thread, RET_ALLOW), (0x11, RET_ALLOW), (helper, RET_USER_NOTIF),
                        (vfork, RET_USER_NOTIF), (helper | 0x10000000, RET_USER_NOTIF)):
        assert _run_bpf(prog, table["clone"], arch, (flags, 0, 0, 0, 0, 0)) == want, hex(flags)
    assert _run_bpf(plain, table["clone"], arch, (helper, 0, 0, 0, 0, 0)) == RET_ALLOW
    assert _run_bpf(prog, table["sched_setaffinity"], arch, (0, 8, 0, 0, 0, 0)) == 0x50001
    assert _run_bpf(plain, table["sched_setaffinity"], arch, (0, 8, 0, 0, 0, 0)) == RET_ALLOW
    for name in DENIED:  # the rest is unchanged
        assert _run_bpf(prog, table[name], arch) == RET_USER_NOTIF, name


@pytest.mark.parametrize("arch", [AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64])
def test_gpu_runs_get_local_unix_sockets_only_and_the_rest_unchanged(arch: int) -> None:
    prog, table = build_filter(RET_USER_NOTIF, local_unix_sockets=True), TABLES[arch]
    for name in DENIED:
        want = 0x5000D if name in ("socket", "socketpair") else RET_USER_NOTIF  # EACCES
        assert _run_bpf(prog, table[name], arch, (2, 1, 0, 0, 0, 0)) == want, name  # AF_INET
    for name in ("socket", "socketpair"):
        assert _run_bpf(prog, table[name], arch, (1, 1, 0, 0, 0, 0)) == RET_ALLOW  # AF_UNIX
        assert _run_bpf(prog, table[name], arch, (16, 3, 0, 0, 0, 0)) == 0x5000D  # netlink
        assert _run_bpf(prog, table[name], arch, (1 | 1 << 32, 1, 0, 0, 0, 0)) == RET_ALLOW


@pytest.mark.parametrize("arch", [AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64])
def test_address_filter_refuses_every_addressed_send(arch: int) -> None:
    prog, table = build_address_filter(), ADDRESS_TABLES[arch]
    for name in ("connect", "sendmsg", "sendmmsg"):
        assert _run_bpf(prog, table[name], arch, (3, 0x7FFF0000, 16, 0, 0, 0)) == 0x5000D
    assert _run_bpf(prog, table["sendto"], arch, (3, 1, 1, 0, 0x7FFF0000, 16)) == 0x5000D
    assert _run_bpf(prog, table["sendto"], arch, (3, 1, 1, 0, 1 << 40, 16)) == 0x5000D
    assert _run_bpf(prog, table["sendto"], arch, (3, 1, 1, 0, 0, 0)) == RET_ALLOW  # connected
    assert _run_bpf(prog, TABLES[arch]["socket"], arch) == RET_ALLOW  # left to the main filter
    other = AUDIT_ARCH_AARCH64 if arch == AUDIT_ARCH_X86_64 else AUDIT_ARCH_X86_64
    assert _run_bpf(prog, table["connect"], other, (3, 1, 16, 0, 0, 0)) in (RET_ALLOW, 0x5000D)


_REACH_OUT = r"""
import errno, os, socket, sys
out, dgram = sys.argv[1], sys.argv[2]
def tried(what, fn):
    try:
        fn(); print(what, "ok")
    except OSError as exc:
        print(what, errno.errorcode.get(exc.errno, exc.errno))
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); print("unix socket ok")
tried("connect", lambda: s.connect(out))
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
tried("sendto", lambda: d.sendto(b"secret", dgram))
tried("sendmsg", lambda: d.sendmsg([b"secret"], [], 0, dgram))
tried("inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
a, b = socket.socketpair(); a.sendall(b"x"); print("pair", b.recv(1).decode())
tried("pair sendmsg", lambda: a.sendmsg([b"y"]))  # even unaddressed: BPF cannot tell
"""


def test_gpu_sandbox_unix_sockets_reach_no_daemon_outside(tmp_path: Path) -> None:
    """A GPU run may create AF_UNIX sockets (the driver needs one), but a kernel that
    knocks on a daemon's stream or datagram socket outside reaches nothing."""
    where = Path(tempfile.mkdtemp(prefix="ktl-daemon-"))
    daemon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    journal = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        daemon.bind(str(where / "daemon.sock"))
        daemon.listen(4)
        daemon.settimeout(0.2)
        journal.bind(str(where / "journal.sock"))
        journal.settimeout(0.2)
        os.chmod(where, 0o777)
        for path in where.iterdir():
            os.chmod(path, 0o777)
        work = tmp_path / "work"
        work.mkdir()
        result = run_sandboxed([sys.executable, "-I", "-S", "-c", _REACH_OUT,
                                str(where / "daemon.sock"), str(where / "journal.sock")],
                               work, Limits(wall_s=30.0), gpu=True)
        said = [line for _, line in result.lines]
        if result.layers.seccomp == "none":
            pytest.skip("this kernel offers no seccomp filter")
        assert result.returncode == 0 and result.denied_syscall is None, (said, result.stderr)
        assert said == ["unix socket ok", "connect EACCES", "sendto EACCES", "sendmsg EACCES",
                        "inet EACCES", "pair x", "pair sendmsg EACCES"], said
        with pytest.raises(TimeoutError):
            daemon.accept()
        with pytest.raises(TimeoutError):
            journal.recv(64)
    finally:
        daemon.close()
        journal.close()
        for path in where.iterdir():
            path.unlink()
        where.rmdir()


@given(st.integers(0, 2**32 - 1), st.integers(0, 1023))
def test_filter_kills_unknown_arches_and_x32(arch: int, nr: int) -> None:
    prog = build_filter(RET_USER_NOTIF)
    if arch not in (AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64):
        assert _run_bpf(prog, nr, arch) == RET_KILL_PROCESS
    assert _run_bpf(prog, nr | 0x40000000, AUDIT_ARCH_X86_64) == RET_KILL_PROCESS
    if nr not in TABLES[AUDIT_ARCH_X86_64].values():
        assert _run_bpf(prog, nr, AUDIT_ARCH_X86_64) == RET_ALLOW


def test_clone_namespace_mask_covers_every_namespace_flag() -> None:
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                 0x40000000, 0x00000080):
        assert CLONE_NAMESPACES & flag


def test_notification_parses_and_names_the_call() -> None:
    raw = struct.pack("=QIIiIQ6Q", 7, 1234, 0, 41, AUDIT_ARCH_X86_64, 0, 1, 1, 0, 0, 0, 0)
    note = parse_notification(raw)
    assert (note.id, note.pid, note.name, note.args[0]) == (7, 1234, "socket", 1)
    assert parse_notification(struct.pack("=QIIiIQ6Q", 1, 1, 0, 9999, 1, 0, *[0] * 6)).name \
        == "syscall 9999 (arch 0x1)"
    with pytest.raises(ValueError, match="80 bytes"):
        parse_notification(raw[:-1])


def test_layers_round_trip_and_reject_bad_input() -> None:
    full = SandboxLayers(True, True, True, True, True, "notify", 7, True, 256, cgroup=True,
                         private_tmpfs_mib=64)
    assert SandboxLayers.from_json(full.to_json()) == full
    assert full.missing() == [] and NO_LAYERS.missing()[0] == "user_namespace"
    # without a cgroup, seccomp's denial of what /proc cannot account stands in for its CPU
    # accounting, but not for its memory limit: the cgroup stays missing
    rootless = dataclasses.replace(full, cgroup=False, unaccountable_denied=True)
    assert rootless.missing() == ["cgroup"]
    assert dataclasses.replace(full, unaccountable_denied=False).missing() == []
    assert dataclasses.replace(rootless, unaccountable_denied=False).missing() == [
        "cgroup", "unaccountable_denied"]
    assert full.weakest(NO_LAYERS) == NO_LAYERS
    from verifier import SandboxError
    for bad in ({**full.to_json(), "seccomp": "maybe"}, {**full.to_json(), "pid_namespace": 1},
                {**full.to_json(), "extra": True}, [1]):
        with pytest.raises(SandboxError):
            SandboxLayers.from_json(bad)


def test_submit_fails_closed_in_a_weak_sandbox() -> None:
    from client._errors import InputError
    from client.reproduce import sandbox_gate

    assert sandbox_gate([], submit=True, allow_weak=False) == "all layers"
    with pytest.raises(InputError, match="refusing to submit: this machine's sandbox lacks "
                                         "pid_namespace"):
        sandbox_gate(["pid_namespace"], submit=True, allow_weak=False)
    assert "missing pid_namespace" in sandbox_gate(["pid_namespace"], submit=True, allow_weak=True)
    assert sandbox_gate(["seccomp"], submit=False, allow_weak=False).startswith("weak")


def test_this_machine_probes_its_layers() -> None:
    layers = probe_layers()
    assert layers != NO_LAYERS  # the child reported back
    if os.geteuid() == 0 and layers.user_namespace:
        assert layers.no_capabilities and layers.process_limit > 0


def test_readme_sandbox_table_ties_each_layer_to_a_kernel() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Limits of the sandbox", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0].startswith("| layer |") and len(rows) >= 8
    tested = set(SANDBOX_ATTACKS) | set(HARMLESS_ATTACKS)
    for row in rows[1:]:
        cell = row.rstrip(" |").rsplit("|", 1)[1].replace("`tests/cost_kernels/`:", "")
        for kernel in [k.strip(" `") for k in cell.split(",")]:
            if (COST_KERNELS / kernel / "kernel.toml").is_file():
                continue  # the cgroup rows' kernels: tests/test_verifier_cost.py runs them
            assert kernel in tested, (row[:40], kernel)
            assert (FLAWED / kernel / "kernel.toml").is_file()
    assert "Limits(" not in section
    assert "64 KiB a line, 32 MiB stdout, 16 MiB stderr" in section
    assert (Limits().line_bytes, Limits().stdout_bytes, Limits().stderr_bytes) == (
        64 * 1024, 32 * 2**20, 16 * 2**20)
    assert "process limit (RLIMIT_NPROC in the user namespace, 256)" in section
    assert Limits().processes == 256


SANDBOX_MODULES = ("sandbox/__init__", "sandbox/_process", "sandbox/_confine",
                   "sandbox/_launcher", "sandbox/_seccomp", "sandbox/_landlock",
                   "sandbox/_layers", "sandbox/_output", "sandbox/_violations", "sandbox/_cgroup",
                   "sandbox/_scratch",
                   "gpu", "errors")
SANDBOX_SOURCES = ("sandbox/_launcher.c",)
AS_USER = """
import json, sys, tempfile
from pathlib import Path
from verifier.sandbox import Accounting, Limits, probe_layers, run_sandboxed
with tempfile.TemporaryDirectory() as tmp:
    work = Path(tmp)
    probe = run_sandboxed(["/bin/sh", "-c", "grep CapEff /proc/self/status; cat /etc/shadow"],
                          work, Limits(private_bytes=16 << 20),
                          accounting=Accounting(None, deny_unaccountable=True))
    sock = run_sandboxed([sys.executable, "-c", "import socket; socket.socket()"], work, Limits())
print(json.dumps({"layers": probe.layers.to_json(), "lines": [x for _, x in probe.lines],
                  "denied": sock.denied_syscall}))
"""


def test_sandbox_holds_for_an_unprivileged_user() -> None:
    """The same layers when `ktl` runs as a user (here: nobody, from root)."""
    python = Path("/usr/bin/python3")
    if os.geteuid() != 0 or not python.is_file():
        pytest.skip("needs root (to become nobody) and a system python3")
    with tempfile.TemporaryDirectory(prefix="ktl-as-user-") as tmp:
        _run_as_nobody(python, Path(tmp))


def _run_as_nobody(python: Path, tmp_path: Path) -> None:
    pkg = tmp_path / "verifier"  # the sandbox's modules only: the system python has no numpy
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "sandbox").mkdir()
    for name in SANDBOX_MODULES:
        (pkg / f"{name}.py").write_text((ROOT / "verifier" / f"{name}.py").read_text())
    for source in SANDBOX_SOURCES:  # the launcher that sets the child up, built as that user
        (pkg / source).write_text((ROOT / "verifier" / source).read_text())
    tmp_path.chmod(0o755)

    def become_nobody() -> None:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)

    import subprocess

    done = subprocess.run([str(python), "-I", "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
                           + AS_USER], preexec_fn=become_nobody, capture_output=True, text=True,
                          timeout=60, cwd="/tmp", env={"PATH": "/usr/bin:/bin"}, check=False)
    if done.returncode != 0 and "SyntaxError" in done.stderr:
        pytest.skip("the system python3 is too old for this package")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    layers = SandboxLayers.from_json(got["layers"])
    assert got["lines"] == ["CapEff:\t0000000000000000"]  # no capability, no /etc/shadow
    if layers.user_namespace:  # unprivileged user namespaces are allowed here
        # every layer but the cgroup (root only): seccomp stands in for its CPU accounting
        assert layers.missing() == ["cgroup"], layers
        assert layers.unaccountable_denied and layers.private_tmpfs_mib == 16
        assert got["denied"] == "socket"


def test_a_parent_with_many_descriptors_still_gets_every_layer(tmp_path: Path) -> None:
    """The child inherits the parent's fds until exec: limits must not starve its set-up,
    and the parent must read pipes numbered past select()'s 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("cannot open 1100 descriptors here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        res = run_sandboxed([sys.executable, "-c", "print('hi')"], tmp_path, Limits(open_files=64))
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert res.ok and [line for _, line in res.lines] == ["hi"], res.stderr
    # the probe is set up as a kernel's run (a tmpfs private folder, seccomp standing in for
    # a missing cgroup); the rest is the same
    probe = dataclasses.replace(probe_layers(), private_tmpfs_mib=0,
                                unaccountable_denied=res.layers.unaccountable_denied)
    assert res.layers.seccomp != "none" and res.layers == probe
