"""What the pages need from the log service (``current_app.extensions["ktl"]``).

A structural type, so the pages depend on the documented shape of
``ledger.server.LogService`` (docs/CONTRACTS.md) and not on the server module,
which itself imports this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, cast

from flask import current_app

from attest.policy import reproducer_panel as panel
from ledger.storage import LogStorage, StoredCheckpoint

if TYPE_CHECKING:
    from attest.policy import TrustPolicy


class LogServiceView(Protocol):
    storage: LogStorage
    origin: str
    verifier_key: str

    def tree_size(self) -> int: ...
    def latest_checkpoint(self) -> StoredCheckpoint | None: ...
    def inclusion_proof(self, index: int, tree_size: int) -> list[bytes]: ...


def service() -> LogServiceView:
    """The app's log service; the pages read nothing else."""
    return cast(LogServiceView, current_app.extensions["ktl"])


REPRODUCERS = "ktl-reproducers"
"""`app.extensions` key: keyid -> name of the reproducers the log's operator names."""


def reproducer_names() -> Mapping[str, str]:
    """The reproducers the operator configured for display (empty: none named)."""
    names = current_app.extensions.get(REPRODUCERS)
    return names if isinstance(names, dict) else {}


REPRODUCER_QUORUM = "ktl-reproducer-quorum"
"""`app.extensions` key: how many named reproducers on distinct environments settle a claim."""


def reproducer_panel() -> TrustPolicy:
    """The operator's reproducers and quorum as a policy (`TrustPolicy.quorum` decides)."""

    quorum = current_app.extensions.get(REPRODUCER_QUORUM, 1)
    return panel(reproducer_names(), quorum if isinstance(quorum, int) else 1)
