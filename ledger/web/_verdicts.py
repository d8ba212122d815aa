"""Which logged reproductions judged which claim entries, for the explorer's pages (pure).

A reproduction/v1 verdict names the claim entry it judges (`entry`: index and leaf
hash). A verdict counts for claim entry N only when its reproduction's signatures
verify and the leaf hash it names is N's own; verdicts logged before they named their
entry count for their reproduction's target entry. Malformed fields are skipped, never
raised on: the pages render whatever the log holds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

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


def verdicts_of(index: int, d: DecodedEntry, leaf_hex: Mapping[int, str | None]
                ) -> list[Verdict]:
    """The verdicts reproduction entry `index` gives, each with the claim entry it judges.

    `leaf_hex` maps claim entry indices to their leaf hashes (hex; None: not checked); a
    verdict naming an index missing from it, or with another leaf hash, is dropped.
    """
    if d.kind != "reproduction" or not d.signatures_verified or not isinstance(d.predicate, dict):
        return []
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
            reason=str(row.get("reason", ""))[:2048], signers=d.signer_keyids,
        ))
    return out


def verdicts_by_claim(reproductions: Iterable[tuple[int, DecodedEntry]],
                      leaf_hex: Mapping[int, str | None]) -> dict[int, list[Verdict]]:
    """Every verdict about each claim entry, refuted first, then by reproduction index."""
    out: dict[int, list[Verdict]] = {}
    for index, d in reproductions:
        for v in verdicts_of(index, d, leaf_hex):
            out.setdefault(v.judged, []).append(v)
    order = {"refuted": 0, "inconclusive": 1, "confirmed": 2}
    for rows in out.values():
        rows.sort(key=lambda v: (order[v.verdict], v.reproduction))
    return out


def badge(verdicts: Iterable[Verdict]) -> str:
    """One word for a list row: `refuted` if any verdict refutes, else `confirmed` if any
    confirms, else `inconclusive`; empty when nothing judged the entry."""
    seen = {v.verdict for v in verdicts}
    for word in ("refuted", "confirmed", "inconclusive"):
        if word in seen:
            return word
    return ""
