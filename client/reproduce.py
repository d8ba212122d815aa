"""`ktl reproduce`: fetch a logged kernel and its claims, verified, ready for the verifier to re-run.

The client's part is to trust nothing it did not check: the entry comes with an
inclusion proof under a signed checkpoint, the source blob must hash to the
subject digest, every claim found by search is fetched again with its own proof
and must be about the same digest. The re-running and the verdicts are the
verifier's (`verifier.reproduce`); the client signs and logs the result if asked.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attest.predicates import BENCHMARK_V1, KERNEL_V1, VERIFICATION_V1
from client._errors import InputError, VerificationFailed
from client.session import FetchedEntry, Session, fetch_entry

CLAIM_TYPES = (VERIFICATION_V1, BENCHMARK_V1)
MAX_CLAIMS = 64


@dataclass(frozen=True)
class Gathered:
    """A verified target entry, the kernel folder unpacked from its blob, and its claims."""

    target: FetchedEntry
    kernel_dir: Path
    claims: tuple[FetchedEntry, ...]

    @property
    def digest(self) -> str:
        return self.target.verified.statement.subject_sha256


def gather(sess: Session, index: int, workdir: Path) -> Gathered:
    """Fetch and verify entry `index`, its source blob and the claims to reproduce."""
    from verifier import VerifierError
    from verifier.kernel import unpack_kernel

    target = fetch_entry(sess, index)
    stmt = target.verified.statement
    digest = stmt.subject_sha256
    if stmt.predicate_type not in (KERNEL_V1, *CLAIM_TYPES):
        raise InputError(f"entry {index} is a {stmt.predicate_type} entry; reproduce a kernel, "
                         "benchmark or verification entry")
    blob = sess.log.get_blob(digest)
    if hashlib.sha256(blob).hexdigest() != digest:
        raise VerificationFailed(f"the source blob does not hash to the subject sha256:{digest}")
    try:
        kernel_dir = unpack_kernel(blob, workdir)
    except VerifierError as exc:
        raise VerificationFailed(f"the source archive sha256:{digest} is unusable: {exc}") from exc
    if stmt.predicate_type in CLAIM_TYPES:
        return Gathered(target, kernel_dir, (target,))
    claims: list[FetchedEntry] = []
    cursor: int | None = None
    seen: set[int] = set()
    while len(claims) < MAX_CLAIMS:
        page = sess.log.search(digest=digest, cursor=cursor, limit=100)
        for hit in page.results:
            if hit.predicate_type not in CLAIM_TYPES or hit.index in seen:
                continue
            seen.add(hit.index)
            fetched = fetch_entry(sess, hit.index)
            fs = fetched.verified.statement
            if fs.subject_sha256 != digest or fs.subject_name != stmt.subject_name:
                raise VerificationFailed(
                    f"search returned entry {hit.index} for sha256:{digest}, but it is about "
                    f"{fs.subject_name} sha256:{fs.subject_sha256}"
                )
            claims.append(fetched)
        if page.next_cursor is None or not page.results or (
            cursor is not None and page.next_cursor <= cursor
        ):
            break
        cursor = page.next_cursor
    return Gathered(target, kernel_dir, tuple(claims[:MAX_CLAIMS]))


def target_json(sess: Session, entry: FetchedEntry) -> dict[str, Any]:
    """The `target` object of a reproduction/v1 predicate for `entry`."""
    stmt = entry.verified.statement
    return {
        "origin": sess.origin,
        "index": entry.index,
        "leaf_hash": entry.summary()["leaf_hash"],
        "predicate_type": stmt.predicate_type,
        "subject_sha256": stmt.subject_sha256,
    }
