"""`ktl reproduce`: fetch a logged kernel and its claims, verified, ready for the verifier to re-run.

The client's part is to trust nothing it did not check: the entry comes with an
inclusion proof under a signed checkpoint, the source blob must hash to the
subject digest, every claim found by search is fetched again with its own proof
and must be about the same digest. The re-running and the verdicts are the
verifier's (`verifier.reproduce`); the client signs and logs the result if asked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attest import AttestError
from attest.predicates import (
    BENCHMARK_V1,
    KERNEL_V1,
    REPRODUCTION_V1,
    VERIFICATION_V1,
    DecisionPolicy,
    parse_predicate,
)
from client._errors import InputError, VerificationFailed
from client.session import FetchedEntry, Session, fetch_entry

CLAIM_TYPES = (VERIFICATION_V1, BENCHMARK_V1)
MAX_CLAIMS = 64
BENCH_SECONDS = {"quick": 10.0, "full": 30.0}
"""Most seconds of measuring per run (a run stops sooner once its interval is tight)."""


def resolve_policy(log_defaults: Mapping[str, float] | None, tolerance: float | None,
                   confidence: float | None) -> tuple[DecisionPolicy, str]:
    """The decision policy and where each part came from: the option, the log's suggestion,
    or the built-in default (in that order)."""
    from verifier import VerifierError
    from verifier.reproduce import DEFAULT_POLICY, make_policy

    suggested = log_defaults or {}
    picked: dict[str, float] = {}
    said: list[str] = []
    for name, given, default in (("tolerance", tolerance, DEFAULT_POLICY.tolerance),
                                 ("confidence", confidence, DEFAULT_POLICY.confidence)):
        if given is not None:
            picked[name], where = given, "--" + name
        elif name in suggested:
            picked[name], where = suggested[name], "the log's default"
        else:
            picked[name], where = default, "built-in default"
        said.append(f"{name} {100 * picked[name]:g} % ({where})")
    try:
        policy = make_policy(picked["tolerance"], picked["confidence"])
    except (AttestError, VerifierError) as exc:
        raise InputError(f"unusable reproduce policy: {exc}") from exc
    return policy, ", ".join(said)


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
    signers = set(target.verified.signer_keyids)
    while len(claims) < MAX_CLAIMS:
        page = sess.log.search(digest=digest, cursor=cursor, limit=100)
        for hit in page.results:
            if hit.predicate_type not in CLAIM_TYPES or hit.index in seen:
                continue
            seen.add(hit.index)
            fetched = fetch_entry(sess, hit.index)
            fs = fetched.verified.statement
            if fs.subject_sha256 != digest:
                raise VerificationFailed(
                    f"search returned entry {hit.index} for sha256:{digest}, but it is about "
                    f"{fs.subject_name} sha256:{fs.subject_sha256}"
                )
            # Only the publisher's own claims: anyone can log a claim about any digest,
            # and a stranger's bogus claim must not make the vendor's kernel look refuted.
            if fs.subject_name == stmt.subject_name and signers & set(
                fetched.verified.signer_keyids
            ):
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


@dataclass(frozen=True)
class ReproductionResult:
    """The verifier's reproduction/v1 body for a verified target entry."""

    name: str
    digest: str
    body: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "digest": self.digest, "body": self.body}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ReproductionResult:
        return cls(str(obj["name"]), str(obj["digest"]), dict(obj["body"]))


def reproduce_entry(
    sess: Session, index: int, workdir: Path, budget: str, note: Callable[[str], None],
    runs: int | None = None, policy: DecisionPolicy | None = None,
) -> ReproductionResult:
    """Gather entry `index` and its claims (all verified), then let the verifier re-run them
    (`runs` independent benchmark runs; `policy` decides speed-up claims)."""
    from verifier import DEFAULT_RUNS, VerifierError
    from verifier.reproduce import make_policy, reproduce_kernel

    gathered = gather(sess, index, workdir / "kernel")
    stmt = gathered.target.verified.statement
    note(f"entry {index}: {stmt.subject_name} sha256:{gathered.digest[:16]}…, "
         f"{len(gathered.claims)} claim entr{'y' if len(gathered.claims) == 1 else 'ies'} "
         "verified; re-running them in the sandbox")
    claims = [(c.verified.statement.predicate_type, c.verified.statement.predicate.to_json())
              for c in gathered.claims]
    try:
        body = reproduce_kernel(gathered.kernel_dir, claims, target_json(sess, gathered.target),
                                budget=budget, time_budget_s=BENCH_SECONDS[budget],
                                progress=note, runs=runs or DEFAULT_RUNS,
                                policy=policy or make_policy())
    except VerifierError as exc:
        raise InputError(f"the verifier could not reproduce entry {index}: {exc}") from exc
    try:
        parse_predicate(REPRODUCTION_V1, body)
    except AttestError as exc:
        raise InputError(f"the verifier's reproduction is not a valid reproduction/v1: {exc}") from exc
    return ReproductionResult(stmt.subject_name, gathered.digest, body)


def sign_reproduction(
    sess: Session,
    result: ReproductionResult,
    key_path: Path,
    passphrase_env: str | None,
    receipt_dir: Path,
    *,
    submit: bool,
) -> dict[str, Any]:
    """Sign the reproduction/v1 statement; with `submit`, log it and keep its receipt."""
    from attest.entry import encode_entry, make_entry
    from attest.statement import make_statement
    from client.publish import load_signing_key, submit_verified
    from client.receipts import receipt_paths, write_receipt
    from client.state import atomic_write
    from ledger.merkle import leaf_hash
    from ledger.proof_bundle import TlogProof

    key = load_signing_key(key_path, passphrase_env)
    target = result.body["target"]
    kind = f"reproduction-{target['index']}"
    try:
        stmt = make_statement(result.name, result.digest,
                              parse_predicate(REPRODUCTION_V1, result.body))
        entry_bytes = encode_entry(make_entry(stmt, [key]))
    except AttestError as exc:
        raise InputError(f"cannot sign the reproduction statement: {exc}") from exc
    out: dict[str, Any] = {"leaf_hash": leaf_hash(entry_bytes).hex(), "index": None}
    if not submit:
        path = receipt_paths(receipt_dir, kind).entry
        atomic_write(path, entry_bytes)
        out.update(entry_path=str(path), proof_path=None)
        return out
    index, proof, note, size, dup = submit_verified(sess.log, sess.verifier, sess.origin,
                                                    sess.trusted, entry_bytes)
    paths = write_receipt(receipt_dir, kind, entry_bytes, TlogProof(index, tuple(proof), note))
    out.update(index=index, tree_size=size, duplicate=dup, entry_path=str(paths.entry),
               proof_path=str(paths.proof))
    return out
