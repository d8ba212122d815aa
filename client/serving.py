"""What `ktl serve` was given, turned into the log's settings: `ServeSettings.resolve`.

The command only parses options into a `ServeSettings` and hands the result to
`ledger.serve.run_server`. Here the write token is read from its environment variable, the
origin from an existing log key, and the witness and reproducer policy files are validated
before anything starts; a bad value is an `InputError` (exit 2) naming the option.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from attest import AttestError
from attest.policy import load_reproducers
from client.errors import InputError
from ledger import LedgerError
from ledger.serve import ServeOptions
from ledger.server import (
    DEFAULT_ORIGIN,
    ServerConfig,
    load_log_policy,
    log_key_path,
    read_verifier_key,
)
from ledger.tlog.note import NoteVerifier

__all__ = ["ServeSettings"]


@dataclass(frozen=True)
class ServeSettings:
    """Every option of `ktl serve`, as the command line gave it."""

    data_dir: str
    database: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    origin: str | None = None
    key_file: str | None = None
    workers: int = 2
    threads: int = 32
    token_env: str | None = None
    max_batch: int = 1000
    batch_size: int = 4096
    batch_delay_ms: float = 5.0
    rate: float = 20000.0
    rate_bytes: float = 1024 * 1024.0
    blob_grace: float = 24 * 3600.0
    blob_budget: int = 1024 * 1024 * 1024
    witness_policy: str | None = None
    witness_wait: float = 10.0
    reproduce_tolerance: float | None = None
    reproduce_confidence: float | None = None
    reproducers: str | None = None
    access_log: bool = False
    deep_check: bool = False
    boot_timeout: float = 60.0

    def resolve(self) -> tuple[ServerConfig, ServeOptions]:
        """The log's settings and the process's; InputError for a bad option or file."""
        try:
            config = self._config()
            if self.reproducers is not None:
                load_reproducers(self.reproducers)
            if self.witness_policy is not None:
                load_log_policy(config.witness_policy or "")
        except (ValueError, AttestError, LedgerError) as exc:
            raise InputError(str(exc)) from None
        return config, ServeOptions(
            host=self.host, port=self.port, workers=self.workers, threads=self.threads,
            key_file=self.key_file, access_log=self.access_log, deep_check=self.deep_check,
            boot_timeout=self.boot_timeout)

    def _token(self) -> str | None:
        if self.token_env is None:
            return None
        token = os.environ.get(self.token_env)
        if not token:
            raise InputError(f"--token-env {self.token_env}: that environment variable is "
                             "empty or unset")
        return token

    def _origin(self) -> str:
        """--origin, else the name of the log key already in the data folder, else the default."""
        if self.origin is not None:
            return self.origin
        if not os.path.exists(log_key_path(self.data_dir, self.key_file)):
            return DEFAULT_ORIGIN
        return NoteVerifier.from_key_string(read_verifier_key(self.data_dir, self.key_file)).name

    def _config(self) -> ServerConfig:
        rate, rate_bytes = self.rate, self.rate_bytes
        return ServerConfig(
            data_dir=self.data_dir, database=self.database, origin=self._origin(),
            max_batch=self.max_batch, batch_size=self.batch_size,
            batch_delay_ms=self.batch_delay_ms, rate_per_second=rate,
            rate_burst=max(2 * rate, 10.0), bytes_per_second=rate_bytes,
            bytes_burst=max(4 * rate_bytes, 4 * 1024 * 1024.0), write_token=self._token(),
            blob_grace_seconds=self.blob_grace, blob_bytes_per_hour=self.blob_budget,
            witness_policy=None if self.witness_policy is None
            else os.path.abspath(self.witness_policy),
            witness_wait=self.witness_wait, reproduce_tolerance=self.reproduce_tolerance,
            reproduce_confidence=self.reproduce_confidence,
            reproducers=None if self.reproducers is None else os.path.abspath(self.reproducers))
