"""The log explorer pages (server-rendered)."""

from __future__ import annotations

from flask import Flask


def init_web(app: Flask) -> None:
    """Register the explorer pages on the app (filled in by the pages work)."""
    del app
