"""What a signed statement claims, as rows a person reads (the same view in `publish` and
`get`), and whose reproductions of a claim count.

A benchmark's claims are its speed-ups (with their 95 % intervals) per shape; a
verification's are its checks' outcomes and the overall verdict; a reproduction's are its
verdicts per claim, with the signer who gave them. The views are pure: bodies in, rows out.

`reproductions_of` finds the logged reproductions of one claim entry, each fetched and
verified (proof, signatures) before it is weighed; the search index only says where to
look. A verdict counts for claim entry N only when it names N by index and leaf hash (or,
logged before verdicts named their entry, when its reproduction's target is N).
Reproductions by keys the reader's policy does not name are listed as "by an unknown
key" and never count. The search is capped: an incomplete search never confirms.
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
    from client.session import FetchedEntry, Session

__all__ = ["SPEEDUP_MEANING", "ClaimReproductions", "ClaimsView", "SeenReproduction",
           "claims_view", "judged_claims", "reproductions_of", "signer_phrase", "speedup_phrase",
           "verdict_on", "views"]

SPEEDUP_MEANING = ("speed-up = baseline time / kernel time at the same shape: above 1x the "
                   "kernel is faster than the baseline; below 1x it is SLOWER (0.5x takes twice "
                   "as long as the baseline)")
_OUTCOME = {"pass": "pass", "fail": "FAIL", "error": "ERROR", "skip": "not run"}


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
"""Reproduction entries fetched and verified per claim, at most."""
MAX_ROWS = 2000
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
    """The reproductions of one claim entry found, and the quorum outcome under a policy."""

    seen: tuple[SeenReproduction, ...]
    quorum: QuorumOutcome | None
    complete: bool

    def to_json(self) -> dict[str, Any]:
        q = self.quorum
        return {"reproductions": [s.to_json() for s in self.seen], "complete": self.complete,
                "independently": None if q is None else {
                    "status": q.status if self.complete or q.status != "unsettled" else
                    "unsettled", "needed": q.needed, "confirming": list(q.confirming),
                    "refuting": list(q.refuting), "summary": self.summary()}}

    def summary(self) -> str:
        if self.quorum is None:
            return "no reproducer policy given (--policy): no reproduction counts"
        text = self.quorum.describe()
        if not self.complete:
            text += f"; the search stopped after {MAX_REPRODUCTIONS} reproductions"
        return text


def _verdict_for(entry: FetchedEntry, claim_index: int, claim_leaf: str) -> str | None:
    return verdict_on(entry.verified.statement.predicate, claim_index, claim_leaf)


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


def reproductions_of(sess: Session, claim: FetchedEntry, policy: TrustPolicy | None
                     ) -> ClaimReproductions:
    """Find, fetch and verify the reproductions of `claim` (capped) and weigh them."""
    from client.session import fetch_entry

    digest = claim.verified.statement.subject_sha256
    leaf = claim.summary()["leaf_hash"]
    seen: list[SeenReproduction] = []
    weighed: list[Reproduction] = []
    cursor: int | None = None
    rows = 0
    complete = True
    while True:
        page = sess.log.search(digest=digest, cursor=cursor, limit=SEARCH_PAGE)
        for hit in page.results:
            rows += 1
            if hit.predicate_type != REPRODUCTION_V1 or hit.index <= claim.index:
                continue
            if len(seen) >= MAX_REPRODUCTIONS or rows > MAX_ROWS:
                complete = False
                break
            entry = fetch_entry(sess, hit.index)
            if entry.verified.statement.predicate_type != REPRODUCTION_V1:
                continue
            verdict = _verdict_for(entry, claim.index, leaf)
            if verdict is None:
                continue
            signers = tuple(entry.verified.signer_keyids)
            trusted = policy is not None and policy.reproducer(signers) is not None
            by = policy.signer_phrase(signers) if policy is not None else \
                unknown_signer_phrase(signers)
            seen.append(SeenReproduction(hit.index, verdict, signers, by, trusted))
            env = getattr(entry.verified.statement.predicate, "environment", None)
            weighed.append(Reproduction(hit.index, signers, environment_identity(
                env.to_json() if env is not None else {}), verdict))
        if not complete or page.next_cursor is None or not page.results or (
                cursor is not None and page.next_cursor <= cursor):
            break
        cursor = page.next_cursor
    quorum = policy.quorum(weighed) if policy is not None else None
    if quorum is not None and not complete and quorum.status == "confirmed":
        # an incomplete search never confirms: a refutation may be among the unread rows
        quorum = QuorumOutcome("unsettled", quorum.needed, quorum.confirming, quorum.refuting,
                               quorum.unknown)
    return ClaimReproductions(tuple(seen), quorum, complete)
