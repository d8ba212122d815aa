"""A token bucket per client address for submissions (per server process)."""

from __future__ import annotations

import math
import threading
import time


class RateLimiter:
    """``rate`` tokens per second, at most ``burst`` saved; one token per submitted entry."""

    def __init__(self, rate: float, burst: float, max_clients: int = 100_000) -> None:
        self.rate = rate
        self.burst = burst
        self.max_clients = max_clients
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, client: str, cost: float = 1.0, now: float | None = None) -> float:
        """Take ``cost`` tokens; return 0 if allowed, else the seconds to wait before retrying."""
        t = time.monotonic() if now is None else now
        with self._lock:
            tokens, last = self._buckets.get(client, (self.burst, t))
            tokens = min(self.burst, tokens + (t - last) * self.rate)
            if cost > self.burst:
                return math.inf
            if tokens >= cost:
                self._buckets[client] = (tokens - cost, t)
                if len(self._buckets) > self.max_clients:
                    self._forget(t)
                return 0.0
            self._buckets[client] = (tokens, t)
            return (cost - tokens) / self.rate

    def _forget(self, now: float) -> None:
        full = [c for c, (tok, last) in self._buckets.items()
                if tok + (now - last) * self.rate >= self.burst]
        for c in full:
            del self._buckets[c]
