"""Signs of work outliving a call, as typed records, and the watch on threads a call starts.

Everything here is read from outside the kernel's process (`/proc/<pid>/task`), never
from anything the process reports about itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["UNASKED_ANSWER", "Escape", "EscapeKind", "ThreadStarts", "running_threads"]

EscapeKind = Literal["threads", "threads_started", "processes", "outputs_changed", "unasked_answer",
                     "cpu_outside_calls"]
PF_EXITING = 0x4
"""The task flag Linux sets when a thread starts to exit (before a join on it returns)."""


@dataclass(frozen=True)
class Escape:
    """One sign of work outliving a call: its kind, how many threads or processes showed it
    (0 where no count applies) and the words for a note. Findings are told apart by
    (kind, count), never by their words."""

    kind: EscapeKind
    count: int
    detail: str

    @property
    def key(self) -> tuple[EscapeKind, int]:
        return self.kind, self.count

    def __str__(self) -> str:
        return self.detail


UNASKED_ANSWER = Escape("unasked_answer", 0,
                        "answered before it was asked (something in the kernel's process writes "
                        "the worker's answers, to stop the parent's clock early)")


def _running(pid: int, tid: int) -> bool:
    """Whether thread `tid` of `pid` exists and has not started to exit."""
    try:
        stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return fields[0] not in ("Z", "X") and not int(fields[6]) & PF_EXITING
    except (OSError, ValueError, IndexError):
        return False


def running_threads(pid: int, tids: Iterable[int]) -> frozenset[int]:
    """Those of `tids` that are threads of `pid` still running (not exiting, not gone)."""
    return frozenset(t for t in tids if _running(pid, t))


class ThreadStarts:
    """Threads a call started that were still running at its answer (and processes).

    A kernel that defers its work to a thread it starts and does not join leaves that
    thread alive when the call answers. An honest thread pool (OpenMP's) is also started
    by a call, once, and then idles between calls; so the first time a call leaves new
    threads behind they are taken as the process's pool, provided they are still there
    at the next look (a pool that ends right after the call was not a pool). Any later
    call that leaves a new thread running is flagged. A pool thread busy after a call is
    the CPU rule's business (`verifier.worker._native.escaped_work`). Only single-thread calls
    are judged: a two-thread command's own thread takes a fresh OpenMP pool with it.
    """

    def __init__(self) -> None:
        self.pool: frozenset[int] | None = None
        self.pending: frozenset[int] = frozenset()
        self.found: list[Escape] = []

    def look(self, pid: int) -> None:
        """Confirm (or not) a pool seen at the last answer: are its threads still running?"""
        if not self.pending:
            return
        gone = self.pending - running_threads(pid, self.pending)
        self.pending = frozenset()
        if gone:
            self.found.append(Escape(
                "threads_started", len(gone),
                f"{len(gone)} thread(s) started during a call were running at its answer and "
                "ended soon after (work deferred to a thread that outlived the call)"))

    def answered(self, started: frozenset[int], processes: int = 0) -> None:
        """`started`: threads absent before the command and running at its answer;
        `processes`: how many processes below the kernel's were alive then (always escaped
        work: no honest kernel keeps a process)."""
        if processes:
            self.found.append(Escape(
                "processes", processes, f"{processes} process(es) started by the kernel alive "
                "at the call's answer"))
        if not started:
            return
        if self.pool is None:
            self.pool = self.pending = started
            return
        self.found.append(Escape(
            "threads_started", len(started),
            f"{len(started)} thread(s) started during the call still running at its answer "
            "(after the first call that started a thread pool)"))

    def take(self) -> list[Escape]:
        """The findings since the last take."""
        out, self.found = self.found, []
        return out
