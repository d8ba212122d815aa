"""Spinners a reproducer keeps running while it measures (on other CPUs, and on the runs' own
CPU where the claim's was shared), so that its sitting's load is the claim's
(`verifier.benchmark._conditions.place_like`).

A claim measured while another CPU of its machine was busy (recorded in its `conditions`)
and reproduced on a quiet machine differs by exactly that: on the 2-core machine here a
second busy core moved sum-rows' honest speed-up by up to 11 % (docs/performance.md), more than a
refutation may leave to chance. The reproducer recreates the load instead of giving up on
the verdict. Each spinner is a plain Python loop pinned to its CPU, killed when the sitting
ends, and killed by the kernel if this process dies first (PR_SET_PDEATHSIG). It is load
of the count the claim recorded, not of its kind: what else ran beside the claim is not
known, only how many CPUs it kept busy.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from types import TracebackType

from verifier.errors import VerifierError

__all__ = ["SETTLE_S", "Ballast"]

SETTLE_S = 0.3
"""How long the spinners run before the sitting's first probe, so that it sees them."""

_SPIN = """
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except Exception:
    pass
if os.getppid() != int(sys.argv[1]):  # the parent died before the line above
    sys.exit(0)
os.sched_setaffinity(0, {int(sys.argv[2])})
while True:
    pass
"""


class Ballast:
    """`with Ballast(cpus):` one spinner on each CPU of `cpus` (none: nothing is started)."""

    def __init__(self, cpus: Sequence[int]) -> None:
        if len(set(cpus)) != len(cpus) or any(c < 0 for c in cpus):
            raise VerifierError(f"ballast CPUs must be distinct CPU numbers, got {list(cpus)}")
        self.cpus = tuple(cpus)
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Ballast:
        try:
            for cpu in self.cpus:
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-S", "-c", _SPIN, str(os.getpid()), str(cpu)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL))
        except OSError as exc:
            self._stop()
            raise VerifierError(f"could not start the load that matches the claim's: {exc}"
                                ) from exc
        if self.procs:
            time.sleep(SETTLE_S)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop()

    def running(self) -> int:
        """How many spinners are running now."""
        return sum(1 for p in self.procs if p.poll() is None)

    def _stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()
        self.procs.clear()
