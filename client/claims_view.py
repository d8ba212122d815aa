"""What a signed statement claims, as rows a person reads (the same view in `publish` and
`get`), and whose reproductions of a claim count.

A benchmark's claims are its speed-ups (with their 95 % intervals) per shape; a
verification's are its checks' outcomes and the overall verdict; a reproduction's are its
verdicts per claim, with the signer who gave them. The views are pure: bodies in, rows out.

`reproductions_of` finds the logged reproductions of one claim entry, each fetched and
verified (proof, signatures) before it is weighed; the search index only says where to
look. A verdict counts for claim entry N only when it names N by index and leaf hash (or,
logged before verdicts named their entry, when its reproduction's target is N).
The reproductions by the keys the reader's policy names are asked for first, by (digest,
key): strangers cannot pad that search, so any number of their entries about the kernel
cannot hide a named reproducer's verdict. Reproductions by other keys are then listed, as
"by an unknown key", up to a cap the output names when it cuts the list off; they never
count. A search of the named keys stopped by its own cap never confirms.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attest.ops import ordered_shape
from attest.policy import (
    QuorumOutcome,
    Reproduction,
    environment_identity,
    unknown_signer_phrase,
)
from attest.predicates import BENCHMARK_V1, REPRODUCTION_V1, VERIFICATION_V1

if TYPE_CHECKING:
    from attest.policy import TrustPolicy
    from client.models import SearchHit
    from client.session import FetchedEntry, Session

__all__ = ["SPEEDUP_MEANING", "ClaimReproductions", "ClaimsView", "SeenReproduction",
           "claims_view", "judged_claims", "reproductions_of", "signer_phrase", "speedup_phrase",
           "verdict_on", "views"]

SPEEDUP_MEANING = ("speed-up = baseline time / kernel time at the same shape: above 1x the "
                   "kernel is faster than the baseline; below 1x it is SLOWER (0.5x takes twice "
                   "as long as the baseline)")
_OUTCOME = {"pass": "pass", "fail": "FAIL", "error": "ERROR", "skip": "not run", "warn": "WARN",
            "inconclusive": "inconclusive"}


@dataclass(frozen=True)
class ClaimsView:
    """A titled table of what one statement claims, and a line saying how to read it."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    legend: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "columns": list(self.columns),
                "rows": [list(r) for r in self.rows], "legend": self.legend}


def signer_phrase(keyids: Iterable[str], policy: TrustPolicy | None) -> str:
    """Who gave a verdict, as the reader's policy names them: `by reproducer 'uni-lab' (key
    9f1e…)`, else `by an unknown key 1a2b…` (no policy: nobody vouches for anyone)."""
    if policy is not None:
        return policy.signer_phrase(keyids)
    return unknown_signer_phrase(keyids)


def speedup_phrase(speedup: float) -> str:
    """`2.10x (faster)`, `0.39x (slower: 2.6x the baseline's time)`."""
    if speedup >= 1.0:
        return f"{speedup:.3g}x (faster than the baseline)"
    if speedup <= 0:
        return f"{speedup:.3g}x"
    return f"{speedup:.3g}x (SLOWER: {1 / speedup:.2g}x the baseline's time)"


def _shape(op: str, shape: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in ordered_shape(op, shape).items())


def _benchmark(body: Mapping[str, Any]) -> ClaimsView:
    op = str(body.get("workload", {}).get("op", ""))
    rows = []
    for r in body.get("results", []):
        lo, hi = r.get("speedup_ci95", [0.0, 0.0])
        runs = r.get("runs")
        rows.append((_shape(op, r.get("shape", {})), speedup_phrase(float(r["speedup"])),
                     f"[{lo:.3g}, {hi:.3g}]", str(len(runs) if runs else 1),
                     f"{float(r.get('median_ns', 0)) / 1e3:.4g} µs vs "
                     f"{float(r.get('baseline_median_ns', 0)) / 1e3:.4g} µs"))
    seed = body.get("workload", {}).get("seed")
    trusted = "trusted" if body.get("trusted", True) else "NOT trusted by its own harness"
    return ClaimsView(f"benchmark of op {op} (seed {seed}; the measurement marks itself "
                      f"{trusted})",
                      ("shape", "speed-up", "95% interval", "runs", "kernel vs baseline median"),
                      tuple(rows), SPEEDUP_MEANING)


def _verification(body: Mapping[str, Any]) -> ClaimsView:
    rows = tuple((str(c["name"]), _OUTCOME.get(str(c["outcome"]), str(c["outcome"])),
                  str(c.get("detail", ""))[:200]) for c in body.get("checks", []))
    verdict = str(body.get("verdict", "")).upper()
    return ClaimsView(f"verification: verdict {verdict} (budget {body.get('budget')}, seed "
                      f"{body.get('seed')})", ("check", "outcome", "evidence"),
                      (*rows, ("verdict", verdict, "")))


def _reproduction(body: Mapping[str, Any], signer: str) -> ClaimsView:
    rows = []
    for c in body.get("claims", []):
        claimed, measured = c.get("claimed", {}), c.get("measured", {})
        rows.append((str(c["claim"]), str(c["verdict"]).upper(), _measure(claimed),
                     _measure(measured), str(c.get("reason", ""))[:300]))
    target = body.get("target", {})
    return ClaimsView(f"reproduction of entry {target.get('index')}: "
                      f"{str(body.get('verdict', '')).upper()} {signer}".rstrip(),
                      ("claim", "verdict", "claimed", "measured", "reason"), tuple(rows),
                      SPEEDUP_MEANING if any(c["claim"].startswith("benchmark")
                                             for c in body.get("claims", [])) else "")


def _measure(m: Mapping[str, Any]) -> str:
    if "speedup" in m:
        lo, hi = m.get("speedup_ci95", [m["speedup"], m["speedup"]])
        return f"{float(m['speedup']):.3g}x [{lo:.3g}, {hi:.3g}]"
    return str(m.get("verdict", ""))


def claims_view(predicate_type: str, body: Mapping[str, Any], signer: str = ""
                ) -> ClaimsView | None:
    """The view of a benchmark, verification or reproduction body (None for other types).

    `signer` (e.g. "by an unknown key 1a2b…") is shown in a reproduction's title."""
    if predicate_type == BENCHMARK_V1:
        return _benchmark(body)
    if predicate_type == VERIFICATION_V1:
        return _verification(body)
    if predicate_type == REPRODUCTION_V1:
        return _reproduction(body, signer)
    return None


def views(claims: Sequence[tuple[str, Mapping[str, Any]]]) -> list[ClaimsView]:
    """The views of several (predicate type, body) pairs, skipping types without one."""
    out = []
    for ptype, body in claims:
        v = claims_view(ptype, body)
        if v is not None:
            out.append(v)
    return out


MAX_REPRODUCTIONS = 64
"""Entries by keys the reader's policy does not name fetched and verified per claim, at
most: past it the list of strangers' reproductions is cut off (and says so)."""
MAX_ROWS = 2000
"""Index rows about the digest read for strangers' reproductions, at most."""
MAX_TRUSTED = 256
"""Entries by the policy's reproducers fetched and verified per claim, at most."""
MAX_CALLS_PER_KEY = 16
"""(digest, key) search calls per named reproducer key, at most (one call looks at a
bounded part of the key's entries and may come back empty with a cursor)."""
SEARCH_PAGE = 100


@dataclass(frozen=True)
class SeenReproduction:
    """One verified reproduction's verdict on the claim entry, and who signed it."""

    index: int
    verdict: str
    signers: tuple[str, ...]
    by: str
    trusted: bool

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "verdict": self.verdict, "signers": list(self.signers),
                "by": self.by, "trusted": self.trusted}


@dataclass(frozen=True)
class ClaimReproductions:
    """The reproductions of one claim entry found, and the quorum outcome under a policy.

    `complete`: every reproduction by the policy's reproducers was read (what the quorum
    rests on). `strangers_complete`: the list of reproductions by other keys was not cut
    off at `MAX_REPRODUCTIONS` (they never count, so a cut there settles nothing)."""

    seen: tuple[SeenReproduction, ...]
    quorum: QuorumOutcome | None
    complete: bool
    strangers_complete: bool = True

    def to_json(self) -> dict[str, Any]:
        q = self.quorum
        return {"reproductions": [s.to_json() for s in self.seen], "complete": self.complete,
                "strangers_complete": self.strangers_complete,
                "strangers_note": self.strangers_note(),
                "independently": None if q is None else {
                    "status": q.status, "needed": q.needed, "confirming": list(q.confirming),
                    "refuting": list(q.refuting), "summary": self.summary()}}

    def strangers_note(self) -> str:
        """What the reader is not shown: '' when the strangers' list is whole."""
        if self.strangers_complete:
            return ""
        return (f"the list of reproductions by unknown keys was CUT OFF after "
                f"{MAX_REPRODUCTIONS} entries: more rows about this kernel were not read "
                "(unknown keys never count)")

    def summary(self) -> str:
        """Where the claim stands under the policy (the strangers' cut: `strangers_note`)."""
        if self.quorum is None:
            return "no reproducer policy given (--policy): no reproduction counts"
        text = self.quorum.describe()
        if not self.complete:
            text += (f"; the search of the named reproducers' entries stopped at its cap "
                     f"({MAX_TRUSTED} entries or {MAX_CALLS_PER_KEY} calls a key), so it "
                     "cannot confirm")
        return text


def verdict_on(body: object, claim_index: int, claim_leaf: str) -> str | None:
    """A reproduction body's own verdict on claim entry (index, leaf hash): refuted if any
    of its rows about the entry refutes, confirmed if all of them confirm, else
    inconclusive; None when no row is about it (rows logged before verdicts named their
    entry are about the reproduction's target)."""
    target = getattr(getattr(body, "target", None), "index", None)
    rows = [c for c in getattr(body, "claims", ())
            if (c.entry is not None and c.entry.index == claim_index
                and c.entry.leaf_hash == claim_leaf)
            or (c.entry is None and target == claim_index)]
    if not rows:
        return None
    verdicts = {c.verdict for c in rows}
    if "refuted" in verdicts:
        return "refuted"
    return "confirmed" if verdicts == {"confirmed"} else "inconclusive"


def judged_claims(body: object) -> list[tuple[int, str]]:
    """The claim entries (index, leaf hash) a reproduction body's rows judge, in order."""
    target = getattr(body, "target", None)
    out: dict[tuple[int, str], None] = {}
    for c in getattr(body, "claims", ()):
        if c.entry is not None:
            out[(c.entry.index, c.entry.leaf_hash)] = None
        elif target is not None:
            out[(target.index, target.leaf_hash)] = None
    return list(out)


class _Weigher:
    """Fetches, verifies and weighs reproduction entries of one claim entry, each once."""

    def __init__(self, sess: Session, claim: FetchedEntry, policy: TrustPolicy | None) -> None:
        self.sess, self.claim, self.policy = sess, claim, policy
        self.leaf = claim.summary()["leaf_hash"]
        self.looked: set[int] = set()
        self.seen: list[SeenReproduction] = []
        self.weighed: list[Reproduction] = []

    def wanted(self, hit: SearchHit) -> bool:
        """A row worth a fetch: a reproduction logged after the claim, not yet looked at."""
        return (hit.predicate_type == REPRODUCTION_V1 and hit.index > self.claim.index
                and hit.index not in self.looked)

    def look(self, index: int) -> None:
        """Fetch and verify entry `index`; keep its verdict if it judges the claim."""

        self.looked.add(index)
        entry = self.sess.fetch_entry(index)
        if entry.verified.statement.predicate_type != REPRODUCTION_V1:
            return
        verdict = verdict_on(entry.verified.statement.predicate, self.claim.index, self.leaf)
        if verdict is None:
            return
        signers = tuple(entry.verified.signer_keyids)  # verified, not the index row's word
        policy = self.policy
        trusted = policy is not None and policy.reproducer(signers) is not None
        by = policy.signer_phrase(signers) if policy is not None else \
            unknown_signer_phrase(signers)
        self.seen.append(SeenReproduction(index, verdict, signers, by, trusted))
        env = getattr(entry.verified.statement.predicate, "environment", None)
        self.weighed.append(Reproduction(index, signers, environment_identity(
            env.to_json() if env is not None else {}), verdict))


def _read_named(w: _Weigher, digest: str, keys: Sequence[str]) -> bool:
    """Each named reproducer key's own entries about `digest` (the server's search by
    digest and key, which strangers cannot pad): O(keys + their entries). False when a
    cap stopped it."""
    fetched = 0
    complete = True
    for key in keys:
        cursor: int | None = None
        for _ in range(MAX_CALLS_PER_KEY):
            page = w.sess.log.search(digest=digest, keyid=key, cursor=cursor, limit=SEARCH_PAGE)
            for hit in page.results:
                if not w.wanted(hit):
                    continue
                if fetched >= MAX_TRUSTED:
                    return False
                fetched += 1
                w.look(hit.index)
            if page.next_cursor is None or (cursor is not None and page.next_cursor <= cursor):
                break
            cursor = page.next_cursor
        else:
            complete = False  # the key signed about countless other things: its cap
    return complete


def _read_strangers(w: _Weigher, digest: str) -> bool:
    """The digest's rows from the first, for reproductions not yet looked at (strangers',
    shown but never counted), capped: False when the cap cut the list off."""
    cursor: int | None = None
    rows = fetched = 0
    while True:
        page = w.sess.log.search(digest=digest, cursor=cursor, limit=SEARCH_PAGE)
        for hit in page.results:
            rows += 1
            if not w.wanted(hit):
                continue
            if fetched >= MAX_REPRODUCTIONS or rows > MAX_ROWS:
                return False
            fetched += 1
            w.look(hit.index)
        if page.next_cursor is None or not page.results or (
                cursor is not None and page.next_cursor <= cursor):
            return True
        if rows >= MAX_ROWS:
            return False
        cursor = page.next_cursor


def _named_keys(policy: TrustPolicy | None) -> list[str]:
    """Every key of the policy's reproducers, sorted (none without a policy)."""
    if policy is None:
        return []
    return sorted({k for r in policy.reproducers for k in r.keyids})


def reproductions_of(sess: Session, claim: FetchedEntry, policy: TrustPolicy | None
                     ) -> ClaimReproductions:
    """Find, fetch and verify the reproductions of `claim` and weigh them.

    First the reproductions signed by each key the policy's reproducers name, asked for by
    (digest, key), so that no number of strangers' entries about the kernel can hide
    them; then the digest's other reproductions (by unknown keys, listed, never counted)
    up to `MAX_REPRODUCTIONS`, where the list says it was cut off."""
    digest = claim.verified.statement.subject_sha256
    w = _Weigher(sess, claim, policy)
    complete = _read_named(w, digest, _named_keys(policy))
    strangers_complete = _read_strangers(w, digest)
    quorum = policy.quorum(w.weighed) if policy is not None else None
    if quorum is not None and not complete and quorum.status == "confirmed":
        # an incomplete search never confirms: a named refutation may be among the unread
        quorum = QuorumOutcome("unsettled", quorum.needed, quorum.confirming, quorum.refuting,
                               quorum.unknown)
    seen = sorted(w.seen, key=lambda s: (not s.trusted, s.index))  # the named first
    return ClaimReproductions(tuple(seen), quorum, complete, strangers_complete)
