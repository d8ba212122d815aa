"""Gather every entry about one kernel into what the kernel page shows (pure).

Input: the kernel's entries as ``(index, DecodedEntry)``. Output: provenance,
benchmark claims, verifications, reproductions, and one chart row per claim
and reproduction, with refuted claims marked. Malformed fields are skipped,
never raised on: the page must render whatever the log holds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from attest import AttestError
from attest.ops import ordered_shape, shape_key
from attest.policy import TrustPolicy, unknown_signer_phrase
from attest.predicates import VERDICTS, BenchmarkPredicate
from attest.verdicts import evidence_findings, weaknesses
from ledger.web._decode import DecodedEntry
from ledger.web._verdicts import Verdict, latest_per_signer, settled, verdicts_of
from ledger.web.chart import ChartError, ChartRow

_CLAIM = re.compile(r"benchmark\.speedup\[([^\]]*)\]")
#: Claim and verdict rows one kernel page lists, and chart rows it draws, at most: one
#: benchmark with 256 results of one shape and one reproduction with 1,024 verdicts would
#: pair into 262,144 rows (issue 26 row 3).
MAX_PAIRS = 500
MAX_CHART_ROWS = 100


class Claim(NamedTuple):
    """One benchmark result claimed in log entry ``entry``."""

    entry: int
    shape_label: str
    shape: Mapping[str, str]
    speedup: float | None
    ci: tuple[float, float] | None
    median_ns: float | None
    baseline_median_ns: float | None
    #: Key ids that signed the benchmark entry.
    signers: tuple[str, ...] = ()
    #: What its own evidence says against it (`attest.verdicts.evidence_findings`: its raw
    #: samples, the physical floor, its key's other claims on this page), described.
    flags: tuple[str, ...] = ()
    #: What its own record says disturbed or thinned its measurement (`weaknesses`).
    weak: tuple[str, ...] = ()


class Reproduction(NamedTuple):
    """One claim verdict of reproduction entry ``entry`` about claim entry ``target`` (the
    entry the verdict names; for verdicts logged before they named one, the reproduction's
    target)."""

    entry: int
    target: int | None
    claim: str
    verdict: str
    measured: float | None
    measured_ci: tuple[float, float] | None
    reason: str
    signers: tuple[str, ...] = ()
    #: The operator's name for the signer (None: an unknown key; see `_verdicts`).
    reproducer: str | None = None
    #: What makes the reproduction's environment distinct for the quorum.
    environment: tuple[str, ...] = ()
    #: The verdict's reason in one line (`_verdicts.why_line`).
    why: str = ""

    def verdict_row(self) -> Verdict:
        """As `_verdicts` weighs it (quorum, one verdict per signer)."""
        return Verdict(self.entry, self.target if self.target is not None else -1, self.claim,
                       self.verdict, None, self.measured, self.measured_ci, self.reason,
                       self.signers, self.reproducer, self.environment, self.why)

    @property
    def by(self) -> str:
        if self.reproducer is not None:
            return f"by reproducer {self.reproducer!r}"
        return unknown_signer_phrase(self.signers)


class KernelSummary(NamedTuple):
    digest: str
    names: tuple[str, ...]
    provenance: tuple[tuple[int, DecodedEntry], ...]
    benchmarks: tuple[tuple[int, DecodedEntry], ...]
    verifications: tuple[tuple[int, DecodedEntry], ...]
    reproductions: tuple[tuple[int, DecodedEntry], ...]
    others: tuple[tuple[int, DecodedEntry], ...]
    claims: tuple[Claim, ...]
    reproduced: tuple[Reproduction, ...]
    chart_rows: tuple[ChartRow, ...]
    #: Every claim with each reproduction of it (None when not reproduced yet).
    pairs: tuple[tuple[Claim, Reproduction | None], ...]
    #: Per reproduction entry, the claim entries its verdicts judge.
    judged: Mapping[int, tuple[int, ...]] = {}
    #: Claim and verdict rows beyond `MAX_PAIRS` (counted, not listed).
    pairs_dropped: int = 0
    #: The operator's reproducers and quorum (None: one named reproducer settles a claim).
    panel: TrustPolicy | None = None

    @property
    def refuted_count(self) -> int:
        """How many claims (not reproductions, not verdicts) the operator's named
        reproducers refute, at its quorum: the page's headline, which a stranger's key
        cannot write."""
        named: dict[tuple[int, str], list[Reproduction]] = {}
        for c, r in self.pairs:
            if r is not None and r.reproducer is not None:
                named.setdefault((c.entry, c.shape_label), []).append(r)
        if self.panel is None:
            return sum(any(r.verdict == "refuted" for r in rs) for rs in named.values())
        return sum(settled([r.verdict_row() for r in rs], self.panel).status == "refuted"
                   for rs in named.values())

    @property
    def unknown_refuted_count(self) -> int:
        """How many claims only keys the operator does not name refute (shown as such)."""
        named = {(c.entry, c.shape_label) for c, r in self.pairs
                 if r is not None and r.verdict == "refuted" and r.reproducer is not None}
        return len({(c.entry, c.shape_label) for c, r in self.pairs
                    if r is not None and r.verdict == "refuted" and r.reproducer is None}
                   - named)


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def _pair(value: object) -> tuple[float, float] | None:
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    a, b = _num(value[0]), _num(value[1])
    if a is None or b is None or a <= 0 or b <= 0 or a > b:
        return None
    return (a, b)


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def shape_label(shape: Mapping[str, Any]) -> str:
    """``M=256,N=256,K=256`` (keys in their given order: see `ordered_shape`)."""
    return ",".join(f"{k}={v}" for k, v in shape.items())


def parse_claim_shape(claim: str) -> Mapping[str, str] | None:
    """The shape inside ``benchmark.speedup[M=1,N=2]`` as strings, None if another claim."""
    m = _CLAIM.fullmatch(claim)
    if m is None:
        return None
    out: dict[str, str] = {}
    for part in m.group(1).split(","):
        key, sep, val = part.partition("=")
        if not sep:
            return None
        out[key.strip()] = val.strip()
    return out


def _claims_of(index: int, pred: Mapping[str, Any], signers: tuple[str, ...]) -> list[Claim]:
    claims = []
    op = _dict(pred.get("workload")).get("op")
    for res in _list(pred.get("results"))[:256]:
        res = _dict(res)
        # canonical JSON sorts the keys; show them in the op's ABI order (C after R)
        shape = ordered_shape(op if isinstance(op, str) else "", _dict(res.get("shape")))
        claims.append(Claim(
            entry=index,
            shape_label=shape_label(shape),
            shape={str(k): str(v) for k, v in shape.items()},
            speedup=_num(res.get("speedup")),
            ci=_pair(res.get("speedup_ci95")),
            median_ns=_num(res.get("median_ns")),
            baseline_median_ns=_num(res.get("baseline_median_ns")),
            signers=signers,
        ))
    return claims


def _reproductions_of(index: int, d: DecodedEntry, leaf_hex: Mapping[int, str | None],
                      names: Mapping[str, str]) -> list[Reproduction]:
    return [Reproduction(entry=v.reproduction, target=v.judged, claim=v.claim, verdict=v.verdict,
                         measured=v.measured if v.measured and v.measured > 0 else None,
                         measured_ci=_pair(list(v.measured_ci)) if v.measured_ci else None,
                         reason=v.reason, signers=v.signers, reproducer=v.reproducer,
                         environment=v.environment, why=v.why)
            for v in verdicts_of(index, d, leaf_hex, names)]


def _latest_per_signer(reproduced: list[Reproduction]) -> list[Reproduction]:
    """Each signer's newest verdict per claim row (`_verdicts.latest_per_signer`), named
    reproducers first, then the newest first."""
    rows = {r.verdict_row(): r for r in reproduced}
    kept = [rows[v] for v in latest_per_signer(rows)[0]]
    return sorted(kept, key=lambda r: (r.reproducer is None, -r.entry))


def _row(label: str, note: str, claim: Claim, rep: Reproduction | None) -> ChartRow | None:
    if claim.speedup is None or claim.speedup <= 0:
        return None
    reproduced = rep.measured if rep is not None and rep.measured and rep.measured > 0 else None
    verdict = rep.verdict if rep is not None and rep.verdict in VERDICTS else ""
    try:
        return ChartRow(
            label=label,
            claimed=claim.speedup,
            claimed_ci=claim.ci,
            reproduced=reproduced,
            reproduced_ci=rep.measured_ci if rep is not None and reproduced else None,
            verdict=verdict,
            note=note,
        )
    except ChartError:
        return None


def summarize_kernel(digest: str, entries: Iterable[tuple[int, DecodedEntry]],
                     leaf_hex: Mapping[int, str] | None = None,
                     reproducers: Mapping[str, str] | None = None,
                     panel: TrustPolicy | None = None,
                     samples: Mapping[str, bytes] | None = None) -> KernelSummary:
    """Sort a kernel's entries by kind and pair each claim with its reproductions.

    `leaf_hex` (entry index -> leaf hash hex) lets a verdict count only for the claim entry
    whose leaf hash it names; without it the index alone decides. `reproducers` (keyid -> name)
    are the reproducers the log's operator names, `panel` its quorum (see `refuted_count`).
    Each signer's newest verdict on a claim is kept, its older ones dropped. `samples`
    (sha256 hex -> bytes) are the raw samples blobs of benchmark entries the page could
    read: each claim's figures are recomputed from them (`Claim.flags`).
    """
    groups: dict[str, list[tuple[int, DecodedEntry]]] = {
        "kernel": [], "benchmark": [], "verification": [], "reproduction": [], "other": [],
    }
    names: list[str] = []
    for index, d in sorted(entries, key=lambda e: e[0]):
        groups.get(d.kind, groups["other"]).append((index, d))
        for name, sha in d.subjects:
            if sha == digest and name not in names:
                names.append(name)
    claims: list[Claim] = []
    for index, d in groups["benchmark"]:
        claims.extend(_claims_of(index, d.predicate or {}, d.signer_keyids))
    claims = _judged(claims, groups["benchmark"], samples or {})
    known = leaf_hex or {}
    claim_leaves = {i: known.get(i) for i, _ in groups["benchmark"] + groups["verification"]}
    reproduced: list[Reproduction] = []
    judged: dict[int, tuple[int, ...]] = {}
    for index, d in groups["reproduction"]:
        mine = _reproductions_of(index, d, claim_leaves, reproducers or {})
        reproduced.extend(mine)
        judged[index] = tuple(sorted({r.target for r in mine if r.target is not None}))
    reproduced = _latest_per_signer(reproduced)

    pairs, rows, dropped = _pair_claims(claims, reproduced)
    return KernelSummary(
        digest=digest,
        names=tuple(names),
        provenance=tuple(groups["kernel"]),
        benchmarks=tuple(groups["benchmark"]),
        verifications=tuple(groups["verification"]),
        reproductions=tuple(groups["reproduction"]),
        others=tuple(groups["other"]),
        claims=tuple(claims),
        reproduced=tuple(reproduced),
        chart_rows=tuple(rows),
        pairs=tuple(pairs),
        judged=judged,
        pairs_dropped=dropped,
        panel=panel,
    )


def _judged(claims: list[Claim], benchmarks: list[tuple[int, DecodedEntry]],
            samples: Mapping[str, bytes]) -> list[Claim]:
    """`claims` with what each benchmark entry's own evidence and record say
    (`attest.verdicts`, the rules publish, monitor and reproduce apply); an entry attest
    does not parse is left unmarked (its page shows why)."""
    parsed: dict[int, tuple[BenchmarkPredicate, tuple[str, ...]]] = {}
    for index, d in benchmarks:
        try:
            parsed[index] = (BenchmarkPredicate.from_json(d.predicate), tuple(d.signer_keyids))
        except (AttestError, TypeError, ValueError):
            continue
    marks: dict[tuple[int, str], tuple[list[str], list[str]]] = {}
    for index, (body, signers) in parsed.items():
        others = [b for i, (b, s) in parsed.items() if i != index and s == signers]
        found = evidence_findings(body, samples.get(body.samples.sha256), others)
        op = body.workload.op
        for r in body.results:
            key = shape_key(op, r.shape)
            flags = [f.detail for f in found if f.shape in (None, key)]
            weak = [w.detail for w in weaknesses(body, r.shape)]
            marks[(index, shape_label(ordered_shape(op, r.shape)))] = (flags, weak)
    out = []
    for c in claims:
        flags, weak = marks.get((c.entry, c.shape_label), ([], []))
        out.append(c._replace(flags=_bounded(flags), weak=_bounded(weak)))
    return out


MAX_MARKS = 2
"""Flags (and weaknesses) a claim row shows, at most; the rest are counted."""


def _bounded(marks: list[str]) -> tuple[str, ...]:
    """At most MAX_MARKS marks, each at most 300 characters, and how many more there were."""
    shown = [m if len(m) <= 300 else m[:299] + "\u2026" for m in marks[:MAX_MARKS]]
    if len(marks) > MAX_MARKS:
        shown.append(f"and {len(marks) - MAX_MARKS} more")
    return tuple(shown)


def _pair_claims(claims: list[Claim], reproduced: list[Reproduction]
                 ) -> tuple[list[tuple[Claim, Reproduction | None]], list[ChartRow], int]:
    """Each claim with each verdict about it (or None), its chart rows, and how many pairs
    beyond `MAX_PAIRS` were dropped. Verdicts are grouped by (target, shape) once, so the
    pairing costs O(claims + verdicts), not their product."""
    by_claim: dict[tuple[int | None, frozenset[tuple[str, str]]], list[Reproduction]] = {}
    for r in reproduced:
        shape = parse_claim_shape(r.claim)
        if shape is not None:
            by_claim.setdefault((r.target, frozenset(shape.items())), []).append(r)
    rows: list[ChartRow] = []
    pairs: list[tuple[Claim, Reproduction | None]] = []
    dropped = 0
    for claim in claims:
        matching = by_claim.get((claim.entry, frozenset(claim.shape.items())), [])
        base = f"#{claim.entry} {claim.shape_label}"
        wanted: list[tuple[Reproduction | None, str]] = (
            [(rep, f"repro #{rep.entry}") for rep in matching] or [(None, "")])
        room = max(0, MAX_PAIRS - len(pairs))
        dropped += max(0, len(wanted) - room)
        for rep, note in wanted[:room]:
            pairs.append((claim, rep))
            row = _row(base, note, claim, rep) if len(rows) < MAX_CHART_ROWS else None
            if row is not None:
                rows.append(row)
    return pairs, rows, dropped
