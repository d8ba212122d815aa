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
from typing import Any, Literal

from attest import AttestError
from attest.entry import VerifiedEntry, encode_entry, make_entry
from attest.keys import keyid
from attest.policy import TrustPolicy
from attest.predicates import (
    BENCHMARK_V1,
    KERNEL_V1,
    VERIFICATION_V1,
    BenchmarkPredicate,
    DecisionPolicy,
    Environment,
    JudgedEntry,
    ReproductionPredicate,
    ReproductionTarget,
)
from attest.statement import make_statement
from client.claims_view import ClaimReproductions, judged_claims, reproductions_of
from client.errors import ClientError, InputError, VerificationFailed
from client.models import SearchHit
from client.output import Output
from client.publish import load_signing_key
from client.receipts import load_policy, receipt_paths, write_receipt
from client.session import FetchedEntry, Session, connect, require_url
from client.state import TrustedState, atomic_write
from client.vindex import (
    IndexNotCommitted,
    Paging,
    TooManyPages,
    check_listing,
    index_key_for,
    verified_lookup,
)
from client.witnesses import load_witness_policy
from ledger.tlog.merkle import leaf_hash
from verifier import (
    DEFAULT_RUNS,
    UnknownOpError,
    VerifierError,
    environment_fingerprint,
    unpack_kernel,
)
from verifier.progress import Progress
from verifier.reproduce import (
    DEFAULT_POLICY,
    Claimed,
    ReproduceSettings,
    make_policy,
    not_rerun,
    reproduce_kernel,
    unknown_op_reason,
)
from verifier.sandbox import probe_layers, scratch_dir

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
    claims, search = _ClaimFinder(sess, stmt.subject_name, digest,
                                  frozenset(target.verified.signer_keyids), policy).run()
    return Gathered(target, kernel_dir, claims, search, not_rerun)


#: Most index rows one search reads in all (the publisher's entries about other kernels too).
MAX_ROWS_READ = 50_000
#: Search calls per reproduction, at most (a (digest, key) page may come back empty).
MAX_SEARCH_CALLS = 500


class _ClaimFinder:
    """Page through the index rows (capped), fetch and verify plausible claims.

    The claims that count are signed by the publisher or by a key the policy trusts for
    the kernel's claims, so they are looked up first by those keys, which strangers cannot
    pad: any number of entries about the digest by fresh keys cannot push them past the
    caps (issue 26). Rows by no such key are skipped unfetched (a policy rule letting any
    signer log claims turns that off: every claim row is then fetched).
    """

    def __init__(self, sess: Session, name: str, digest: str, publishers: frozenset[str],
                 policy: TrustPolicy | None) -> None:
        self.sess, self.name, self.digest = sess, name, digest
        self.publishers, self.policy = publishers, policy
        self.vouched = publishers if policy is None else _claim_signers(policy, name, publishers)
        self.claims: list[FetchedEntry] = []
        self.skipped: list[Skipped] = []
        self.skipped_total = self.examined = self.fetched = self.read = self.calls = 0
        self.seen: set[int] = set()
        self.digest_rows: list[int] = []  # the digest's own rows, which the index proves

    def run(self) -> tuple[tuple[FetchedEntry, ...], ClaimSearch]:
        # First the publisher's own entries about the digest (by digest and key: the
        # server's search strangers' keys cannot pad), then the digest's (another trusted
        # signer's): padding there can only make the search incomplete, never hide a claim
        # the first pass found.
        queries: list[dict[str, str]] = [
            *({"digest": self.digest, "keyid": k} for k in sorted(self.vouched or ())),
            {"digest": self.digest}]
        complete, read_all = True, False
        for query in queries:
            complete, read_all = self._query(query)
            if not complete:
                break
        proven, too_long, unproven = _prove_digest_rows(self.sess, self.digest,
                                                        self.digest_rows, read_all)
        self.claims.sort(key=lambda e: e.index)  # in log order, whichever key found them first
        return tuple(self.claims), ClaimSearch(
            self.examined, self.fetched, tuple(self.skipped), self.skipped_total, complete,
            proven, too_long, unproven)

    def _query(self, query: dict[str, str]) -> tuple[bool, bool]:
        """Read one query's pages: (complete so far, the digest's list read to its end). A
        (digest, key) page may be empty with a cursor: the server looked at a bounded part
        of the key's entries."""
        by_digest = "keyid" not in query
        cursor: int | None = None
        while True:
            self.calls += 1
            if self.calls > MAX_SEARCH_CALLS:
                return False, False  # a key with entries about countless other kernels
            page = self.sess.log.search(**query, cursor=cursor, limit=SEARCH_PAGE)
            if by_digest:
                self.digest_rows.extend(hit.index for hit in page.results)
            complete = all(self._examine(hit) for hit in page.results)
            if page.next_cursor is None or (not page.results and by_digest) or (
                cursor is not None and page.next_cursor <= cursor
            ):
                return complete, by_digest and page.next_cursor is None
            if not complete:
                return False, False
            cursor = page.next_cursor

    def _skip(self, k: Skipped, at: int) -> None:
        self.skipped_total += 1
        if len(self.skipped) < MAX_SKIPS_LISTED:
            self.skipped.append(Skipped(at, k.reason, k.detail))

    def _examine(self, hit: SearchHit) -> bool:
        """Look at one index row; False once a cap is reached."""
        self.read += 1
        if self.read > MAX_ROWS_READ:
            return False  # rows read in all, whatever the search: never without end
        if hit.index in self.seen:
            return True
        self.seen.add(hit.index)
        if (self.examined >= MAX_SEARCH_HITS or self.fetched >= MAX_FETCHED
                or len(self.claims) >= MAX_CLAIMS):
            return False
        self.examined += 1
        if hit.predicate_type not in CLAIM_TYPES:
            return True  # kernel/reproduction rows: not claims, and not worth a fetch
        if self.vouched is not None and not self.vouched & set(hit.keyids):
            # The index row is not evidence, but a stranger's row is skipped unfetched
            # so that thousands of them cannot make a reproduction slow.
            self._skip(Skipped(-1, "untrusted-signer", "the index names no key of the kernel's "
                               "publisher" + (" nor one the policy trusts for its claims"
                                              if self.policy is not None else "")
                               + " (not fetched)"), hit.index)
            return True
        self.fetched += 1
        entry = self.sess.fetch_entry(hit.index)
        why = claim_skip_reason(entry.verified, self.name, self.digest, self.publishers,
                                self.policy)
        if why is None:
            self.claims.append(entry)
        else:
            self._skip(why, hit.index)
        return True


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

    key = load_signing_key(key_path, passphrase_env)
    target = result.predicate.target
    kind = "reproduction"
    try:
        stmt = make_statement(result.name, result.digest, result.predicate)
        entry_bytes = encode_entry(make_entry(stmt, [key]))
    except AttestError as exc:
        raise InputError(f"cannot sign the reproduction statement: {exc}") from exc
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
    out: dict[int, ClaimReproductions] = {}
    for claim, _leaf in judged_claims(body)[:MAX_QUORUM_CLAIMS]:
        if claim not in out:
            out[claim] = reproductions_of(sess, sess.fetch_entry(claim), policy)
    return out


@dataclass(frozen=True)
class ReproduceOptions:
    """`ktl reproduce`: the entry, how thoroughly it is re-run and decided (the check
    budget, benchmark runs, the decision policy's tolerance and confidence, seconds of
    further measuring), whether the verdicts are signed and logged, the reader's policy,
    and the log."""

    index: int
    budget: str = "quick"
    runs: int | None = None
    tolerance: float | None = None
    confidence: float | None = None
    time_budget: float = DEFAULT_TIME_BUDGET_S
    sign_key: Path | None = None
    passphrase_env: str | None = None
    submit: bool = False
    receipt_dir: Path = Path(".ktl/receipts")
    log_url: str | None = None
    log_key: str | None = None
    policy_path: Path | None = None
    allow_weak_sandbox: bool = False
    witness_policy_path: Path | None = None


@dataclass(frozen=True)
class Reproduced:
    """`ktl reproduce`'s answer: the reproduction, its signed attestation (None: not
    signed) and, with a policy, where each claim it judged stands under its quorum."""

    index: int
    result: ReproductionResult
    attestation: dict[str, Any] | None = None
    independently: Mapping[int, ClaimReproductions] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"index": self.index, "subject_name": self.result.name,
                                "subject_sha256": self.result.digest,
                                "reproduction": self.result.body,
                                "claim_search": self.result.search.to_json()}
        if self.attestation is not None:
            data["attestation"] = self.attestation
        if self.independently is not None:
            data["independently"] = {str(k): v.to_json() for k, v in self.independently.items()}
        return data


def run_reproduce(opts: ReproduceOptions, out: Output) -> Reproduced:
    """`ktl reproduce`: gather the entry and its claims (all verified), re-run them in the
    sandbox, and sign (and log) the verdicts if asked."""
    if opts.submit and opts.sign_key is None:
        raise InputError("--submit needs --sign KEY (the attestation must be signed)")
    policy = load_policy(opts.policy_path)
    record = sandbox_gate(probe_layers().missing(), opts.submit, opts.allow_weak_sandbox)
    sess = connect(require_url(opts.log_url), TrustedState(), opts.log_key,
                   witness_policy=load_witness_policy(opts.witness_policy_path))
    out.note(f"log {sess.origin}: {sess.key.describe()}")
    try:
        decision, said = resolve_policy(sess.info.reproduce, opts.tolerance, opts.confidence)
        out.note(f"deciding speed-up claims with {said}")
        with scratch_dir("ktl-reproduce-") as work:
            settings = reproduce_settings(opts.budget, out.note, opts.runs, decision,
                                          opts.time_budget)
            result = reproduce_entry(sess, opts.index, work, settings, policy, record)
        attestation = None if opts.sign_key is None else sign_reproduction(
            sess, result, opts.sign_key, opts.passphrase_env, opts.receipt_dir,
            submit=opts.submit)
        weighed = None if policy is None else independently(sess, result.predicate, policy)
    finally:
        sess.close()
    return Reproduced(opts.index, result, attestation, weighed)
