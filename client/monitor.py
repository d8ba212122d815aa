"""`ktl monitor`: tail a log through its tiles, verify everything, report releases and violations.

Only the tlog-tiles read path is used (checkpoint, hash tiles, entry bundles);
the JSON API is never trusted here. Each run:

1. verifies the latest checkpoint's signature;
2. proves it consistent with the trusted-state checkpoint and the monitor's own
   last checkpoint, computing the consistency proof from tiles that are
   themselves verified against the new root (a fork or rollback is fatal, with
   evidence saved);
3. reads each entry bundle from where the last run stopped, checks every entry's
   leaf hash against the verified level-0 tile, verifies its envelope and
   statement, applies the trust policy, and records kernel releases per name;
   reports every reproduction of a watched kernel (one released in this log, or one the
   policy covers) with its signer as the policy names it and where each claim it judges
   stands against the policy's reproducer quorum (`TrustPolicy.quorum`, the rule `ktl get`
   and the explorer apply), and a `refutation` finding once named reproducers on distinct
   environments reach the quorum (their verdicts are kept in the state, so verdicts
   logged between runs add up; strangers' are never kept or counted);
4. saves its position after every bundle, so an interrupted run resumes;
5. recomputes the verifiable index from the entries it read (kept beside its state,
   `client.vindex.RecomputedIndex`) and compares its root with the one the checkpoint
   commits to: a difference is an `IndexMismatch`, with evidence saved. The index is
   checked when this monitor has read every entry from 0 in order (a `--since` run,
   or a lost index file, leaves it unchecked: `index_checked` is false);
6. judges every benchmark claim of a watched kernel by its own evidence, with the rules
   `ktl publish` and `ktl reproduce` apply (`attest.verdicts`): figures its raw samples (the
   blob it names, fetched and hash-checked) do not give, a time below the physical floor,
   and a claim of the same key about the same kernel that disagrees beyond both intervals
   (among those this run read) are `violation`s; a claim whose own record says its
   measurement was disturbed or thin is reported `weak`.
"""

from __future__ import annotations

import json
import multiprocessing
import re
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attest import HEX64_PATTERN, AttestError
from attest.entry import VerifiedEntry
from attest.policy import Reproduction, environment_identity, unknown_signer_phrase
from attest.predicates import BENCHMARK_V1, KERNEL_V1, REPRODUCTION_V1, BenchmarkPredicate
from attest.verdicts import evidence_findings, weaknesses
from ledger import LedgerError
from ledger.tlog.checkpoint import SignedCheckpoint
from ledger.tlog.merkle import consistency_proof, leaf_hash
from ledger.tlog.tiles import TILE_WIDTH, TileHashReader, decode_bundle, entries_path

if TYPE_CHECKING:
    from attest.policy import TrustPolicy

from client.api import LogAPI
from client.claims_view import judged_claims, verdict_on
from client.errors import ClientError, InputError, ServerError, VerificationFailed
from client.output import Output
from client.receipts import load_policy
from client.session import Session, connect, require_url
from client.state import TrustedState, atomic_write, origin_slug, read_capped
from client.trust import check_entry, refuse
from client.vindex import RecomputedIndex
from client.witnesses import load_witness_policy

KERNEL_TYPE = KERNEL_V1
_MONITOR_WHAT = "the checkpoint the monitor last read, of size"
MAX_MONITOR_STATE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Release:
    """A kernel release seen in the log: the newest kernel/v1 entry for a name."""

    name: str
    version: str
    index: int
    sha256: str
    keyids: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "index": self.index,
                "sha256": self.sha256, "keyids": list(self.keyids)}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Release:
        return cls(str(obj["name"]), str(obj["version"]), int(obj["index"]),
                   str(obj["sha256"]), tuple(str(k) for k in obj["keyids"]))


@dataclass(frozen=True)
class Finding:
    """One thing the monitor reports: a `release` or a `violation` at an index."""

    kind: str
    index: int
    name: str
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "index": self.index, "name": self.name, "detail": self.detail}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Finding:
        return cls(str(obj["kind"]), int(obj["index"]), str(obj["name"]), str(obj["detail"]))


MAX_CLAIMS_KEPT = 16
"""Benchmark claims of one key about one kernel kept to compare the next with (the first)."""
MAX_KEYS_KEPT = 256
"""(key, kernel) pairs whose benchmark claims are kept, at most (the first seen)."""
MAX_WEIGHED_PER_CLAIM = 64
"""Named reproducers' verdicts kept per claim entry (strangers' are never kept)."""


@dataclass(frozen=True)
class Weighed:
    """One named reproducer's verdict on claim entry (claim, leaf), as the quorum weighs it;
    kept in the monitor's state so that verdicts logged on different runs add up."""

    claim: int
    leaf: str
    reproduction: Reproduction

    def to_json(self) -> dict[str, Any]:
        r = self.reproduction
        return {"claim": self.claim, "leaf": self.leaf, "index": r.index,
                "signers": list(r.signer_keyids), "environment": list(r.environment),
                "verdict": r.verdict}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Weighed:
        return cls(int(obj["claim"]), str(obj["leaf"]), Reproduction(
            int(obj["index"]), tuple(str(k) for k in obj["signers"]),
            tuple(str(e) for e in obj["environment"]), str(obj["verdict"])))


Ledger = dict[tuple[int, str], list[Reproduction]]
"""Named reproducers' verdicts per claim entry (index, leaf hash), while a run reads."""


def _ledger(weighed: tuple[Weighed, ...]) -> Ledger:
    out: Ledger = {}
    for w in weighed:
        out.setdefault((w.claim, w.leaf), []).append(w.reproduction)
    return out


def _weighed(ledger: Ledger) -> tuple[Weighed, ...]:
    return tuple(Weighed(c, leaf, r) for (c, leaf), rs in sorted(ledger.items()) for r in rs)


@dataclass(frozen=True)
class KeptClaim:
    """A watched kernel's benchmark claim, kept so that a later claim of the same key about
    the same kernel is compared with it (`attest.verdicts.contradictions`)."""

    index: int
    signers: tuple[str, ...]
    digest: str
    body: BenchmarkPredicate

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "signers": list(self.signers), "digest": self.digest,
                "body": self.body.to_json()}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> KeptClaim:
        return cls(int(obj["index"]), tuple(str(k) for k in obj["signers"]), str(obj["digest"]),
                   BenchmarkPredicate.from_json(obj["body"]))


Claims = dict[tuple[tuple[str, ...], str], list[KeptClaim]]
"""Kept benchmark claims per (sorted signer key ids, subject digest)."""


def _claims(kept: tuple[KeptClaim, ...]) -> Claims:
    out: Claims = {}
    for k in kept:
        out.setdefault((k.signers, k.digest), []).append(k)
    return out


def _kept(claims: Claims) -> tuple[KeptClaim, ...]:
    return tuple(k for _, ks in sorted(claims.items()) for k in ks)


@dataclass(frozen=True)
class MonitorState:
    """Where the monitor stopped: next index to read and the checkpoint it last completed."""

    origin: str
    next_index: int = 0
    checkpoint: bytes | None = None
    releases: tuple[Release, ...] = ()
    #: Named reproducers' verdicts seen so far, per claim entry (see `Weighed`).
    weighed: tuple[Weighed, ...] = ()
    #: Watched kernels' benchmark claims seen so far, per (signers, digest) (`Claims`).
    benchmarks: tuple[KeptClaim, ...] = ()
    #: `TrustPolicy.digest()` of the policy the entries read so far were judged by (None:
    #: none); another policy re-judges them from the start (`under_policy`).
    policy_sha256: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "policy_sha256": self.policy_sha256,
            "next_index": self.next_index,
            "checkpoint": self.checkpoint.decode("utf-8") if self.checkpoint else None,
            "releases": [r.to_json() for r in self.releases],
            "weighed": [w.to_json() for w in self.weighed],
            "benchmarks": [k.to_json() for k in self.benchmarks],
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> MonitorState:
        try:
            cp = obj["checkpoint"]
            next_index = obj["next_index"]
            if not isinstance(next_index, int) or next_index < 0:
                raise ValueError("next_index must be a non-negative integer")
            return cls(
                origin=str(obj["origin"]),
                next_index=next_index,
                checkpoint=cp.encode("utf-8") if isinstance(cp, str) else None,
                releases=tuple(Release.from_json(r) for r in obj["releases"]),
                weighed=tuple(Weighed.from_json(w) for w in obj.get("weighed", [])),
                benchmarks=tuple(KeptClaim.from_json(k) for k in obj.get("benchmarks", [])),
                policy_sha256=_policy_digest(obj.get("policy_sha256")),
            )
        except (KeyError, TypeError, ValueError, AttestError) as exc:
            raise InputError(f"monitor state is malformed ({exc}); remove it to start over") from exc


def default_state_path(state: TrustedState, origin: str) -> Path:
    return state.home / "monitor" / f"{origin_slug(origin)}.json"


def load_monitor_state(path: Path, origin: str) -> MonitorState:
    if not path.exists():
        return MonitorState(origin=origin)
    raw = read_capped(path, MAX_MONITOR_STATE_BYTES, "monitor state file")
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise InputError(f"monitor state file {path} is not JSON ({exc})") from exc
    if not isinstance(obj, dict):
        raise InputError(f"monitor state file {path} is not a JSON object")
    st = MonitorState.from_json(obj)
    if st.origin != origin:
        raise InputError(f"monitor state file {path} is for log {st.origin!r}, not {origin!r}")
    return st


def _policy_digest(value: object) -> str | None:
    if value is None or (isinstance(value, str) and re.fullmatch(HEX64_PATTERN, value)):
        return value
    raise ValueError("policy_sha256 must be a sha256 digest or null")


def under_policy(st: MonitorState, policy: TrustPolicy | None) -> tuple[MonitorState, bool]:
    """The state to resume from under `policy`, and whether it starts over: entries already
    read were judged by another policy (or none), so they are read and judged again from
    index 0 (O(entries), with progress; issue 42), and what was gathered from them goes."""
    digest = None if policy is None else policy.digest()
    if st.policy_sha256 == digest:
        return st, False
    return MonitorState(st.origin, 0, st.checkpoint, policy_sha256=digest), st.next_index > 0


def save_monitor_state(path: Path, st: MonitorState) -> None:
    atomic_write(path, json.dumps(st.to_json(), indent=1).encode("utf-8"))


@dataclass(frozen=True)
class MonitorReport:
    """The outcome of one monitor run."""

    origin: str
    start_index: int
    tree_size: int
    entries_checked: int
    findings: tuple[Finding, ...] = field(default=())
    #: Whether the checkpoint's index commitment was compared with the recomputed index.
    index_checked: bool = False
    #: Whether the policy changed since the last pass, so every entry was judged again.
    rejudged: bool = False

    @property
    def violations(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.kind == "violation")

    @property
    def refutations(self) -> tuple[Finding, ...]:
        """Refutations of watched kernels' claims by reproducers the policy trusts."""
        return tuple(f for f in self.findings if f.kind == "refutation")

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "start_index": self.start_index,
            "tree_size": self.tree_size,
            "entries_checked": self.entries_checked,
            "findings": [f.to_json() for f in self.findings],
            "violations": len(self.violations),
            "refutations": len(self.refutations),
            "index_checked": self.index_checked,
            "rejudged": self.rejudged,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> MonitorReport:
        return cls(str(obj["origin"]), int(obj["start_index"]), int(obj["tree_size"]),
                   int(obj["entries_checked"]),
                   tuple(Finding.from_json(f) for f in obj["findings"]),
                   bool(obj.get("index_checked", False)), bool(obj.get("rejudged", False)))


def _check_one(data: bytes) -> VerifiedEntry | str:
    """Decode and verify one entry; the error message instead of raising (for worker pools)."""
    try:
        return check_entry(data)
    except VerificationFailed as exc:
        return str(exc)


def _examine(
    index: int, checked: VerifiedEntry | str, policy: TrustPolicy | None,
    releases: dict[str, Release], ledger: Ledger | None = None,
) -> list[Finding]:
    if isinstance(checked, str):
        return [Finding("violation", index, "?", checked)]
    verified = checked
    stmt = verified.statement
    name = stmt.subjects[0].name
    out: list[Finding] = []
    if policy is not None:
        result = policy.evaluate(verified)
        if not result.allowed:
            out.append(Finding("violation", index, name, f"policy: {result.reason}"))
    if stmt.predicate_type == KERNEL_TYPE:
        version = str(getattr(stmt.predicate, "version", "?"))
        rel = Release(name, version, index, stmt.subjects[0].sha256,
                      tuple(verified.signer_keyids))
        releases[name] = rel
        out.append(Finding("release", index, name,
                           f"{name} {version} sha256:{rel.sha256[:16]}… signed by "
                           + ", ".join(k[:16] for k in rel.keyids)))
    elif stmt.predicate_type == REPRODUCTION_V1 and _watched(name, policy, releases):
        out += _reproduction_findings(index, verified, name, policy,
                                      {} if ledger is None else ledger)
    return out


def _watched(name: str, policy: TrustPolicy | None, releases: dict[str, Release]) -> bool:
    """A kernel released in this log, or one a rule of the policy covers."""
    return name in releases or (policy is not None and any(
        r.covers_kernel([name]) and KERNEL_TYPE in r.predicate_types for r in policy.rules))


def _reproduction_findings(index: int, verified: VerifiedEntry, name: str,
                           policy: TrustPolicy | None, ledger: Ledger) -> list[Finding]:
    """A `reproduction` finding naming its signer and, under a policy, where each claim it
    judges stands against the reproducer quorum (`TrustPolicy.quorum`, as `ktl get`
    weighs it); a `refutation` when this verdict makes the quorum refute a claim."""

    body = verified.statement.predicate
    verdict = str(getattr(body, "verdict", "?"))
    target = getattr(getattr(body, "target", None), "index", "?")
    signers = verified.signer_keyids
    who = policy.signer_phrase(signers) if policy is not None else unknown_signer_phrase(signers)
    said = f"{verdict} (of entry {target}) {who}"
    if policy is None or policy.reproducer(signers) is None:  # a stranger's word never counts
        return [Finding("reproduction", index, name, said)]
    env = getattr(body, "environment", None)
    identity = environment_identity(env.to_json() if env is not None else {})
    out: list[Finding] = []
    notes: list[str] = []
    for claim, leaf in judged_claims(body):
        on = verdict_on(body, claim, leaf)
        if on is None:
            continue
        seen = ledger.setdefault((claim, leaf), [])
        before = policy.quorum(seen).status
        if len(seen) < MAX_WEIGHED_PER_CLAIM:
            seen.append(Reproduction(index, tuple(signers), identity, on))
        after = policy.quorum(seen)
        notes.append(f"entry {claim}: {after.describe()}")
        if after.status == "refuted" and before != "refuted":
            refuted = [c for c in getattr(body, "claims", ()) if c.verdict == "refuted"]
            why = f": {refuted[0].claim}: {refuted[0].reason}"[:600] if refuted else ""
            out.append(Finding("refutation", index, name,
                               f"entry {claim} refuted {who}, the quorum is met ("
                               f"{after.describe()}){why}"))
    detail = f"{said}; " + "; ".join(notes) if notes else said
    return [Finding("reproduction", index, name, detail[:2000]), *out]


def run_monitor(
    sess: Session,
    state_path: Path,
    *,
    policy: TrustPolicy | None = None,
    since: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    jobs: int = 1,
) -> MonitorReport:
    """One monitoring pass up to the log's current checkpoint; see the module docstring.

    `jobs` > 1 verifies entry signatures and statements in that many worker processes.
    """
    if not 1 <= jobs <= 64:
        raise InputError("jobs must be between 1 and 64")
    log, trusted, origin = sess.log, sess.trusted, sess.origin
    st, rejudged = under_policy(load_monitor_state(state_path, origin), policy)
    latest = _trust_latest(sess, st)
    if latest is None:
        return MonitorReport(origin, 0, 0, 0, ())
    cp, note, reader = latest
    size = cp.checkpoint.size
    start = st.next_index if since is None else since
    if start > size and since is None:
        raise refuse(trusted, origin, "rollback", note,
                     f"the monitor already read up to index {start}, but the log's signed "
                     f"checkpoint is now only size {size}")
    if start > size:
        raise InputError(f"--since {start} is beyond the log's size {size}")
    releases = {r.name: r for r in st.releases}
    ledger = _ledger(st.weighed)
    findings: list[Finding] = []
    pool = (ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
            if jobs > 1 and size - start > TILE_WIDTH else None)
    audit = _open_audit(state_path, start)
    try:
        reading = _Reading(log, reader, st, state_path, policy, releases, ledger, findings,
                           pool, jobs, on_progress, audit, _claims(st.benchmarks))
        checked = reading.read(start, size)
        index_checked = audit is not None and audit.size == size and audit.check(
            trusted, origin, cp, note)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        if audit is not None:
            audit.close()
    save_monitor_state(state_path, MonitorState(origin, max(size, st.next_index), note,
                                                tuple(releases.values()), _weighed(ledger),
                                                _kept(reading.claims), st.policy_sha256))
    return MonitorReport(origin, start, size, checked, tuple(findings), index_checked, rejudged)


def _trust_latest(sess: Session, st: MonitorState
                  ) -> tuple[SignedCheckpoint, bytes, TileHashReader] | None:
    """The log's latest checkpoint (and its note), proven consistent first with the one this
    monitor last read, then with the trusted state, by proofs computed from tiles verified
    against its root; and the reader of those tiles. None for an empty log (judged against
    both too)."""
    read_up_to = () if st.checkpoint is None else ((sess.open(st.checkpoint), _MONITOR_WHAT),)
    try:
        note = sess.log.checkpoint()
    except ServerError as exc:
        if exc.code != "empty_log":
            raise
        sess.extend(None, also=read_up_to)
        return None
    cp = sess.open(note)
    size = cp.checkpoint.size
    reader = TileHashReader(size, cp.checkpoint.root_hash, sess.log.tile)

    def prove(old_size: int, new_size: int) -> list[bytes]:
        if new_size != size:
            raise VerificationFailed("consistency proofs are only computed up to the new size")
        try:
            return consistency_proof(old_size, new_size, reader)
        except LedgerError as exc:
            raise VerificationFailed(f"tile: {exc}") from exc

    try:
        sess.extend(cp, also=read_up_to, prove=prove)
    except LedgerError as exc:
        raise VerificationFailed(f"tile: {exc}") from exc
    return cp, note, reader


def _open_audit(state_path: Path, start: int) -> RecomputedIndex | None:
    """The recomputed index, if it holds exactly the entries before `start` (from 0: new)."""
    audit = RecomputedIndex(state_path.with_name(state_path.name + ".vindex.db"))
    if start == 0 and audit.size:
        audit.reset()
    if audit.size == start:
        return audit
    audit.close()
    return None


@dataclass
class _Reading:
    """What one monitoring pass reads entries with: the log and its verified tiles, the
    state they extend, the policy they are weighed by, and where findings, the recomputed
    index and progress go."""

    log: LogAPI
    reader: TileHashReader
    st: MonitorState
    state_path: Path
    policy: TrustPolicy | None
    releases: dict[str, Release]
    ledger: Ledger
    findings: list[Finding]
    pool: ProcessPoolExecutor | None
    jobs: int
    on_progress: Callable[[int, int], None] | None
    audit: RecomputedIndex | None
    claims: Claims = field(default_factory=dict)
    """Benchmark claims read so far per (signers, subject digest), for contradictions."""

    def read(self, start: int, size: int) -> int:
        """Read, check and examine entries [start, size) bundle by bundle; add them to the
        recomputed index; save the position. How many were checked."""
        checked = 0
        pos = start
        while pos < size:
            n = pos // TILE_WIDTH
            lo = n * TILE_WIDTH
            width = min(TILE_WIDTH, size - lo)
            fresh = self._bundle(n, lo, width, pos)
            results = (self.pool.map(_check_one, fresh,
                                     chunksize=max(1, len(fresh) // (2 * self.jobs)))
                       if self.pool is not None else map(_check_one, fresh))
            for i, result in enumerate(results, start=pos):
                self.findings.extend(_examine(i, result, self.policy, self.releases, self.ledger))
                if not isinstance(result, str) and \
                        result.statement.predicate_type == BENCHMARK_V1:
                    self.findings.extend(self._benchmark(i, result))
                checked += 1
            if self.audit is not None:
                self.audit.add(pos, fresh)
            pos = lo + width
            save_monitor_state(self.state_path, MonitorState(
                self.st.origin, pos, self.st.checkpoint, tuple(self.releases.values()),
                _weighed(self.ledger), _kept(self.claims)))
            if self.on_progress is not None:
                self.on_progress(pos - start, size - start)
        return checked

    def _benchmark(self, index: int, verified: VerifiedEntry) -> list[Finding]:
        """A watched kernel's benchmark claim judged by its own evidence (module docstring,
        item 6); its key's earlier claims about the same kernel are kept for the next."""
        stmt = verified.statement
        body, name = stmt.predicate, stmt.subjects[0].name
        if not isinstance(body, BenchmarkPredicate) or \
                not _watched(name, self.policy, self.releases):
            return []
        try:
            samples: bytes | None = self.log.get_blob(body.samples.sha256)
        except ClientError:
            samples = None
        signers, digest = tuple(sorted(verified.signer_keyids)), stmt.subjects[0].sha256
        earlier = self.claims.get((signers, digest), [])
        found = evidence_findings(body, samples, [k.body for k in earlier if k.index != index])
        if len(earlier) < MAX_CLAIMS_KEPT and \
                ((signers, digest) in self.claims or len(self.claims) < MAX_KEYS_KEPT) and \
                all(k.index != index for k in earlier):
            self.claims.setdefault((signers, digest), []).append(
                KeptClaim(index, signers, digest, body))
        out = [Finding("violation", index, name, f"benchmark claim: {f.describe()}"[:2000])
               for f in found]
        if samples is None:
            out.append(Finding("weak", index, name, "benchmark claim: its raw samples sha256:"
                               f"{body.samples.sha256[:16]}… are not in the log's blob store"))
        weak = weaknesses(body)
        if weak:
            out.append(Finding("weak", index, name, "benchmark claim is weak (do not pay on it "
                               "unless a reproduction confirms it): "
                               + "; ".join(w.describe() for w in weak)[:1900]))
        return out

    def _bundle(self, n: int, lo: int, width: int, pos: int) -> list[bytes]:
        """Entries [pos, lo + width) of bundle `n`, each checked against its verified leaf."""
        try:
            bundle = decode_bundle(self.log.tile(entries_path(n, width)), width)
            hashes = self.reader.read_hashes([(0, i) for i in range(pos, lo + width)])
        except LedgerError as exc:
            raise VerificationFailed(f"tile: entry bundle or tile {n} rejected: {exc}") from exc
        fresh = bundle[pos - lo :]
        for i, data in enumerate(fresh, start=pos):
            if leaf_hash(data) != hashes[i - pos]:
                raise VerificationFailed(
                    f"entry bundle {n}: entry {i} does not hash to the leaf in the verified tile"
                )
        return list(fresh)


@dataclass(frozen=True)
class MonitorOptions:
    """`ktl monitor`: where to start (None: resume), the policy, the state file (None: the
    default for the log), worker processes, whether to keep watching (every `interval`
    seconds, at most `passes` passes), and the log."""

    since: int | None = None
    policy_path: Path | None = None
    state_path: Path | None = None
    jobs: int = 1
    follow: bool = False
    interval: float = 30.0
    passes: int | None = None
    log_url: str | None = None
    log_key: str | None = None
    witness_policy_path: Path | None = None


def watch(opts: MonitorOptions, out: Output,
          on_pass: Callable[[MonitorReport, Path], None]) -> int:
    """`ktl monitor`: one pass, or with `follow` a pass every `interval` seconds, each
    reported to `on_pass`; 1 once a pass finds a violation or a refutation, else 0."""
    trusted = TrustedState()
    policy = load_policy(opts.policy_path)
    sess = connect(require_url(opts.log_url), trusted, opts.log_key,
                   witness_policy=load_witness_policy(opts.witness_policy_path))
    out.key_note(sess.key.how, sess.key.describe())
    path = opts.state_path or default_state_path(trusted, sess.origin)
    done = 0
    try:
        while True:
            with out.progress("verifying entries", None) as advance:
                report = run_monitor(sess, path, policy=policy,
                                     since=opts.since if done == 0 else None,
                                     on_progress=advance, jobs=opts.jobs)
            done += 1
            on_pass(report, path)
            if report.violations or report.refutations:
                return 1
            if not opts.follow or (opts.passes is not None and done >= opts.passes):
                return 0
            time.sleep(opts.interval)
    finally:
        sess.close()
