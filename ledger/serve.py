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
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

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


def _worker_exit(server: Any, worker: Any) -> None:
    app = getattr(worker, "wsgi", None)
    if isinstance(app, Flask) and "ktl" in app.extensions:
        app.extensions["ktl"].close()


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
    """Check the log, print its key and URL, and serve until SIGTERM/SIGINT."""
    vkey, size = prepare(config, opts.key_file, opts.deep_check)
    progress(f"log origin:   {config.origin}")
    progress(f"verifier key: {vkey}")
    progress(f"tree size:    {size}")
    for line in config.describe():
        progress(line)
    where = "SQLite in the data folder" if config.database is None else redact_url(config.database)
    progress(f"storage:      {where}")

    def when_ready(server: Any) -> None:
        for listener in server.LISTENERS:
            host, port = listener.getsockname()[:2]
            progress(f"serving on http://{host}:{port}")
        sys.stdout.flush()

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
        "when_ready": when_ready,
        "worker_exit": _worker_exit,
        "proc_name": "ktl-serve",
    }
    _Gunicorn(factory, options).run()
