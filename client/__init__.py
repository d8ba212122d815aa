"""client: the `ktl` command line and Python API."""

from __future__ import annotations


class ClientError(Exception):
    """Root of every error raised by the client package."""


__all__ = ["ClientError"]
