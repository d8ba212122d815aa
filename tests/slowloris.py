"""A bounded slowloris attack on 127.0.0.1 for tests and benchmarks: slow heads, empty
connections, and well-behaved requests timed beside them. Everything stops by itself."""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Attack:
    """`slow` connections sending one header line every `interval` s, from source
    addresses 127.0.0.2.. (`sources` of them); `empty_per_s` connections a second that
    send nothing; for `seconds` seconds in all."""

    host: str
    port: int
    slow: int = 200
    sources: int = 8
    interval: float = 1.0
    empty_per_s: float = 20.0
    seconds: float = 6.0
    opened: int = 0
    refused: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def _connect(self, n: int) -> socket.socket | None:
        s = socket.socket()
        s.settimeout(2)
        try:
            s.bind((f"127.0.0.{2 + n % self.sources}", 0))
            s.connect((self.host, self.port))
        except OSError:
            s.close()
            self.refused += 1
            return None
        self.opened += 1
        return s

    def _slow(self) -> None:
        conns = [c for c in (self._connect(i) for i in range(self.slow)) if c is not None]
        for c in conns:
            with contextlib.suppress(OSError):
                c.sendall(b"POST /api/v1/entries HTTP/1.1\r\nHost: x\r\n")
        line = 0
        while not self._stop.wait(self.interval):
            line += 1
            for c in conns:
                with contextlib.suppress(OSError):
                    c.sendall(b"X-Slow-%d: %d\r\n" % (line, line))
        for c in conns:
            c.close()

    def _empty(self) -> None:
        held: list[socket.socket] = []
        n = 0
        while not self._stop.wait(1.0 / self.empty_per_s):
            c = self._connect(10_000 + n)
            n += 1
            if c is not None:
                held.append(c)
        for c in held:
            c.close()

    def __enter__(self) -> Attack:
        self._threads = [threading.Thread(target=self._slow, daemon=True),
                         threading.Thread(target=self._empty, daemon=True)]
        for t in self._threads:
            t.start()
        self._timer = threading.Timer(self.seconds, self._stop.set)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._timer.cancel()
        for t in self._threads:
            t.join(30)


def probe(host: str, port: int, path: str, timeout: float = 1.0) -> float | None:
    """Seconds one well-behaved GET on a fresh connection took, or None if not answered
    (status 2xx-4xx) within `timeout`."""
    start = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        took = time.monotonic() - start
        return took if resp.status < 500 and took <= timeout else None
    except OSError:
        return None
    finally:
        conn.close()
