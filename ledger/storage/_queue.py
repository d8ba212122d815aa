"""The shared queue's records and interface (`SharedQueue`; PostgreSQL implements it).

Kept apart from the PostgreSQL module so that the integrator (`ledger.queued`) and its
tests need no database driver to import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ledger.storage._types import IntegratedBatch, StorageError

#: Default bound on queued rows (a full queue answers 503 with Retry-After).
MAX_QUEUED = 10_000
#: Largest batch `take` returns, and most rows one `enqueue` queues.
MAX_TAKE = 10_000
#: Longest error text kept in an outcome.
MAX_ERROR = 500


class QueueFull(StorageError):
    """The shared queue holds its maximum; the submitter should retry shortly."""


@dataclass(frozen=True)
class QueueRow:
    """What a frontend queues: canonical entry bytes, their facts (JSON text) and a MAC
    over both under the log's queue key (`ledger.queued`), so that the integrator
    believes no row that a frontend did not verify."""

    data: bytes
    facts: str
    mac: bytes


@dataclass(frozen=True)
class Queued:
    """One queued row as the integrator takes it (not trusted until its MAC verifies)."""

    ticket: int
    row: QueueRow


@dataclass(frozen=True)
class Outcome:
    """What became of one ticket: logged at ``index`` (covered by the checkpoint of
    ``size``), or refused with ``error``."""

    ticket: int
    index: int | None
    duplicate: bool
    size: int
    error: str | None = None

    def __post_init__(self) -> None:
        if (self.index is None) == (self.error is None):
            raise StorageError("an outcome has exactly one of index and error")
        if self.index is not None and not 0 <= self.index < self.size:
            raise StorageError(f"outcome index {self.index} is not below its size {self.size}")
        if self.ticket < 1 or self.size < 0:
            raise StorageError("an outcome's ticket must be >= 1 and its size >= 0")
        if self.error is not None and len(self.error) > MAX_ERROR:
            object.__setattr__(self, "error", self.error[: MAX_ERROR - 3] + "...")

    def to_json(self) -> dict[str, Any]:
        return {"ticket": self.ticket, "index": self.index, "duplicate": self.duplicate,
                "size": self.size, "error": self.error}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Outcome:
        index, error = obj.get("index"), obj.get("error")
        return cls(int(obj["ticket"]), None if index is None else int(index),
                   bool(obj["duplicate"]), int(obj["size"]), None if error is None else str(error))


class SharedQueue(Protocol):
    """Submissions queued by every frontend of one log, settled by its one integrator."""

    # frontends
    def enqueue(self, rows: Sequence[QueueRow]) -> list[int]:
        """Queue rows in one transaction; their tickets in order, or `QueueFull`."""
        ...

    def wait_done(self, timeout: float) -> None:
        """Sleep until some outcomes were settled, at most ``timeout`` seconds."""
        ...

    def collect(self, tickets: Sequence[int]) -> list[Outcome]:
        """The ready outcomes of ``tickets``; each is handed out once."""
        ...

    # the integrator
    def hold(self) -> AbstractContextManager[bool]:
        """Try to become the integrator: yields True while this process is it."""
        ...

    def lock_waiters(self) -> int:
        """Sessions blocked waiting for the integration lock (start-up checks, tools)."""
        ...

    def wait_queued(self, timeout: float) -> None:
        """Sleep until something is queued, at most ``timeout`` seconds (integrator)."""
        ...

    def take(self, limit: int) -> list[Queued]:
        """The oldest queued rows, at most ``limit``, in ticket order (integrator)."""
        ...

    def settle(self, batch: IntegratedBatch | None, outcomes: Sequence[Outcome]) -> None:
        """In one durable transaction: store ``batch``, record ``outcomes``, unqueue their
        tickets (integrator)."""
        ...

    def discard(self, tickets: Sequence[int]) -> None:
        """Unqueue ``tickets`` without an outcome: rows that cannot be settled at all
        (integrator)."""
        ...

    def sweep(self, before: float) -> int:
        """Forget outcomes settled before ``before`` that nobody collected (integrator)."""
        ...

    def close(self) -> None:
        ...
