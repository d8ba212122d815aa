"""Which logged reproductions judged which claim entries, for the explorer's pages (pure).

A reproduction/v1 verdict names the claim entry it judges (`entry`: index and leaf
hash). A verdict counts for claim entry N only when its reproduction's signatures
verify and the leaf hash it names is N's own; verdicts logged before they named their
entry count for their reproduction's target entry. Malformed fields are skipped, never
raised on: the pages render whatever the log holds.

Whose word a verdict is stays visible: the explorer has no reader, so a verdict counts
for the page's headline and badges only when the log's operator names its signer as a
reproducer (`ktl serve --reproducers FILE`); any other verdict is shown as "refuted by
an unknown key 1a2b…", beside, never above, the claim. A claim is settled on the pages by
the operator's reproducer quorum (`attest.policy.TrustPolicy.quorum`, the rule `ktl get`,
`ktl reproduce` and `ktl monitor` apply to a reader's policy).

One signer's many verdicts on one claim count once: only its newest is kept
(`latest_per_signer`), so a thousand entries by one key weigh what one does; a named
reproducer is one signer whichever of its keys signed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from attest.policy import (
    QuorumOutcome,
    Reproduction,
    TrustPolicy,
    environment_identity,
    unknown_signer_phrase,
)
from attest.predicates import VERDICTS
from ledger.web._decode import DecodedEntry

TIMES = "\u00d7"
#: Verdict rows read per reproduction entry, at most.
MAX_ROWS = 1024


class Verdict(NamedTuple):
    """One verdict of reproduction entry `reproduction` about claim entry `judged`."""

    reproduction: int
    judged: int
    claim: str
    verdict: str
    claimed: float | None
    measured: float | None
    measured_ci: tuple[float, float] | None
    reason: str
    signers: tuple[str, ...]
    #: The operator's name for a signer, when it names one (None: an unknown key).
    reproducer: str | None = None
    #: What makes the reproduction's environment distinct for the quorum.
    environment: tuple[str, ...] = ()
    #: The verdict's reason in one line (`why`; entries without it: the reason's first clause).
    why: str = ""

    @property
    def signer(self) -> tuple[str, ...]:
        """Who gave the verdict, for counting once: the named reproducer, else its keys."""
        return ("reproducer", self.reproducer) if self.reproducer is not None else \
            ("keys", *sorted(self.signers))

    @property
    def by(self) -> str:
        """`by reproducer 'uni-lab'` or `by an unknown key 1a2b…`."""
        if self.reproducer is not None:
            return f"by reproducer {self.reproducer!r}"
        return unknown_signer_phrase(self.signers)

    @property
    def figures(self) -> str:
        """`benchmark.speedup[…]: measured 1.11x [1.07, 1.16] (claimed 3x)` (x: the times sign)."""
        parts = [self.claim]
        if self.measured is not None:
            ci = "" if self.measured_ci is None else \
                f" [{self.measured_ci[0]:.3g}, {self.measured_ci[1]:.3g}]"
            claimed = "" if self.claimed is None else f" (claimed {self.claimed:.3g}{TIMES})"
            parts.append(f"measured {self.measured:.3g}{TIMES}{ci}{claimed}")
        return ": ".join(parts)

    @property
    def brief(self) -> str:
        """`figures` and the verdict's reason in one line (`why`)."""
        return f"{self.figures}; {self.why}" if self.why else self.figures

    @property
    def summary(self) -> str:
        """`figures` and the whole reason."""
        return f"{self.figures}; {self.reason}" if self.reason else self.figures


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def _ci(value: object) -> tuple[float, float] | None:
    if not isinstance(value, list) or len(value) != 2:
        return None
    lo, hi = _num(value[0]), _num(value[1])
    return None if lo is None or hi is None or lo > hi else (lo, hi)


def _index(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def reproducer_name(signers: Iterable[str], names: Mapping[str, str]) -> str | None:
    """The operator's name for the first signer it names (keyid order), else None."""
    return next((names[k] for k in sorted(signers) if k in names), None)


MAX_WHY = 240


def why_line(row: Mapping[str, Any]) -> str:
    """A verdict row's reason in one line: its `why`, or for rows logged before it existed
    the reason's first clause (at most MAX_WHY characters either way)."""
    why = row.get("why")
    text = why if isinstance(why, str) and why.strip() else str(row.get("reason", "")).split("; ")[0]
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_WHY else flat[:MAX_WHY - 1] + "\u2026"


MAX_JUDGED = 1024


def judged_indices(d: DecodedEntry) -> list[int]:
    """The claim entries a reproduction entry's verdict rows name (its target for rows
    logged before they named one), at most MAX_JUDGED; none when its signatures fail."""
    if d.kind != "reproduction" or not d.signatures_verified or not isinstance(d.predicate, dict):
        return []
    target = _index(_dict(d.predicate.get("target")).get("index"))
    claims = d.predicate.get("claims")
    out: list[int] = []
    for row in claims[:MAX_ROWS] if isinstance(claims, list) else []:
        named = _dict(_dict(row).get("entry"))
        judged = _index(named.get("index")) if named else target
        if judged is not None:
            out.append(judged)
    return list(dict.fromkeys(out))[:MAX_JUDGED]


def refuted_counts(verdicts: Mapping[int, Iterable[Verdict]], panel: TrustPolicy | None
                   ) -> tuple[int, int]:
    """(claims the operator's named reproducers refute at its quorum — any one of them when
    `panel` is None —, claims only unknown keys refute), each claim a (claim entry, claim
    row) pair."""
    rows: dict[tuple[int, str], list[Verdict]] = {}
    for judged, vs in verdicts.items():
        for v in vs:
            rows.setdefault((judged, v.claim), []).append(v)
    named = unknown = 0
    for vs in rows.values():
        mine = [v for v in vs if v.reproducer is not None]
        if mine and (settled(mine, panel).status == "refuted" if panel is not None
                     else any(v.verdict == "refuted" for v in mine)):
            named += 1
        elif any(v.verdict == "refuted" for v in vs if v.reproducer is None):
            unknown += 1
    return named, unknown


def verdicts_of(index: int, d: DecodedEntry, leaf_hex: Mapping[int, str | None],
                names: Mapping[str, str] | None = None) -> list[Verdict]:
    """The verdicts reproduction entry `index` gives, each with the claim entry it judges.

    `leaf_hex` maps claim entry indices to their leaf hashes (hex; None: not checked); a
    verdict naming an index missing from it, or with another leaf hash, is dropped.
    `names` (keyid -> name) are the reproducers the log's operator names.
    """
    if d.kind != "reproduction" or not d.signatures_verified or not isinstance(d.predicate, dict):
        return []
    who = reproducer_name(d.signer_keyids, names or {})
    env = environment_identity(d.predicate.get("environment"))
    target = _index(_dict(d.predicate.get("target")).get("index"))
    claims = d.predicate.get("claims")
    out: list[Verdict] = []
    for row in claims[:MAX_ROWS] if isinstance(claims, list) else []:
        row = _dict(row)
        named = _dict(row.get("entry"))
        judged = _index(named.get("index")) if named else target
        if judged is None or judged not in leaf_hex:
            continue
        if named and leaf_hex[judged] is not None and named.get("leaf_hash") != leaf_hex[judged]:
            continue
        verdict = row.get("verdict")
        if verdict not in VERDICTS:
            continue
        claimed, measured = _dict(row.get("claimed")), _dict(row.get("measured"))
        out.append(Verdict(
            reproduction=index, judged=judged, claim=str(row.get("claim", ""))[:256],
            verdict=str(verdict), claimed=_num(claimed.get("speedup")),
            measured=_num(measured.get("speedup")), measured_ci=_ci(measured.get("speedup_ci95")),
            reason=str(row.get("reason", ""))[:2048], signers=d.signer_keyids, reproducer=who,
            environment=env, why=why_line(row),
        ))
    return out


def latest_per_signer(verdicts: Iterable[Verdict]) -> tuple[list[Verdict], int]:
    """The newest verdict of each signer per claim (claim entry and claim row), and how many
    older ones by the same signers were left out."""
    newest: dict[tuple[object, ...], Verdict] = {}
    seen = 0
    for v in verdicts:
        seen += 1
        key = (v.judged, v.claim, v.signer)
        if key not in newest or v.reproduction > newest[key].reproduction:
            newest[key] = v
    return list(newest.values()), seen - len(newest)


def verdicts_by_claim(reproductions: Iterable[tuple[int, DecodedEntry]],
                      leaf_hex: Mapping[int, str | None],
                      names: Mapping[str, str] | None = None) -> dict[int, list[Verdict]]:
    """The verdicts about each claim entry, each signer's newest only: those of named
    reproducers first, then the newest first."""
    out: dict[int, list[Verdict]] = {}
    every = (v for index, d in reproductions for v in verdicts_of(index, d, leaf_hex, names))
    for v in latest_per_signer(every)[0]:
        out.setdefault(v.judged, []).append(v)
    for rows in out.values():
        rows.sort(key=lambda v: (v.reproducer is None, -v.reproduction))
    return out


def settled(verdicts: Iterable[Verdict], panel: TrustPolicy) -> QuorumOutcome:
    """Whether the operator's named reproducers settle a claim: `TrustPolicy.quorum` over
    the verdicts (unknown keys never count)."""
    return panel.quorum(Reproduction(v.reproduction, v.signers, v.environment, v.verdict)
                        for v in verdicts)


def _worst(seen: set[str]) -> str:
    for word in ("refuted", "confirmed", "unsupported", "inconclusive"):
        if word in seen:
            return word
    return ""


def badge(verdicts: Iterable[Verdict], panel: TrustPolicy | None = None) -> str:
    """A list row's badge: `refuted` or `confirmed` once the operator's reproducer quorum
    settles the claim (`panel`; none given: one named reproducer settles it), else
    `inconclusive` when named reproducers judged it; with verdicts by unknown keys only,
    the worst word followed by "by an unknown key" (shown muted); empty when nothing
    judged the entry."""
    rows = list(verdicts)
    named = [v for v in rows if v.reproducer is not None]
    if named:
        if panel is None:
            return _worst({v.verdict for v in named})
        status = settled(named, panel).status
        if status in ("refuted", "confirmed"):
            return status
        return "unsupported" if any(v.verdict == "unsupported" for v in named) else "inconclusive"
    unknown = _worst({v.verdict for v in rows})
    return f"{unknown} by an unknown key" if unknown else ""
