"""The log explorer pages (server-rendered, read-only, no scripts).

``init_web(app)`` registers the ``explorer`` blueprint: ``/`` (the log),
``/entries/<index>``, ``/kernels/<sha256>`` and ``/search``. Views read the log
only through ``current_app.extensions["ktl"]`` (docs/CONTRACTS.md) and escape
everything they show, since entries are attacker-written.
"""

from __future__ import annotations

from collections.abc import Mapping

from flask import Flask

from ledger.web.chart import ChartError, ChartRow, render_speedup_chart


def init_web(app: Flask, reproducers: Mapping[str, str] | None = None) -> None:
    """Register the explorer pages on ``app`` (call after the JSON API).

    `reproducers` (keyid -> name): the reproducers the log's operator names for display;
    verdicts by any other key are shown as by an unknown key, never as a headline."""
    # Imported here so that the chart renderer can be used without the storage layer.
    from ledger.web._service import REPRODUCERS
    from ledger.web._views import bp

    app.extensions[REPRODUCERS] = dict(reproducers or {})
    app.register_blueprint(bp)


__all__ = ["ChartError", "ChartRow", "init_web", "render_speedup_chart"]
