"""Which logged reproductions judged which claim entries, for the explorer's pages (pure).

A reproduction/v1 verdict names the claim entry it judges (`entry`: index and leaf
hash). A verdict counts for claim entry N only when its reproduction's signatures
verify and the leaf hash it names is N's own; verdicts logged before they named their
entry count for their reproduction's target entry. Malformed fields are skipped, never
raised on: the pages render whatever the log holds.

Whose word a verdict is stays visible: the explorer has no reader, so a verdict counts
for the page's headline and badges only when the log's operator names its signer as a
reproducer (`ktl serve --reproducers FILE`); any other verdict is shown as "refuted by
an unknown key 1a2b…", beside, never above, the claim.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from attest.policy import unknown_signer_phrase
from ledger.web._decode import DecodedEntry

VERDICTS = ("confirmed", "refuted", "inconclusive")
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

    @property
    def by(self) -> str:
        """`by reproducer 'uni-lab'` or `by an unknown key 1a2b…`."""
        if self.reproducer is not None:
            return f"by reproducer {self.reproducer!r}"
        return unknown_signer_phrase(self.signers)

    @property
    def summary(self) -> str:
        """`benchmark.speedup[…]: measured 1.11x [1.07, 1.16]; <reason>` (x: the times sign)."""
        parts = [self.claim]
        if self.measured is not None:
            ci = "" if self.measured_ci is None else \
                f" [{self.measured_ci[0]:.3g}, {self.measured_ci[1]:.3g}]"
            claimed = "" if self.claimed is None else f" (claimed {self.claimed:.3g}{TIMES})"
            parts.append(f"measured {self.measured:.3g}{TIMES}{ci}{claimed}")
        text = ": ".join(parts)
        return f"{text}; {self.reason}" if self.reason else text


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
        ))
    return out


def verdicts_by_claim(reproductions: Iterable[tuple[int, DecodedEntry]],
                      leaf_hex: Mapping[int, str | None],
                      names: Mapping[str, str] | None = None) -> dict[int, list[Verdict]]:
    """Every verdict about each claim entry: those of named reproducers first, then by
    verdict (refuted first) and reproduction index."""
    out: dict[int, list[Verdict]] = {}
    for index, d in reproductions:
        for v in verdicts_of(index, d, leaf_hex, names):
            out.setdefault(v.judged, []).append(v)
    order = {"refuted": 0, "inconclusive": 1, "confirmed": 2}
    for rows in out.values():
        rows.sort(key=lambda v: (v.reproducer is None, order[v.verdict], v.reproduction))
    return out


def _worst(seen: set[str]) -> str:
    for word in ("refuted", "confirmed", "inconclusive"):
        if word in seen:
            return word
    return ""


def badge(verdicts: Iterable[Verdict]) -> str:
    """A list row's badge: `refuted` if a named reproducer refutes, else `confirmed` if one
    confirms, else `inconclusive`; with verdicts by unknown keys only, the same words
    followed by "by an unknown key" (shown muted); empty when nothing judged the entry."""
    rows = list(verdicts)
    named = _worst({v.verdict for v in rows if v.reproducer is not None})
    if named:
        return named
    unknown = _worst({v.verdict for v in rows})
    return f"{unknown} by an unknown key" if unknown else ""
