"""client: the `ktl` command line and its Python API.

The Python API mirrors the commands (see docs/auditing.md):

    from client import LogClient, TrustedState, connect, verify_receipt

    sess = connect("http://127.0.0.1:8080", TrustedState())      # pins the log key for this URL (TOFU)
    entry = sess.fetch_entry(0)                                 # proof + signatures verified
    report, _ = verify_receipt(proof_bytes, entry_bytes, load_verifier(log_key))

Every error is a `ClientError`; its `exit_code` is what `ktl` exits with.
"""

from __future__ import annotations

from client.api import LogAPI, LogClient
from client.errors import (
    EXIT_INCONCLUSIVE,
    EXIT_NETWORK,
    EXIT_OK,
    EXIT_UNSUPPORTED,
    EXIT_USAGE,
    EXIT_VERIFICATION,
    ClientError,
    InputError,
    LogMisbehaviour,
    NetworkError,
    ServerError,
    VerificationFailed,
)
from client.models import EntryRecord, LogInfo, SearchHit, SearchPage, SubmitResult
from client.monitor import Finding, MonitorReport, MonitorState, Release, run_monitor
from client.publish import (
    Claim,
    KernelRelease,
    Published,
    Results,
    load_results,
    publish_claims,
    run_publish,
)
from client.receipts import ReceiptReport, verify_receipt, write_receipt
from client.session import (
    EmptyLog,
    FetchedEntry,
    Logged,
    Session,
    connect,
)
from client.state import Pin, TrustedState, default_home
from client.trust import (
    Accepted,
    KeyChoice,
    Refused,
    Verdict,
    choose_log_key,
    extend_trust,
    judge,
    load_verifier,
)

__all__ = [
    "EXIT_INCONCLUSIVE",
    "EXIT_NETWORK",
    "EXIT_OK",
    "EXIT_UNSUPPORTED",
    "EXIT_USAGE",
    "EXIT_VERIFICATION",
    "Accepted",
    "Claim",
    "ClientError",
    "EmptyLog",
    "EntryRecord",
    "FetchedEntry",
    "Finding",
    "InputError",
    "KernelRelease",
    "KeyChoice",
    "LogAPI",
    "LogClient",
    "LogInfo",
    "LogMisbehaviour",
    "Logged",
    "MonitorReport",
    "MonitorState",
    "NetworkError",
    "Pin",
    "Published",
    "ReceiptReport",
    "Refused",
    "Release",
    "Results",
    "SearchHit",
    "SearchPage",
    "ServerError",
    "Session",
    "SubmitResult",
    "TrustedState",
    "Verdict",
    "VerificationFailed",
    "choose_log_key",
    "connect",
    "default_home",
    "extend_trust",
    "judge",
    "load_results",
    "load_verifier",
    "publish_claims",
    "run_monitor",
    "run_publish",
    "verify_receipt",
    "write_receipt",
]
