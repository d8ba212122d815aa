"""The log's HTTP server: a Flask app factory serving the tlog-tiles read path and the JSON API.

`create_app(config)` opens ``config.database`` (PostgreSQL, shared by any number of
frontends) or else ``config.data_dir`` (SQLite + tile files), and the log key;
tests may inject a storage (e.g. `ledger.storage.MemoryStorage`) and a signer. Views
reach the log as ``current_app.extensions["ktl"]`` (a `LogService`).
"""

from __future__ import annotations

from flask import Flask

from attest.policy import load_reproducer_panel
from ledger.server._api import bp as _api_bp
from ledger.server._config import DEFAULT_ORIGIN, MAX_ENTRY_BYTES, ServerConfig
from ledger.server._errors import ApiError, install_error_handlers
from ledger.server._keys import (
    LogKeyError,
    load_or_create_signer,
    log_key_path,
    read_verifier_key,
    write_signer,
)
from ledger.server._readpath import bp as _read_bp
from ledger.server._service import LogService
from ledger.server._witnessing import load_log_policy
from ledger.storage import LogStorage, check_log, open_storage
from ledger.tlog.note import NoteSigner
from ledger.web import init_web


def create_app(
    config: ServerConfig,
    *,
    storage: LogStorage | None = None,
    signer: NoteSigner | None = None,
    key_file: str | None = None,
    check: bool = True,
) -> Flask:
    """A Flask app serving one log; it starts this process's integrator thread.

    With ``check`` the stored log is verified first (`ledger.storage.check_log`, under
    the integration lock) and a log that fails it raises `StorageError`: never serve it.
    """
    if storage is None:
        if config.data_dir is None and config.database is None:
            raise ValueError("create_app needs config.data_dir, config.database or a storage")
        storage = open_storage(config.data_dir, config.database)
    if signer is None:
        if config.data_dir is None:
            raise ValueError("create_app needs config.data_dir or a signer")
        signer = load_or_create_signer(config.data_dir, config.origin, key_file)
    if check:
        with storage.integration_lock():
            check_log(storage, signer.verifier(), signer.name)
    app = Flask("ledger.server")
    app.config["MAX_CONTENT_LENGTH"] = config.max_content_length
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["ktl"] = LogService(storage, signer, config)
    install_error_handlers(app)
    app.register_blueprint(_read_bp)
    app.register_blueprint(_api_bp)

    init_web(app, load_reproducer_panel(config.reproducers) if config.reproducers else None)
    return app


__all__ = [
    "DEFAULT_ORIGIN",
    "MAX_ENTRY_BYTES",
    "ApiError",
    "LogKeyError",
    "LogService",
    "ServerConfig",
    "create_app",
    "load_log_policy",
    "load_or_create_signer",
    "log_key_path",
    "read_verifier_key",
    "write_signer",
]
