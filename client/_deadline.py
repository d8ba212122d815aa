"""An overall deadline per HTTP request, head and body together.

`requests` only has per-read timeouts: a server that sends one byte every few seconds
never trips them and keeps a client waiting forever. `DeadlineAdapter` records the
connections a request uses; `Deadline` shuts their sockets down when its time is up,
which makes the blocked read fail at once (the request then raises a
``requests.ConnectionError`` and `Deadline.expired` says why).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

_current = threading.local()


class Deadline:
    """Used as ``with Deadline(seconds):`` around one request (its retries included)."""

    def __init__(self, seconds: float) -> None:
        if not seconds > 0:
            raise ValueError("a deadline needs a positive number of seconds")
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.expired = False
        self._conns: list[Any] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def passed(self) -> bool:
        """Whether the time is up (the sockets were, or are about to be, shut down)."""
        return self.expired or self.remaining() <= 0

    def watch(self, conn: Any) -> None:
        with self._lock:
            self._conns.append(conn)
            expired = self.expired
        if expired:
            _shutdown(conn)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            conns = list(self._conns)
        for conn in conns:
            _shutdown(conn)

    def __enter__(self) -> Deadline:
        self._outer = getattr(_current, "deadline", None)
        _current.deadline = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        _current.deadline = self._outer


def _shutdown(conn: Any) -> None:
    sock = getattr(conn, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed
            sock.shutdown(socket.SHUT_RDWR)


def _watched(conn: Any) -> Any:
    deadline = getattr(_current, "deadline", None)
    if deadline is not None:
        deadline.watch(conn)
    return conn


class _HTTPPool(HTTPConnectionPool):
    def _get_conn(self, timeout: float | None = None) -> Any:
        return _watched(super()._get_conn(timeout))


class _HTTPSPool(HTTPSConnectionPool):
    def _get_conn(self, timeout: float | None = None) -> Any:
        return _watched(super()._get_conn(timeout))


class DeadlineAdapter(HTTPAdapter):
    """An `HTTPAdapter` whose connections the current `Deadline` can cut."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
