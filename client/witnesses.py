"""The client's witness policy: `--witness-policy FILE` / `$KTL_WITNESS_POLICY`, and the quorum
check that `client.trust.extend_trust` runs on every checkpoint before trusting it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from client.errors import InputError, VerificationFailed
from client.state import read_capped
from client.trust import QuorumCheck
from ledger.tlog.checkpoint import SignedCheckpoint
from ledger.tlog.note import Verifier
from ledger.tlog.witness_policy import (
    MAX_POLICY_BYTES,
    PolicyError,
    QuorumResult,
    WitnessPolicy,
    check_quorum,
)

F = TypeVar("F", bound=Callable[..., Any])


def witness_policy_option(fn: F) -> F:
    return click.option(
        "--witness-policy", "witness_policy_path", envvar="KTL_WITNESS_POLICY",
        type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
        help="Witness policy (witness/group/quorum lines); refuse checkpoints whose witness "
             "cosignatures do not meet its quorum (default: $KTL_WITNESS_POLICY).",
    )(fn)


def load_witness_policy(path: Path | None) -> WitnessPolicy | None:
    """Read and parse a witness policy file, or say what is wrong with it (exit 2)."""
    if path is None or str(path) == "":
        return None
    data = read_capped(path, MAX_POLICY_BYTES, "witness policy")
    try:
        return WitnessPolicy.parse(data)
    except PolicyError as exc:
        raise InputError(f"witness policy {path} is invalid: {exc}") from exc


def quorum_result(signed: SignedCheckpoint, log_verifier: Verifier, policy: WitnessPolicy
                  ) -> QuorumResult:
    """`check_quorum`, failing as a verification failure (exit 1) that names who is missing."""
    try:
        return check_quorum(signed, log_verifier, policy)
    except PolicyError as exc:
        raise VerificationFailed(
            f"witness quorum: the checkpoint of size {signed.checkpoint.size} is refused: {exc}"
        ) from exc


def quorum_check(policy: WitnessPolicy | None, log_verifier: Verifier) -> QuorumCheck | None:
    """The hook `extend_trust` runs on each new checkpoint (None: no policy, no check)."""
    if policy is None:
        return None

    def check(signed: SignedCheckpoint) -> None:
        quorum_result(signed, log_verifier, policy)

    return check


def cosigners(signed: SignedCheckpoint, log_verifier: Verifier, policy: WitnessPolicy | None
              ) -> dict[str, Any]:
    """Who cosigned a checkpoint: verified against the policy when there is one.

    Without a policy the signature lines are only listed (names and key IDs as the
    note carries them), marked unverified: anyone can append a line.
    """
    if policy is not None:
        result = quorum_result(signed, log_verifier, policy)
        return {"verified": True, **result.to_json(), "summary": result.describe()}
    lines = [{"name": s.name, "key_id": s.key_id.hex()}
             for s in signed.note.unverified_signatures]
    names = ", ".join(x["name"] for x in lines) or "none"
    return {"verified": False, "cosignatures": lines,
            "summary": f"carried, NOT verified (no --witness-policy): {names}"}
