"""The parent's side of the seccomp filter: learn which denied call a child tried, kill the run.

The child's filter answers a denied call with SECCOMP_RET_USER_NOTIF and hands the
filter's listener to the parent; `ViolationWatcher` polls it in a thread. On the
first notification it records the call (name, architecture, arguments) and calls
`on_violation` (the caller kills the whole sandbox). The call itself never runs:
the task waits for an answer that never comes, and dies with the run. If the
parent dies first, the listener closes and the kernel fails the call with ENOSYS.
"""

from __future__ import annotations

import fcntl
import os
import select
import threading
from collections.abc import Callable

from verifier.sandbox._seccomp import NOTIF_SIZE, Notification, parse_notification

__all__ = ["ViolationWatcher"]

SECCOMP_IOCTL_NOTIF_RECV = 0xC0502100
"""_IOWR('!', 0, struct seccomp_notif)."""
POLL_MS = 50


class ViolationWatcher:
    """Watches one listener fd (which it owns and closes)."""

    def __init__(self, listener: int, on_violation: Callable[[], None]) -> None:
        self.violation: Notification | None = None
        self._fd = listener
        self._on_violation = on_violation
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        if not self._thread.is_alive():
            os.close(self._fd)

    def _receive(self) -> Notification | None:
        buf = bytearray(NOTIF_SIZE)
        try:
            fcntl.ioctl(self._fd, SECCOMP_IOCTL_NOTIF_RECV, buf, True)
        except OSError:  # the task died before we read it (ENOENT)
            return None
        return parse_notification(bytes(buf))

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        while not self._stop.is_set():
            for _, events in poller.poll(POLL_MS):
                if events & select.POLLIN:
                    note = self._receive()
                    if note is not None and self.violation is None:
                        self.violation = note
                        self._on_violation()
                if events & (select.POLLHUP | select.POLLERR):
                    return  # no task uses the filter any more
