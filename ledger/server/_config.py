"""Server settings with their limits (every size and count is capped)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ledger.server._errors import ApiError
from ledger.storage import StorageError, check_database_url, redact_url

DEFAULT_ORIGIN = "localhost/ktl"
MAX_ENTRY_BYTES = 65535
MAX_BLOB_GRACE = 30 * 24 * 3600.0


@dataclass(frozen=True)
class ServerConfig:
    """How one log server behaves. ``data_dir`` is None only with an injected storage."""

    data_dir: str | None = None
    #: A postgresql:// URL: entries, tiles and checkpoints live there, shared by frontends.
    database: str | None = None
    origin: str = DEFAULT_ORIGIN
    max_entry_bytes: int = MAX_ENTRY_BYTES
    max_blob_bytes: int = 16 * 1024 * 1024
    max_batch: int = 1000
    max_batch_body: int = 16 * 1024 * 1024
    batch_size: int = 4096
    batch_delay_ms: float = 5.0
    submit_timeout: float = 30.0
    rate_per_second: float = 20000.0
    rate_burst: float = 40000.0
    #: Request bytes of submissions a second per client address (burst: `bytes_burst`);
    #: anonymous writers (no write token configured) share the same budget in all.
    bytes_per_second: float = 1024 * 1024.0
    bytes_burst: float = 4 * 1024 * 1024.0
    write_token: str | None = None
    max_search_limit: int = 500
    blob_grace_seconds: float = 24 * 3600.0
    blob_bytes_per_hour: int = 1024 * 1024 * 1024
    witness_policy: str | None = None
    """Path of a witness policy: publish only checkpoints whose cosignatures meet it."""
    witness_wait: float = 10.0
    """Seconds a submission waits for a cosigned checkpoint before it gets a 503."""
    witness_request_timeout: float = 5.0
    reproduce_tolerance: float | None = None
    reproduce_confidence: float | None = None
    reproducers: str | None = None
    """Path of a TOML file of [[reproducer]] tables (name, keys, key_files): the reproducers
    the explorer names beside their verdicts; verdicts by other keys show as unknown."""

    def __post_init__(self) -> None:
        if self.database is not None:
            try:
                check_database_url(self.database)
            except StorageError as e:
                raise ValueError(str(e)) from None
        if not 1 <= self.max_entry_bytes <= MAX_ENTRY_BYTES:
            raise ValueError(f"max_entry_bytes must be between 1 and {MAX_ENTRY_BYTES}")
        if self.max_batch < 1 or self.batch_size < 1:
            raise ValueError("max_batch and batch_size must be at least 1")
        if self.max_blob_bytes < 1 or self.max_batch_body < 1:
            raise ValueError("body limits must be positive")
        if self.rate_per_second <= 0 or self.rate_burst < 1:
            raise ValueError("rate_per_second must be > 0 and rate_burst >= 1")
        if self.bytes_per_second <= 0 or self.bytes_burst < self.max_entry_body:
            raise ValueError(f"bytes_per_second must be > 0 and bytes_burst at least one entry "
                             f"request ({self.max_entry_body} bytes)")
        if not 1 <= self.blob_grace_seconds <= MAX_BLOB_GRACE:
            raise ValueError(f"blob_grace_seconds must be between 1 and {MAX_BLOB_GRACE:.0f} "
                             "(30 days)")
        if not 0 < self.witness_wait <= 600 or not 0 < self.witness_request_timeout <= 120:
            raise ValueError("witness_wait must be in (0, 600] s and witness_request_timeout "
                             "in (0, 120] s")
        if self.blob_bytes_per_hour < self.max_blob_bytes:
            raise ValueError(f"blob_bytes_per_hour ({self.blob_bytes_per_hour}) must be at least "
                             f"max_blob_bytes ({self.max_blob_bytes}), or no blob could be uploaded")
        if self.reproduce_tolerance is not None and not 0 <= self.reproduce_tolerance <= 1:
            raise ValueError("reproduce_tolerance must be a fraction between 0 and 1")
        if self.reproduce_confidence is not None and not 0.5 <= self.reproduce_confidence < 1:
            raise ValueError("reproduce_confidence must be at least 0.5 and below 1")

    @property
    def blob_gc_interval(self) -> float:
        """Seconds between blob collection passes: a quarter of the grace, 0.5 s to 10 min."""
        return min(600.0, max(0.5, self.blob_grace_seconds / 4))

    def describe(self) -> list[str]:
        """The settings that decide who may write what, as `ktl serve` prints them at start."""
        return [
            "writes:       " + ("need 'Authorization: Bearer <token>' (entries and blobs)"
                                if self.write_token is not None else
                                "open to anyone (no --token-env)"),
            f"rate:         {self.rate_per_second:g} submissions/s and "
            f"{self.bytes_per_second:g} request bytes/s per client address (bursts "
            f"{self.rate_burst:g}, {self.bytes_burst:g}; shared by all workers"
            + ("; anonymous writers share one byte budget in all)" if self.write_token is None
               else ")"),
            f"blobs:        at most {self.max_blob_bytes} bytes each, "
            f"{self.blob_bytes_per_hour} bytes per client address per hour"
            + (" and in all for anonymous writers" if self.write_token is None else "")
            + " (shared by all workers)",
            f"blob cleanup: blobs no logged entry references are deleted "
            f"{self.blob_grace_seconds:g} s after upload",
            "witnesses:    " + (f"checkpoints are published once {self.witness_policy} is met; "
                                f"submissions wait up to {self.witness_wait:g} s, then 503"
                                if self.witness_policy else "none (no --witness-policy)"),
        ]

    def reproduce_defaults(self) -> dict[str, float]:
        """The decision defaults this log suggests to `ktl reproduce` (only those set)."""
        out: dict[str, float] = {}
        if self.reproduce_tolerance is not None:
            out["tolerance"] = self.reproduce_tolerance
        if self.reproduce_confidence is not None:
            out["confidence"] = self.reproduce_confidence
        return out

    @property
    def max_content_length(self) -> int:
        """The largest body any endpoint accepts (each endpoint checks its own)."""
        return max(self.max_blob_bytes, self.max_batch_body, 4 * self.max_entry_bytes)

    @property
    def max_entry_body(self) -> int:
        """A single-entry request body: the entry as JSON, allowing whitespace."""
        return 4 * self.max_entry_bytes

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["write_token"] = None if self.write_token is None else "***"
        out["database"] = None if self.database is None else redact_url(self.database)
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ServerConfig:
        known = {k: v for k, v in obj.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def check_body_size(length: int | None, limit: int, what: str) -> None:
    if length is not None and length > limit:
        raise ApiError(413, "payload_too_large", f"{what} is {length} bytes; the limit is {limit}")
