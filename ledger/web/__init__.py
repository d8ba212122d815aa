"""The log explorer pages (server-rendered, read-only, no scripts).

``init_web(app)`` registers the ``explorer`` blueprint: ``/`` (the log),
``/entries/<index>``, ``/kernels/<sha256>`` and ``/search``. Views read the log
only through ``current_app.extensions["ktl"]`` (docs/CONTRACTS.md) and escape
everything they show, since entries are attacker-written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from flask import Flask

from attest.policy import TrustPolicy, reproducer_names
from ledger.web._service import REPRODUCER_QUORUM, REPRODUCERS
from ledger.web._views import bp
from ledger.web.chart import ChartError, ChartRow, render_speedup_chart

if TYPE_CHECKING:
    from attest.policy import TrustPolicy


def init_web(app: Flask, reproducers: Mapping[str, str] | TrustPolicy | None = None) -> None:
    """Register the explorer pages on ``app`` (call after the JSON API).

    `reproducers` (keyid -> name, or a policy of reproducers with its quorum, as
    `attest.policy.load_reproducer_panel` reads it): the reproducers the log's operator
    names; verdicts by any other key are shown as by an unknown key, never as a headline,
    and a claim is settled on the pages only once the quorum of named ones agree."""
    # Imported here so that the chart renderer can be used without the storage layer.

    if isinstance(reproducers, TrustPolicy):
        app.extensions[REPRODUCERS] = reproducer_names(reproducers)
        app.extensions[REPRODUCER_QUORUM] = reproducers.reproducer_quorum
    else:
        app.extensions[REPRODUCERS] = dict(reproducers or {})
    app.register_blueprint(bp)


__all__ = ["ChartError", "ChartRow", "init_web", "render_speedup_chart"]
