"""`ktl reproduce`: fetch a logged kernel and its claims, verified, ready for the verifier to re-run.

The client's part is to trust nothing it did not check: the entry comes with an
inclusion proof under a signed checkpoint, the source blob must hash to the
subject digest, every claim found by search is fetched again with its own proof
and must be about the same digest. The re-running and the verdicts are the
verifier's (`verifier.reproduce`); the client signs and logs the result if asked.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from attest import AttestError
from attest.predicates import (
    BENCHMARK_V1,
    KERNEL_V1,
    VERIFICATION_V1,
    BenchmarkPredicate,
    DecisionPolicy,
    JudgedEntry,
    ReproductionPredicate,
    ReproductionTarget,
)
from client.errors import ClientError, InputError, VerificationFailed
from client.models import SearchHit
from client.session import FetchedEntry, Session

if TYPE_CHECKING:
    from attest.entry import VerifiedEntry
    from attest.policy import TrustPolicy
    from client.claims_view import ClaimReproductions
    from verifier.progress import Progress
    from verifier.reproduce import ReproduceSettings

CLAIM_TYPES = (VERIFICATION_V1, BENCHMARK_V1)
MAX_CLAIMS = 64
SEARCH_PAGE = 100
MAX_SEARCH_HITS = 2000  # index rows looked at, at most, per reproduction
MAX_FETCHED = 256  # candidate entries fetched and verified, at most
MAX_SKIPS_LISTED = 50
BENCH_SECONDS = {"quick": 10.0, "full": 30.0}
"""Most seconds of measuring per run (a run stops sooner once its interval is tight)."""
DEFAULT_TIME_BUDGET_S = 180.0
"""`--time-budget`: seconds of further measuring while a speed-up claim is undecided."""


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

SkipReason = Literal["not-a-claim", "other-kernel", "untrusted-signer"]


@dataclass(frozen=True)
class Skipped:
    """A logged entry about the kernel's digest that was not used as a claim, and why."""

    index: int
    reason: SkipReason
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "reason": self.reason, "detail": self.detail}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Skipped:
        reason = obj["reason"]
        if reason not in ("not-a-claim", "other-kernel", "untrusted-signer"):
            raise InputError(f"unknown skip reason {reason!r}")
        return cls(int(obj["index"]), reason, str(obj["detail"]))


@dataclass(frozen=True)
class ClaimSearch:
    """What the search for claims looked at: skipped entries (the first few listed), caps."""

    examined: int = 0
    fetched: int = 0
    skipped: tuple[Skipped, ...] = ()
    skipped_total: int = 0
    complete: bool = True
    #: The digest's rows were proven to be every entry naming it below this index (the
    #: log's committed index, `client.vindex`); None: the log commits to no index, or
    #: (`proof_too_long`) its list is longer than a reproduction proves.
    proven_up_to: int | None = None
    #: The digest's list is longer than PROOF_MAX_ENTRIES: proving it would cost what
    #: padding under the digest made it cost, so it was not proven (the search past
    #: MAX_ROWS_READ is incomplete anyway).
    proof_too_long: bool = False
    #: Why the search is not proven complete where `proven_up_to` is None (typed; the
    #: summary is rendered from it): "no_index" only where the log's signed checkpoint
    #: was read and carries no index line (`ledger.vindex.committed_root`, the one reader
    #: of that line, via `client.vindex.verified_lookup`); "no_lookup" where the log API
    #: this client talks to offers no index lookup.
    unproven: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"examined": self.examined, "fetched": self.fetched,
                "skipped": [k.to_json() for k in self.skipped],
                "skipped_total": self.skipped_total, "complete": self.complete,
                "proven_up_to": self.proven_up_to, "proof_too_long": self.proof_too_long,
                "unproven": self.unproven}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ClaimSearch:
        proven = obj.get("proven_up_to")
        return cls(int(obj["examined"]), int(obj["fetched"]),
                   tuple(Skipped.from_json(k) for k in obj["skipped"]),
                   int(obj["skipped_total"]), bool(obj["complete"]),
                   None if proven is None else int(proven), bool(obj.get("proof_too_long")),
                   None if obj.get("unproven") is None else str(obj["unproven"]))

    def summary(self) -> str:
        text = (f"{self.skipped_total} entr{'y' if self.skipped_total == 1 else 'ies'} about "
                f"this digest skipped (not the publisher's claims about this kernel)")
        if not self.complete:
            text += (f"; the search stopped after {self.examined} index rows / {self.fetched} "
                     "fetched entries, so later claims were not considered")
        if self.proof_too_long:
            text += (f"; the log's index lists more than {PROOF_MAX_ENTRIES} entries about "
                     "this digest, more than a reproduction proves, so the search is not "
                     "proven complete")
        elif self.proven_up_to is None and self.unproven == "no_index":
            text += ("; the log's signed checkpoint commits to no index, so the search is not "
                     "proven complete")
        elif self.proven_up_to is None:
            text += ("; the log API used offers no index lookup, so the search is not proven "
                     "complete")
        else:
            text += f"; the entries about this digest are proven complete up to index " \
                    f"{self.proven_up_to}"
        return text


@dataclass(frozen=True)
class Gathered:
    """A verified target entry, the kernel folder unpacked from its blob, and its claims."""

    target: FetchedEntry
    kernel_dir: Path
    claims: tuple[FetchedEntry, ...]
    search: ClaimSearch = ClaimSearch()
    not_rerun: str | None = None
    """Why the claims cannot be re-run here at all (an op this verifier does not know)."""

    @property
    def digest(self) -> str:
        return self.target.verified.statement.subject_sha256


def claim_skip_reason(
    verified: VerifiedEntry, name: str, digest: str, publishers: frozenset[str],
    policy: TrustPolicy | None,
) -> Skipped | None:
    """Why a verified entry is not a usable claim about kernel (`name`, `digest`), or None.

    Usable: a verification/benchmark statement with a subject that is exactly the
    kernel's name and digest (any position: every subject is considered), signed by
    the kernel's publisher or trusted for it by `policy`.
    """
    stmt = verified.statement
    if stmt.predicate_type not in CLAIM_TYPES:
        return Skipped(-1, "not-a-claim", f"a {stmt.predicate_type} statement")
    if not any(s.name == name and s.sha256 == digest for s in stmt.subjects):
        about = ", ".join(f"{s.name} sha256:{s.sha256[:16]}…" for s in stmt.subjects[:4])
        return Skipped(-1, "other-kernel", f"about {about}, not {name}")
    signers = frozenset(verified.signer_keyids)
    if signers & publishers:
        return None
    if policy is not None and policy.evaluate(verified).allowed:
        return None
    who = ", ".join(k[:16] for k in sorted(signers))
    return Skipped(-1, "untrusted-signer",
                   f"signed by {who}, not by the kernel's publisher"
                   + (" nor trusted by the policy" if policy is not None else ""))


def gather(sess: Session, index: int, workdir: Path, policy: TrustPolicy | None = None
           ) -> Gathered:
    """Fetch and verify entry `index`, its source blob and the claims to reproduce."""
    from verifier import UnknownOpError, VerifierError
    from verifier.kernel import unpack_kernel
    from verifier.reproduce import unknown_op_reason

    target = sess.fetch_entry(index)
    stmt = target.verified.statement
    digest = stmt.subject_sha256
    if stmt.predicate_type not in (KERNEL_V1, *CLAIM_TYPES):
        raise InputError(f"entry {index} is a {stmt.predicate_type} entry; reproduce a kernel, "
                         "benchmark or verification entry")
    blob = sess.log.get_blob(digest)
    if hashlib.sha256(blob).hexdigest() != digest:
        raise VerificationFailed(f"the source blob does not hash to the subject sha256:{digest}")
    not_rerun: str | None = None
    try:
        kernel_dir = unpack_kernel(blob, workdir)
    except UnknownOpError as exc:  # this verifier's limit, not the kernel's defect
        kernel_dir, not_rerun = workdir, unknown_op_reason(exc.op, exc.catalogue_version)
    except VerifierError as exc:
        raise VerificationFailed(f"the source archive sha256:{digest} is unusable: {exc}") from exc
    if stmt.predicate_type in CLAIM_TYPES:
        return Gathered(target, kernel_dir, (target,), not_rerun=not_rerun)
    claims, search = _search_claims(sess, stmt.subject_name, digest,
                                    frozenset(target.verified.signer_keyids), policy)
    return Gathered(target, kernel_dir, claims, search, not_rerun)


#: Most index rows one search reads in all (the publisher's entries about other kernels too).
MAX_ROWS_READ = 50_000
#: Search calls per reproduction, at most (a (digest, key) page may come back empty).
MAX_SEARCH_CALLS = 500


def _search_claims(
    sess: Session, name: str, digest: str, publishers: frozenset[str], policy: TrustPolicy | None
) -> tuple[tuple[FetchedEntry, ...], ClaimSearch]:
    """Page through the index rows (capped), fetch and verify plausible claims.

    The claims that count are signed by the publisher or by a key the policy trusts for
    the kernel's claims, so they are looked up first by those keys, which strangers cannot
    pad: any number of entries about the digest by fresh keys cannot push them past the
    caps (issue 26). Rows by no such key are skipped unfetched (a policy rule letting any
    signer log claims turns that off: every claim row is then fetched).
    """
    vouched = publishers if policy is None else _claim_signers(policy, name, publishers)
    claims: list[FetchedEntry] = []
    skipped: list[Skipped] = []
    skipped_total = examined = fetched = read = 0
    seen: set[int] = set()
    complete = True

    def skip(k: Skipped, at: int) -> None:
        nonlocal skipped_total
        skipped_total += 1
        if len(skipped) < MAX_SKIPS_LISTED:
            skipped.append(Skipped(at, k.reason, k.detail))

    def examine(hit: SearchHit) -> bool:
        """Look at one index row; False once a cap is reached."""
        nonlocal examined, fetched
        nonlocal read
        read += 1
        if read > MAX_ROWS_READ:
            return False  # rows read in all, whatever the search: never without end
        if hit.index in seen:
            return True
        seen.add(hit.index)
        if examined >= MAX_SEARCH_HITS or fetched >= MAX_FETCHED or len(claims) >= MAX_CLAIMS:
            return False
        examined += 1
        if hit.predicate_type not in CLAIM_TYPES:
            return True  # kernel/reproduction rows: not claims, and not worth a fetch
        if vouched is not None and not vouched & set(hit.keyids):
            # The index row is not evidence, but a stranger's row is skipped unfetched
            # so that thousands of them cannot make a reproduction slow.
            skip(Skipped(-1, "untrusted-signer", "the index names no key of the kernel's "
                         "publisher" + (" nor one the policy trusts for its claims"
                                        if policy is not None else "") + " (not fetched)"),
                 hit.index)
            return True
        fetched += 1
        entry = sess.fetch_entry(hit.index)
        why = claim_skip_reason(entry.verified, name, digest, publishers, policy)
        if why is None:
            claims.append(entry)
        else:
            skip(why, hit.index)
        return True

    # First the publisher's own entries about the digest (by digest and key: the server's
    # search strangers' keys cannot pad), then the digest's (another trusted signer's):
    # padding there can only make the search incomplete, never hide a claim the first
    # pass found. A (digest, key) page may be empty with a cursor: the server looked at a
    # bounded part of the key's entries.
    queries: list[dict[str, str]] = [
        *({"digest": digest, "keyid": k} for k in sorted(vouched or ())), {"digest": digest}]
    calls = 0
    digest_rows: list[int] = []
    read_all = False
    for query in queries:
        cursor: int | None = None
        while complete:
            calls += 1
            if calls > MAX_SEARCH_CALLS:
                complete = False  # a key with entries about countless other kernels
                break
            page = sess.log.search(**query, cursor=cursor, limit=SEARCH_PAGE)
            by_digest = "keyid" not in query  # the digest's own rows, which the index proves
            if by_digest:
                digest_rows.extend(hit.index for hit in page.results)
            complete = all(examine(hit) for hit in page.results)
            if page.next_cursor is None or (not page.results and by_digest) or (
                cursor is not None and page.next_cursor <= cursor
            ):
                read_all = by_digest and page.next_cursor is None
                break
            cursor = page.next_cursor
    proven, too_long, unproven = _prove_digest_rows(sess, digest, digest_rows, read_all)
    claims.sort(key=lambda e: e.index)  # in log order, whichever key found them first
    return tuple(claims), ClaimSearch(examined, fetched, tuple(skipped), skipped_total, complete,
                                      proven, too_long, unproven)


#: Most keys asked for by (digest, key) per reproduction; past it the digest's own rows
#: are read for the rest (a policy trusting countless keys is its own padding).
MAX_VOUCHED_KEYS = 256


def _claim_signers(policy: TrustPolicy, name: str, publishers: frozenset[str]
                   ) -> frozenset[str] | None:
    """The publisher's keys and every key the policy trusts for claims about `name`;
    None when a rule lets any signer (or too many keys to ask for each)."""
    trusted = policy.signers_for(name, CLAIM_TYPES)
    if trusted is None or len(trusted | publishers) > MAX_VOUCHED_KEYS:
        return None
    return trusted | publishers


#: Most entries of the digest's index list a reproduction reads to prove its search
#: complete (pages of PROOF_PAGE): the search itself reads at most MAX_ROWS_READ rows, so
#: a longer list (padding under the digest) leaves it incomplete whatever the proof says,
#: and proving it would cost what the padding made it cost.
PROOF_MAX_ENTRIES = MAX_ROWS_READ
PROOF_PAGE = 10_000


def _prove_digest_rows(sess: Session, digest: str, rows: list[int], read_all: bool
                       ) -> tuple[int | None, bool, str | None]:
    """Hold the digest's search rows against the log's committed index: the size they are
    proven complete up to (None where the log commits to no index, or where its list is
    longer than PROOF_MAX_ENTRIES: then True with it). A log whose rows leave out an entry
    its index lists is `SearchOmitted` (a refutation hidden from the search). The third
    value says why nothing was proven (`ClaimSearch.unproven`)."""
    from client.vindex import (
        IndexNotCommitted,
        Paging,
        TooManyPages,
        check_listing,
        index_key_for,
        verified_lookup,
    )

    if getattr(sess.log, "index_lookup", None) is None:
        return None, False, "no_lookup"
    paging = Paging(page_size=PROOF_PAGE, max_pages=-(-PROOF_MAX_ENTRIES // PROOF_PAGE))
    try:
        proved = verified_lookup(sess, index_key_for("digest", digest), paging)
    except IndexNotCommitted:
        return None, False, "no_index"
    except TooManyPages:
        return None, True, None
    # the rows reach at least the size the log announced when the session began
    published = sess.info.tree_size
    check_listing(proved, rows,
                  up_to=published if read_all else min(published, max(rows, default=-1) + 1))
    return proved.size, False, None


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
    """The verifier's reproduction/v1 predicate for a verified target entry."""

    name: str
    digest: str
    predicate: ReproductionPredicate
    search: ClaimSearch = ClaimSearch()

    @property
    def body(self) -> dict[str, Any]:
        """The predicate as JSON."""
        return self.predicate.to_json()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "digest": self.digest, "body": self.body,
                "claim_search": self.search.to_json()}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ReproductionResult:
        return cls(str(obj["name"]), str(obj["digest"]),
                   ReproductionPredicate.from_json(obj["body"]),
                   ClaimSearch.from_json(obj["claim_search"]))


SANDBOX_LIBRARY = "ktl-sandbox"
"""The key under the reproduction's environment.libraries that records the sandbox."""


def sandbox_gate(missing: list[str], submit: bool, allow_weak: bool) -> str:
    """The sandbox record for a reproduction; refuses to submit one made in a weak sandbox.

    `missing` is the list of confinement layers not in force here
    (`verifier.sandbox.probe_layers().missing()`). Raises InputError when `submit`
    would log a reproduction run with fewer layers than required, unless
    `allow_weak`, which is then recorded in the signed statement."""
    if not missing:
        return "all layers"
    record = ("weak, allowed by --allow-weak-sandbox: missing " + ",".join(missing))[:128]
    if submit and not allow_weak:
        raise InputError("refusing to submit: this machine's sandbox lacks "
                         + ", ".join(missing) + "; a reproduction logged from here could have "
                         "been subverted by the kernel it judged. Run it where every layer holds, "
                         "or pass --allow-weak-sandbox to log it with that recorded.")
    return record


def reproduce_settings(
    budget: str, progress: Progress, runs: int | None = None,
    decision: DecisionPolicy | None = None,
    sequential_budget_s: float = DEFAULT_TIME_BUDGET_S,
) -> ReproduceSettings:
    """How `ktl reproduce` re-runs claims: the check budget and its benchmark seconds per run,
    `runs` independent benchmark runs (None: the verifier's default), `decision` deciding
    speed-up claims (None: the default policy), the seconds further sequential looks may
    take, and where progress goes."""
    from verifier import DEFAULT_RUNS
    from verifier.reproduce import ReproduceSettings, make_policy

    return ReproduceSettings(budget=budget, time_budget_s=BENCH_SECONDS[budget],
                             runs=runs or DEFAULT_RUNS, policy=decision or make_policy(),
                             progress=progress, sequential_budget_s=sequential_budget_s)


def claimed_samples(sess: Session, pred: object, progress: Callable[[str], None]
                    ) -> bytes | None:
    """The raw samples a benchmark claim names, from the log's blob store (checked against
    their sha256 by `get_blob`), so its figures are recomputed before anything is measured;
    None (said) where the log does not hold them or for any other claim."""
    if not isinstance(pred, BenchmarkPredicate):
        return None
    try:
        return sess.log.get_blob(pred.samples.sha256)
    except ClientError as exc:
        progress(f"the claim's raw samples sha256:{pred.samples.sha256[:16]}… could not be "
                 f"fetched ({exc}); its figures are not recomputed from them")
        return None


def reproduce_entry(
    sess: Session, index: int, workdir: Path, settings: ReproduceSettings,
    policy: TrustPolicy | None = None, sandbox_record: str | None = None,
) -> ReproductionResult:
    """Gather entry `index` and its claims (all verified), then let the verifier re-run them
    as `settings` say (`reproduce_settings`).

    `sandbox_record` (from `sandbox_gate`) is written into the body's environment."""
    from attest.predicates import Environment
    from verifier import VerifierError
    from verifier.environment import environment_fingerprint
    from verifier.reproduce import Claimed, not_rerun, reproduce_kernel

    progress = settings.progress or (lambda _line: None)
    gathered = gather(sess, index, workdir / "kernel", policy)
    stmt = gathered.target.verified.statement
    if gathered.search.skipped_total or not gathered.search.complete:
        progress(gathered.search.summary())
    progress(f"entry {index}: {stmt.subject_name} sha256:{gathered.digest[:16]}…, "
         f"{len(gathered.claims)} claim entr{'y' if len(gathered.claims) == 1 else 'ies'} "
         "verified; re-running them in the sandbox")
    claims = [Claimed(c.verified.statement.predicate,
                      JudgedEntry(index=c.index, leaf_hash=c.summary()["leaf_hash"]),
                      samples=claimed_samples(sess, c.verified.statement.predicate, progress),
                      signer=c.verified.signer_keyids[0] if c.verified.signer_keyids else None)
              for c in gathered.claims]
    try:
        target = ReproductionTarget.from_json(target_json(sess, gathered.target))
        if gathered.not_rerun is not None:
            progress(f"not re-run: {gathered.not_rerun}")
            pred = not_rerun(claims, target, gathered.not_rerun,
                             Environment.from_json(environment_fingerprint()), settings.policy)
        else:
            pred = reproduce_kernel(gathered.kernel_dir, claims, target, settings)
        if sandbox_record is not None:
            env = pred.environment
            pred = dataclasses.replace(pred, environment=dataclasses.replace(
                env, libraries={**env.libraries, SANDBOX_LIBRARY: sandbox_record}))
        if not gathered.search.complete and pred.verdict == "confirmed":
            # Claims the search did not reach were not judged: never CONFIRMED on a part.
            progress(f"verdict inconclusive, not confirmed: {gathered.search.summary()}")
            pred = dataclasses.replace(pred, verdict="inconclusive")
    except VerifierError as exc:
        raise InputError(f"the verifier could not reproduce entry {index}: {exc}") from exc
    except AttestError as exc:
        raise InputError(f"the verifier's reproduction is not a valid reproduction/v1: {exc}") from exc
    return ReproductionResult(stmt.subject_name, gathered.digest, pred, gathered.search)


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
    from client.publish import load_signing_key
    from client.receipts import receipt_paths, write_receipt
    from client.state import atomic_write
    from ledger.tlog.merkle import leaf_hash

    key = load_signing_key(key_path, passphrase_env)
    target = result.predicate.target
    kind = "reproduction"
    try:
        stmt = make_statement(result.name, result.digest, result.predicate)
        entry_bytes = encode_entry(make_entry(stmt, [key]))
    except AttestError as exc:
        raise InputError(f"cannot sign the reproduction statement: {exc}") from exc
    from attest.keys import keyid

    out: dict[str, Any] = {"leaf_hash": leaf_hash(entry_bytes).hex(), "index": None,
                           "signer": keyid(key.public_key())}
    if not submit:
        path = receipt_paths(receipt_dir, f"{kind}-of-{target.index}").entry
        atomic_write(path, entry_bytes)
        out.update(entry_path=str(path), proof_path=None)
        return out
    logged = sess.submit(entry_bytes)
    paths = write_receipt(receipt_dir, kind, entry_bytes, logged.tlog_proof())
    out.update(index=logged.index, tree_size=logged.tree_size, duplicate=logged.duplicate,
               entry_path=str(paths.entry), proof_path=str(paths.proof))
    return out


MAX_QUORUM_CLAIMS = 16
"""Claim entries `independently` weighs after a reproduction, at most."""


def independently(sess: Session, body: ReproductionPredicate, policy: TrustPolicy
                  ) -> dict[int, ClaimReproductions]:
    """Where each claim entry this reproduction judged stands under the reader's reproducer
    quorum: its logged reproductions fetched, verified and weighed by `TrustPolicy.quorum`
    (`client.claims_view.reproductions_of`, as `ktl get` does), this one included once
    logged. At most `MAX_QUORUM_CLAIMS` claim entries."""
    from client.claims_view import judged_claims, reproductions_of

    out: dict[int, ClaimReproductions] = {}
    for claim, _leaf in judged_claims(body)[:MAX_QUORUM_CLAIMS]:
        if claim not in out:
            out[claim] = reproductions_of(sess, sess.fetch_entry(claim), policy)
    return out
