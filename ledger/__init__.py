"""ledger: the log (RFC 9162 Merkle tree, checkpoints, storage, HTTP server).

The pure protocol an auditor installs is `ledger.tlog` (no web framework, database or HTTP
client); importing this package pulls in only that, re-exported here. The service lives
beside it: storage, the sequencer, the HTTP server and explorer, the verifiable index.
"""

from __future__ import annotations

from ledger.tlog import *  # noqa: F403
from ledger.tlog import __all__ as __all__
