"""The shared queue on PostgreSQL: every frontend queues, one integrator settles.

Frontends insert verified submissions (their canonical bytes) into ``queue`` and wait;
the integrator (the session holding the integration lock) takes the oldest rows, and in
the one transaction that commits their batch records each ticket's `Outcome` in
``outcomes`` and deletes the rows, then NOTIFYs. Each frontend process has one
listener connection that collects its tickets' outcomes on that notification, or on a
bounded poll (a notification can be lost with its connection).

Queueing is not durable on its own (``synchronous_commit = off``): a queued row lost
in a database crash was never acknowledged. The commit that settles it is durable.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import psycopg

from ledger.storage._postgres import PostgresStorage, commit_batch_rows
from ledger.storage._queue import (
    MAX_ERROR,
    MAX_QUEUED,
    MAX_TAKE,
    Outcome,
    Queued,
    QueueFull,
    QueueRow,
)
from ledger.storage._types import IntegratedBatch, StorageError

#: NOTIFY channels: rows were queued (for the integrator), outcomes are ready (frontends).
QUEUED_CHANNEL = "ktl_queued"
DONE_CHANNEL = "ktl_done"


# One round trip: the bound, the rows, the integrator's wake-up. Not flushed to disk
# before it returns (no submitter was answered yet; the settling commit is durable).
_ENQUEUE = """
WITH depth AS (SELECT coalesce(max(ticket) - min(ticket) + 1, 0) AS n FROM queue),
ins AS (
    INSERT INTO queue (data, facts, mac, queued_at)
    SELECT u.d, u.f, u.m, %s
    FROM unnest(%s::bytea[], %s::text[], %s::bytea[]) WITH ORDINALITY AS u(d, f, m, o)
    WHERE (SELECT n FROM depth) + %s <= %s
    ORDER BY u.o
    RETURNING ticket
)
SELECT (SELECT n FROM depth), array(SELECT ticket FROM ins ORDER BY ticket),
       (SELECT count(pg_notify(%s, '')) FROM ins),
       set_config('synchronous_commit', 'off', true)
"""


_SETTLE = """
INSERT INTO outcomes (ticket, idx, duplicate, size, error, done_at)
SELECT t, i, d, s, e, %s
FROM unnest(%s::bigint[], %s::bigint[], %s::boolean[], %s::bigint[], %s::text[]) AS u(t, i, d, s, e)
ON CONFLICT (ticket) DO UPDATE SET idx = excluded.idx, duplicate = excluded.duplicate,
    size = excluded.size, error = excluded.error, done_at = excluded.done_at
"""


def _outcome(row: Sequence[Any]) -> Outcome:
    ticket, idx, dup, size, error = row
    return Outcome(int(ticket), None if idx is None else int(idx), bool(dup), int(size),
                   None if error is None else str(error))


class PgQueue:
    """The queue and outcome tables of one PostgreSQL log, and this process's connections."""

    def __init__(self, storage: PostgresStorage, *, max_queued: int = MAX_QUEUED) -> None:
        if not 1 <= max_queued <= 10_000_000:
            raise StorageError("max_queued must be between 1 and 10,000,000")
        self.storage = storage
        self.max_queued = max_queued
        self._held: psycopg.Connection[Any] | None = None
        self._listener: psycopg.Connection[Any] | None = None
        self._listen_lock = threading.Lock()

    # ---- frontends
    def enqueue(self, rows: Sequence[QueueRow]) -> list[int]:
        """Queue rows in one transaction; their tickets, in order.

        Raises `QueueFull` when the queue would exceed ``max_queued`` rows (checked
        from the ticket span, so concurrent frontends may overshoot by one request each).
        """
        if not 1 <= len(rows) <= MAX_TAKE:
            raise StorageError(f"enqueue takes 1 to {MAX_TAKE} submissions, got {len(rows)}")
        with self.storage._conn() as conn:
            row = conn.execute(_ENQUEUE, (
                time.time(), [bytes(r.data) for r in rows], [r.facts for r in rows],
                [bytes(r.mac) for r in rows], len(rows), self.max_queued, QUEUED_CHANNEL,
            )).fetchone()
        assert row is not None
        depth, tickets = int(row[0]), [int(t) for t in row[1]]
        if not tickets:
            raise QueueFull(f"the log's queue holds {depth} submissions (at most "
                            f"{self.max_queued}); retry shortly")
        return tickets  # in the rows' order: each row's ticket is drawn in that order

    def depth(self) -> int:
        """About how many rows are queued (the span of tickets, never less)."""
        with self.storage._conn() as conn:
            return self._depth(conn)

    @staticmethod
    def _depth(conn: psycopg.Connection[Any]) -> int:
        row = conn.execute("SELECT max(ticket) - min(ticket) + 1 FROM queue").fetchone()
        return 0 if row is None or row[0] is None else int(row[0])

    def wait_done(self, timeout: float) -> None:
        """Sleep until the integrator settles something, at most ``timeout`` seconds."""
        with self._listen_lock:
            conn = self._listener_conn()
            try:
                for _ in conn.notifies(timeout=timeout, stop_after=1):
                    pass
            except psycopg.Error as e:
                self._drop_listener(conn)
                raise StorageError(f"lost the database while waiting for outcomes: {e}") from None

    def collect(self, tickets: Sequence[int]) -> list[Outcome]:
        """The ready outcomes of ``tickets`` (each handed out once: its row is deleted)."""
        if not tickets:
            return []
        with self._listen_lock:
            conn = self._listener_conn()
            try:
                rows = conn.execute(
                    "DELETE FROM outcomes WHERE ticket = ANY(%s) "
                    "RETURNING ticket, idx, duplicate, size, error", (list(tickets),),
                ).fetchall()
            except psycopg.Error as e:
                self._drop_listener(conn)
                raise StorageError(f"lost the database while collecting outcomes: {e}") from None
        return [_outcome(r) for r in rows]

    def _drop_listener(self, conn: psycopg.Connection[Any]) -> None:
        self._listener = None
        conn.close()

    def _listener_conn(self) -> psycopg.Connection[Any]:
        conn = self._listener
        if conn is None or conn.closed or conn.broken:
            try:
                conn = psycopg.connect(self.storage.url, autocommit=True,
                                       connect_timeout=int(self.storage.connect_timeout))
                conn.execute(f"LISTEN {DONE_CHANNEL}")
            except psycopg.Error as e:
                raise StorageError(f"cannot listen for outcomes: {e}") from None
            self._listener = conn
        return conn

    # ---- the integrator (on the connection that holds the integration lock)
    @contextmanager
    def hold(self) -> Iterator[bool]:
        """Try to become the integrator: True while this process holds the lock."""
        with self.storage.try_integration_lock() as conn:
            if conn is None:
                yield False
                return
            try:
                conn.execute(f"LISTEN {QUEUED_CHANNEL}")
                self._held = conn
                yield True
            finally:
                self._held = None
                if not conn.closed and not conn.broken:
                    with suppress(psycopg.Error):
                        conn.execute(f"UNLISTEN {QUEUED_CHANNEL}")

    def lock_waiters(self) -> int:
        return self.storage.lock_waiters()

    def _conn_held(self) -> psycopg.Connection[Any]:
        if self._held is None:
            raise StorageError("only the integrator (inside hold()) takes and settles")
        return self._held

    def wait_queued(self, timeout: float) -> None:
        """Sleep until a frontend queues something, at most ``timeout`` seconds."""
        try:
            for _ in self._conn_held().notifies(timeout=timeout, stop_after=1):
                pass
        except psycopg.Error as e:
            raise StorageError(f"lost the database while waiting for submissions: {e}") from None

    def take(self, limit: int) -> list[Queued]:
        """The oldest queued rows, at most ``limit``, in ticket order (left queued)."""
        if not 1 <= limit <= MAX_TAKE:
            raise StorageError(f"take limit must be 1 to {MAX_TAKE}")
        try:
            rows = self._conn_held().execute(
                "SELECT ticket, data, facts, mac FROM queue ORDER BY ticket LIMIT %s",
                (limit,)).fetchall()
        except psycopg.Error as e:
            raise StorageError(f"lost the database while taking submissions: {e}") from None
        return [Queued(int(t), QueueRow(bytes(d), str(f), bytes(m))) for t, d, f, m in rows]

    def settle(self, batch: IntegratedBatch | None, outcomes: Sequence[Outcome]) -> None:
        """One durable transaction: the batch's rows, each ticket's outcome, the queue
        rows deleted; then NOTIFY (delivered at commit)."""
        conn = self._conn_held()
        now = time.time()
        try:
            with conn.transaction():
                if batch is not None:
                    commit_batch_rows(conn, batch)
                # The integrator's word replaces any row already there: an outcome row
                # planted for a ticket (by anyone with write access) must not make this
                # commit fail, which would roll the whole batch back, every time.
                conn.execute(_SETTLE, (
                    now, [o.ticket for o in outcomes], [o.index for o in outcomes],
                    [o.duplicate for o in outcomes], [o.size for o in outcomes],
                    [None if o.error is None else o.error[:MAX_ERROR] for o in outcomes]))
                conn.execute("DELETE FROM queue WHERE ticket = ANY(%s)",
                             ([o.ticket for o in outcomes],))
                conn.execute("SELECT pg_notify(%s, '')", (DONE_CHANNEL,))
        except psycopg.errors.UniqueViolation as e:
            raise StorageError(f"the database refused a duplicate: {e}") from None
        except psycopg.Error as e:
            raise StorageError(f"database unavailable while committing: {e}") from None

    def discard(self, tickets: Sequence[int]) -> None:
        """Delete queued rows that cannot be settled, with no outcome (never retaken)."""
        try:
            self._conn_held().execute("DELETE FROM queue WHERE ticket = ANY(%s)",
                                      (list(tickets),))
        except psycopg.Error as e:
            raise StorageError(f"lost the database while discarding rows: {e}") from None

    def sweep(self, before: float) -> int:
        """Delete outcomes settled before ``before`` that no frontend collected."""
        try:
            cur = self._conn_held().execute("DELETE FROM outcomes WHERE done_at < %s", (before,))
        except psycopg.Error as e:
            raise StorageError(f"lost the database while sweeping outcomes: {e}") from None
        return cur.rowcount

    def close(self) -> None:
        with self._listen_lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
