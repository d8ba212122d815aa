"""Server settings with their limits (every size and count is capped)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ledger.server._errors import ApiError

DEFAULT_ORIGIN = "localhost/ktl"
MAX_ENTRY_BYTES = 65535


@dataclass(frozen=True)
class ServerConfig:
    """How one log server behaves. ``data_dir`` is None only with an injected storage."""

    data_dir: str | None = None
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
    write_token: str | None = None
    max_search_limit: int = 500
    reproduce_tolerance: float | None = None
    reproduce_confidence: float | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.max_entry_bytes <= MAX_ENTRY_BYTES:
            raise ValueError(f"max_entry_bytes must be between 1 and {MAX_ENTRY_BYTES}")
        if self.max_batch < 1 or self.batch_size < 1:
            raise ValueError("max_batch and batch_size must be at least 1")
        if self.max_blob_bytes < 1 or self.max_batch_body < 1:
            raise ValueError("body limits must be positive")
        if self.rate_per_second <= 0 or self.rate_burst < 1:
            raise ValueError("rate_per_second must be > 0 and rate_burst >= 1")
        if self.reproduce_tolerance is not None and not 0 <= self.reproduce_tolerance <= 1:
            raise ValueError("reproduce_tolerance must be a fraction between 0 and 1")
        if self.reproduce_confidence is not None and not 0.5 <= self.reproduce_confidence < 1:
            raise ValueError("reproduce_confidence must be at least 0.5 and below 1")

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
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ServerConfig:
        known = {k: v for k, v in obj.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def check_body_size(length: int | None, limit: int, what: str) -> None:
    if length is not None and length > limit:
        raise ApiError(413, "payload_too_large", f"{what} is {length} bytes; the limit is {limit}")
