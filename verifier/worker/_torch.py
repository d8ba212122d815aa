"""The parent's side of a torch kernel's processes: start them, command them, read them strictly.

Two children run `verifier.worker._torch_child`: the candidate (the kernel's `ModelNew`)
and the reference (the kernel folder's `Model`), each in its own sandbox, each with its
own sealed memfd arena; neither loads the other's module, and neither ever sees the
other's outputs. The parent writes inputs into both arenas, names the regions in a
command frame, times the round trip on its own clock and reads the outputs from the
regions itself.

Everything the candidate says is the kernel's word: an answer that is not the expected
structure (sizes, counts, dtypes, shapes within bounds) raises `BadAnswer`, a typed
kernel fault; an exception inside its `forward` is `KernelRaised`. Its threads and
processes are watched from /proc between commands, as the native worker's are.

What a candidate's sandbox grants beyond a C kernel's is `CANDIDATE_GRANTS`, each item
named (and tested in tests/test_torch_runtime.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from verifier.errors import SandboxError, VerifierError
from verifier.sandbox import ChildResult, Limits, base_env, run_sandboxed
from verifier.worker import _torch_child as wire
from verifier.worker._channel import (
    QUIET_THREADS,
    Channel,
    SharedArena,
    WorkerGone,
    stop_child,
)
from verifier.worker._escape import UNASKED_ANSWER, Escape, ThreadStarts
from verifier.worker._proc import find_child, kill_child, pipe_inode

__all__ = ["CANDIDATE_GRANTS", "DRIVER", "BadAnswer", "CallAnswer", "ChildLoadError",
           "KernelRaised", "Role", "TorchChild", "TorchGrants", "TorchProgram",
           "parse_call_answers"]

Role = Literal["reference", "candidate", "build"]
DRIVER = Path(wire.__file__).resolve()
_PYTHON = os.path.realpath(sys.executable)
MAX_OUTPUTS = 16
MAX_DIMS = 8
MAX_DIM = 2**31


@dataclass(frozen=True)
class TorchGrants:
    """What a torch child needs beyond what every sandboxed child gets, item by item.

    Every child may already read the Python installation (its prefix and base prefix,
    which hold torch's site-packages) and this package; no system call is added to the
    seccomp filter for torch (importing and running it needs none of the denied ones)."""

    address_space: int = 4 * 1024**3
    """RLIMIT_AS: torch's CPU libraries map about 1.5 GiB of address space at import."""
    processes: int = 256
    """RLIMIT_NPROC: torch's intra-op and inter-op thread pools (threads count here)."""
    open_files: int = 256
    """RLIMIT_NOFILE: torch opens its shared libraries and, with Triton, its cache."""
    readable: tuple[str, ...] = ("driver folder", "build cache of this solution")
    """Paths readable beyond the defaults: the driver script's folder and, for a solution
    with `load_inline` extensions, its (read-only) build cache entry."""
    env: tuple[str, ...] = ("OMP_NUM_THREADS", "TRITON_INTERPRET")
    """Environment beyond the scrubbed default: the thread count the run allows, and Triton's
    interpreter switch for runtime triton on a CPU."""


CANDIDATE_GRANTS = TorchGrants()


class BadAnswer(VerifierError):
    """The candidate's process answered something that is not a well-formed answer."""


class KernelRaised(VerifierError):
    """The module raised inside a command (its forward, construction or loading)."""

    def __init__(self, text: str, stage: str = "call") -> None:
        super().__init__(text)
        self.stage = stage


class ChildLoadError(KernelRaised):
    """The module could not be imported or its class not found."""


@dataclass(frozen=True)
class CallAnswer:
    """What one call produced, as the child says: each output's shape, dtype and whether it
    fit its region (and so was copied there), or `bad` for an output that is not a plain tensor."""

    outputs: tuple[tuple[tuple[int, ...], str, bool], ...]
    bad: str | None = None


def _int_list(value: Any, what: str, limit: int = MAX_DIMS) -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) > limit or not all(
            type(v) is int and 0 <= v < MAX_DIM for v in value):
        raise BadAnswer(f"{what}: not a list of at most {limit} sizes")
    return tuple(value)


def parse_call_answers(body: Mapping[str, Any], calls: int) -> list[CallAnswer]:
    """The per-call answers of a `call` command, checked for structure and bounds."""
    outs = body.get("outs")
    if not isinstance(outs, list) or len(outs) != calls:
        raise BadAnswer(f"expected answers for {calls} calls, got "
                        f"{len(outs) if isinstance(outs, list) else type(outs).__name__}")
    parsed: list[CallAnswer] = []
    for item in outs:
        if not isinstance(item, list) or not 1 <= len(item) <= MAX_OUTPUTS:
            raise BadAnswer(f"a call's answer must list 1..{MAX_OUTPUTS} outputs")
        if isinstance(item[0], dict):
            bad = item[0].get("bad")
            if len(item) != 1 or not isinstance(bad, str):
                raise BadAnswer("malformed output refusal")
            parsed.append(CallAnswer((), bad[:300]))
            continue
        described = []
        for out in item:
            if not (isinstance(out, list) and len(out) == 3 and isinstance(out[1], str)
                    and out[1] in wire.DTYPES and isinstance(out[2], bool)):
                raise BadAnswer("an output must be [shape, dtype, written]")
            described.append((_int_list(out[0], "output shape"), out[1], out[2]))
        parsed.append(CallAnswer(tuple(described)))
    return parsed


@dataclass(frozen=True)
class TorchProgram:
    """What one torch child runs: its role, the folder holding `module` whose class `cls`
    it loads, the threads it may use, the built extensions' folder (None: none), whether
    Triton runs through its interpreter and whether it gets the GPU."""

    role: Role
    folder: Path
    module: str
    cls: str
    threads: int = 1
    ext_dir: Path | None = None
    interpret_triton: bool = False
    gpu: bool = False


def _driver_argv(program: TorchProgram, cmd_r: int, ans_w: int, arena: SharedArena) -> list[str]:
    folder, ext_dir = program.folder, program.ext_dir
    return [sys.executable, "-s", "-B", str(DRIVER), program.role, str(cmd_r), str(ans_w),
            str(arena.fd), str(arena.nbytes), str(folder), str(folder / program.module),
            program.cls, str(program.threads), str(ext_dir) if ext_dir is not None else "-"]


def child_env(threads: int, interpret_triton: bool) -> dict[str, str]:
    """The scrubbed environment of a torch child (see `TorchGrants.env`)."""
    extra = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), **QUIET_THREADS}
    if interpret_triton:
        extra["TRITON_INTERPRET"] = "1"
    return base_env(extra)


class TorchChild(Channel):
    """One sandboxed torch process (`role` reference or candidate): `request`, `close`.

    Framed JSON commands and answers over `Channel`'s pipes, clocks and watchdog."""

    def __init__(self, program: TorchProgram, arena: SharedArena, limits: Limits, *,
                 ready_timeout_s: float = 120.0, rss_cap: int | None = None) -> None:
        self.role, self.arena, self.limits, self.rss_cap = program.role, arena, limits, rss_cap
        cmd_r, cmd_w = os.pipe()
        ans_r, ans_w = os.pipe()
        super().__init__(cmd_w, ans_r)
        self._child_fds = (cmd_r, ans_w)
        self._inode = pipe_inode(cmd_r)
        self._pid: int | None = None
        self.result: ChildResult | None = None
        self.starts = ThreadStarts()
        self.killed = False
        self._closed = False
        argv = _driver_argv(program, cmd_r, ans_w, arena)
        ext_dir = program.ext_dir
        readable = [DRIVER.parent, *([ext_dir] if ext_dir is not None else [])]
        env = child_env(program.threads, program.interpret_triton)
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        args=(argv, program.folder, env, readable, program.gpu))
        self._thread.start()
        ready = self._receive(ready_timeout_s, time.monotonic() + ready_timeout_s)
        if ready.get("ok") is not True:
            raise ChildLoadError(str(ready.get("error", "the module could not be loaded"))[:1500],
                                 "load")
        version = ready.get("torch")
        self.torch_version = version[:64] if isinstance(version, str) else "unknown"

    def _run(self, argv: list[str], workdir: Path, env: dict[str, str], readable: list[Path],
             gpu: bool) -> None:
        try:
            self.result = run_sandboxed(argv, workdir, self.limits, env, readable=readable,
                                        gpu=gpu, pass_fds=(*self._child_fds, self.arena.fd))
        except SandboxError:
            self.result = None

    # -- the process ---------------------------------------------------------------------------

    def alive(self) -> bool:
        return self._thread.is_alive()

    def pid(self) -> int | None:
        """The child's pid: the descendant of this process holding our command pipe."""
        if self._pid is None:
            # the sandbox's launcher (keeper and reaper) holds the pipe and names the driver
            # too: the child is the Python (after its exec) that runs the driver
            self._pid = find_child(self._child_fds[0], self._inode, lambda kid: (
                os.readlink(f"/proc/{kid}/exe") == _PYTHON
                and str(DRIVER).encode() in Path(f"/proc/{kid}/cmdline").read_bytes().split(b"\0")))
        return self._pid

    def kill(self) -> None:
        self.killed = True
        kill_child(self.pid())

    def gone(self) -> VerifierError:
        self._thread.join(timeout=self.limits.wall_s + 5)
        return WorkerGone(self.result, True)

    def close(self) -> ChildResult | None:
        if self._closed:
            return self.result
        self._closed = True
        with contextlib.suppress(OSError):
            os.set_blocking(self.cmd_w, False)
            wire.write_frame(self.cmd_w, b'{"cmd":"quit"}')
        stop_child(self._thread, 3.0, self.limits.wall_s, self.kill,
                   (self.cmd_w, self.ans_r, *self._child_fds))
        return self.result

    # -- commands ----------------------------------------------------------------------------------

    def request(self, body: Mapping[str, Any], timeout_s: float) -> tuple[int, dict[str, Any]]:
        """Send one command, wait for its answer: (ns on the parent's clock, the answer).

        Raises KernelRaised when the module raised, BadAnswer for a malformed answer and
        WorkerGone / WorkerHung / WorkerOverMemory when the process ended, hung or grew."""
        payload = json.dumps(body, separators=(",", ":")).encode()
        if len(payload) > wire.MAX_COMMAND:
            raise VerifierError("a torch command is over its size limit (fewer calls per batch)")
        pid = self.pid()
        if pid is not None:
            self.starts.look(pid)
        before = self._begin()
        t0 = time.perf_counter_ns()
        deadline = time.monotonic() + timeout_s
        self._send(wire.FRAME.pack(len(payload)) + payload, timeout_s, deadline)
        answer = self._receive(timeout_s, deadline)
        t1 = time.perf_counter_ns()
        self._end(before)
        if answer.get("ok") is False:
            raise KernelRaised(str(answer.get("error", "raised"))[:1000])
        if answer.get("ok") is not True:
            raise BadAnswer("an answer must say ok true or false")
        return t1 - t0, answer

    def call(self, calls: Sequence[Mapping[str, Any]], timeout_s: float, threads: int = 1,
             report: bool = True) -> tuple[int, list[CallAnswer], dict[str, Any]]:
        """Run `calls` (each {"in": args, "out": regions}); their answers, parsed strictly."""
        ns, body = self.request({"cmd": "call", "calls": list(calls), "threads": threads,
                                 "report": report}, timeout_s)
        self.judge_starts(threads)
        if not report:
            if body.get("outs") != len(calls):
                raise BadAnswer(f"expected a count of {len(calls)} calls")
            return ns, [], body
        return ns, parse_call_answers(body, len(calls)), body

    def judge_starts(self, threads: int = 1) -> None:
        """Give the last command's threads started and still running at its answer, and the
        processes alive then, to the `ThreadStarts` watch (a two-thread command's threads
        are not judged: its own thread takes a fresh pool with it)."""
        self.starts.answered(self.last_started if threads == 1 else frozenset(),
                             len(self.last_processes))

    def look(self) -> list[Escape]:
        pid = self.pid()
        if pid is not None:
            self.starts.look(pid)
        found = self.starts.take()
        if self.unasked and UNASKED_ANSWER not in found:
            found.append(UNASKED_ANSWER)
        return found

    # -- plumbing ----------------------------------------------------------------------------------

    def _receive(self, timeout_s: float, deadline: float) -> dict[str, Any]:
        head = self._read_exactly(wire.FRAME.size, timeout_s, deadline)
        (size,) = wire.FRAME.unpack(head)
        if size > wire.MAX_ANSWER:
            self.kill()
            raise BadAnswer(f"an answer of {size} bytes; the limit is {wire.MAX_ANSWER}")
        raw = self._read_exactly(size, timeout_s, deadline)
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise BadAnswer(f"an answer that is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise BadAnswer("an answer must be a JSON object")
        return body
