"""client: the `ktl` command line and Python API."""

from __future__ import annotations

from client._errors import (
    ClientError,
    InputError,
    LogMisbehaviour,
    NetworkError,
    ServerError,
    VerificationFailed,
)

__all__ = [
    "ClientError",
    "InputError",
    "LogMisbehaviour",
    "NetworkError",
    "ServerError",
    "VerificationFailed",
]
