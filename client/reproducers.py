"""Whose reproductions of a claim count: the logged reproductions of one claim entry, each
with its signer as the reader's policy names it, and whether the policy's quorum is met.

Every reproduction is fetched and verified (proof, signatures) before it is weighed; the
search index only says where to look. A verdict counts for claim entry N only when it
names N by index and leaf hash (or, logged before verdicts named their entry, when its
reproduction's target is N). Reproductions by keys the policy does not name are listed as
"by an unknown key" and never count. The search is capped: an incomplete search never
settles a claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attest.policy import (
    QuorumOutcome,
    Reproduction,
    TrustPolicy,
    environment_identity,
    unknown_signer_phrase,
)
from attest.predicates import REPRODUCTION_V1
from client.session import FetchedEntry, Session, fetch_entry

MAX_REPRODUCTIONS = 64
"""Reproduction entries fetched and verified per claim, at most."""
MAX_ROWS = 2000
SEARCH_PAGE = 100

__all__ = ["ClaimReproductions", "SeenReproduction", "reproductions_of"]


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
    """The reproduction's own verdict on the claim entry: refuted if any of its rows about
    the entry refutes, confirmed if all of them confirm, else inconclusive; None when no
    row is about it."""
    body = entry.verified.statement.predicate
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


def reproductions_of(sess: Session, claim: FetchedEntry, policy: TrustPolicy | None
                     ) -> ClaimReproductions:
    """Find, fetch and verify the reproductions of `claim` (capped) and weigh them."""
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
