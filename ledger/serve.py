"""Run the log under gunicorn in the foreground (`ktl serve`).

gunicorn runs the processes; each worker is `ledger._front.FrontWorker`, which reads
request heads and bodies on an asyncio loop with deadlines and per-address connection
caps (a slow client costs a buffer, not a thread) and hands only complete requests to
a pool of ``--threads`` threads: a submission waits there for its batch to be
integrated, so many wait at once for group commit to form batches. Each worker process runs its
own integrator thread; they take turns through the integration lock (a file lock in
the data folder, or with ``--database`` a PostgreSQL advisory lock shared by every
frontend on that database), so exactly one extends the tree at a time. SIGTERM stops gunicorn
gracefully: workers finish the requests in flight, their integrators drain the
queue, and nothing acknowledged is lost (it was durable before it was acknowledged).

"serving on URL" is printed only once every worker has booted and the server answers a
request of its own (`BootWatch`); workers that fail to boot, or do not come up within
``--boot-timeout``, stop the server with `ServeError` instead.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication
from gunicorn.errors import HaltServer

from ledger.server import ServerConfig, create_app, load_or_create_signer
from ledger.storage import (
    LogAudit,
    SqliteStorage,
    StorageError,
    audit_log,
    check_log,
    open_storage,
    redact_url,
)
from ledger.tlog import LedgerError


@dataclass(frozen=True)
class ServeOptions:
    """Process-level settings (the log's own settings are in `ServerConfig`)."""

    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 2
    threads: int = 32
    key_file: str | None = None
    graceful_timeout: int = 30
    access_log: bool = False
    deep_check: bool = False
    #: Seconds the workers have to boot and answer before the server gives up.
    boot_timeout: float = 60.0


def _worker_exit(server: Any, worker: Any) -> None:
    app = getattr(worker, "wsgi", None)
    if isinstance(app, Flask) and "ktl" in app.extensions:
        app.extensions["ktl"].close()


class ServeError(LedgerError):
    """The server did not come up: its workers failed to boot or never answered."""


_WILDCARD = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def _answers(host: str, port: int, path: str, timeout: float) -> bool:
    """Whether GET `path` on (host, port) answers 200 within `timeout` seconds."""
    conn = http.client.HTTPConnection(_WILDCARD.get(host, host), port, timeout=timeout)
    try:
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


@dataclass
class BootWatch:
    """Says "serving on URL" once `workers` workers have booted and GET `probe` answers
    200, all within `timeout` seconds of the master listening; otherwise stops gunicorn
    and `run` raises `ServeError` (gunicorn's `when_ready` alone runs before any worker
    has booted). Workers report their boot through a pipe made before they fork."""

    workers: int
    probe: str
    timeout: float
    progress: Callable[[str], None]
    failure: str | None = field(default=None, init=False)
    _ready: threading.Event = field(default_factory=threading.Event, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _pipe: tuple[int, int] = field(default=(-1, -1), init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def options(self) -> dict[str, Any]:
        """The gunicorn settings that wire the watch in."""
        return {"when_ready": self._when_ready, "post_worker_init": self._booted}

    def _booted(self, worker: Any) -> None:  # in the worker, once its app is loaded
        with contextlib.suppress(OSError):  # the watch is over: never stop a worker for it
            os.write(self._pipe[1], b"%d\n" % os.getpid())

    def _when_ready(self, server: Any) -> None:  # in the master, listening, no worker yet
        where = [listener.getsockname()[:2] for listener in server.LISTENERS]
        self._thread = threading.Thread(target=self._watch, args=(where,),
                                        name="ktl-boot-watch", daemon=True)
        self._thread.start()

    def _watch(self, where: list[tuple[str, int]]) -> None:
        deadline = time.monotonic() + self.timeout
        booted = self._wait_booted(deadline)
        answered = booted >= self.workers and all(
            self._wait_answer(host, port, deadline) for host, port in where)
        if self._stop.is_set():
            return
        if not answered:
            said = "" if booted < self.workers else f", but GET {self.probe} got no answer"
            self.failure = (f"the server did not come up within {self.timeout:g} s: "
                            f"{min(booted, self.workers)} of {self.workers} worker(s) "
                            f"booted{said}; nothing was served")
            os.kill(os.getpid(), signal.SIGTERM)  # the master: stop gunicorn
            return
        self._ready.set()
        for host, port in where:
            self.progress(f"serving on http://{host}:{port}")
        sys.stdout.flush()

    def _wait_booted(self, deadline: float) -> int:
        pids: set[bytes] = set()
        buf = b""
        while len(pids) < self.workers and not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            readable, _, _ = select.select([self._pipe[0]], [], [], min(left, 0.5))
            if readable:
                buf += os.read(self._pipe[0], 4096)
                *lines, buf = buf.split(b"\n")
                pids.update(line for line in lines if line)
        return len(pids)

    def _wait_answer(self, host: str, port: int, deadline: float) -> bool:
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if _answers(host, port, self.probe, min(left, 2.0)):
                return True
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        return False

    def run(self, app: BaseApplication) -> None:
        """Run gunicorn until it stops; `ServeError` if it never came up."""
        self._pipe = os.pipe()
        os.set_blocking(self._pipe[1], False)
        master = os.getpid()
        code: object = 0
        try:
            app.run()
        except SystemExit as stop:
            if os.getpid() != master:
                raise  # a forked worker leaving with its own status, which gunicorn reads
            code = stop.code
        except HaltServer as halt:
            # gunicorn lets it escape when a second worker fails to boot while the master
            # is already halting for the first (reap_workers inside stop)
            if os.getpid() != master:
                raise
            code = halt.exit_status
        finally:
            if os.getpid() == master:
                self._stop.set()
                if self._thread is not None:
                    self._thread.join(5.0)  # it looks at _stop at least every 2 s
                for fd in self._pipe:
                    os.close(fd)
        if self.failure is not None:
            raise ServeError(self.failure)
        if not self._ready.is_set() and code not in (0, None):
            raise ServeError(f"the server's workers did not start (gunicorn stopped with "
                             f"status {code}; the worker's own error is above): nothing was "
                             "served")
        if code not in (0, None):
            raise SystemExit(code)


class _Gunicorn(BaseApplication):  # type: ignore[misc]
    def __init__(self, factory: Callable[[], Flask], options: dict[str, Any]) -> None:
        self._factory = factory
        self._options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        return self._factory()


def refuse_damaged(audit: LogAudit) -> None:
    """Raise `StorageError` naming every lost or damaged object the audit found."""
    bad = [p for p in audit.problems if p.kind != "incomplete"]
    if not bad and not audit.more:
        return
    lines = "\n".join(f"  {p}" for p in bad)
    more = f"\n  ... and {audit.more} more" if audit.more else ""
    hint = ("" if audit.lost else
            "\nevery one is derivable: `ktl repair --data DIR` rewrites them from the verified log")
    raise StorageError(f"refusing to serve: the deep check found {len(bad) + audit.more} "
                       f"damaged objects:\n{lines}{more}{hint}")


def prepare(
    config: ServerConfig, key_file: str | None = None, deep: bool = False
) -> tuple[str, int]:
    """Create or load the key and check the stored log; returns (verifier key, tree size).

    ``deep`` re-hashes every entry and compares every bundle file (minutes at millions).
    """
    assert config.data_dir is not None
    signer = load_or_create_signer(config.data_dir, config.origin, key_file)
    storage = open_storage(config.data_dir, config.database)
    try:
        with storage.integration_lock():
            if deep:
                refuse_damaged(audit_log(storage, signer.verifier(), signer.name))
            result = check_log(storage, signer.verifier(), signer.name, deep=deep)
            if isinstance(storage, SqliteStorage):  # PostgreSQL keeps no files of its own
                storage.files.remove_temporaries()  # a killed writer's; no worker runs yet
    finally:
        storage.close()
    return signer.verifier_key_string(), result.size


def run_server(
    config: ServerConfig,
    opts: ServeOptions,
    progress: Callable[[str], None] = print,
) -> None:
    """Check the log, print its key, serve, print the URL once the workers answer, and
    serve until SIGTERM/SIGINT; `ServeError` if the workers never come up."""
    vkey, size = prepare(config, opts.key_file, opts.deep_check)
    progress(f"log origin:   {config.origin}")
    progress(f"verifier key: {vkey}")
    progress(f"tree size:    {size}")
    for line in config.describe():
        progress(line)
    where = "SQLite in the data folder" if config.database is None else redact_url(config.database)
    progress(f"storage:      {where}")

    watch = BootWatch(opts.workers, "/api/v1/log", opts.boot_timeout, progress)

    def factory() -> Flask:
        # The master already checked the log; workers only open it.
        return create_app(config, key_file=opts.key_file, check=False)

    options: dict[str, Any] = {
        "bind": f"{opts.host}:{opts.port}",
        "workers": opts.workers,
        "worker_class": "ledger._front.FrontWorker",
        "threads": opts.threads,
        "graceful_timeout": opts.graceful_timeout,
        "timeout": 120,
        "keepalive": 5,
        "accesslog": "-" if opts.access_log else None,
        "errorlog": "-",
        "loglevel": "warning",
        "worker_exit": _worker_exit,
        "proc_name": "ktl-serve",
        **watch.options(),
    }
    watch.run(_Gunicorn(factory, options))
