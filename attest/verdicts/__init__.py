"""What a benchmark claim's own record decides, before anything is measured (docs/reproducing.md, "Verdicts").

Pure: typed predicates (and the raw samples' bytes) in, typed findings out. One definition of
each rule, used alike by `ktl publish` (refuses), `ktl monitor` and the explorer (flag) and
`ktl reproduce` (refutes without measuring, or says UNSUPPORTED):

- `weaknesses`: what the claim's own record says disturbed or thinned its measurement (steal
  or throttling, other load on its pinned CPU, an interval wider than +-10 %, fewer than 3
  runs). A weak claim is published only with `--allow-weak`, and a reproduction that cannot
  confirm it says UNSUPPORTED: the claimant's burden, never a shield against a refutation.
- `samples_findings`: the claim's figures recomputed from its own raw samples (the blob its
  `samples` names); a figure the samples do not give is a contradiction.
- `floor_findings`: a median below the physical floor (bytes moved / peak bandwidth, FLOPs /
  peak compute) of the claimed hardware (a device in `KNOWN_HARDWARE`; CPU cores, bounded by
  the most any core does), or of the fastest hardware ktl knows where the claimed device is
  unknown: impossible.
- `contradictions`: two claims by one key about one digest and shape whose intervals are
  disjoint: at most one of them can be true.
- `overall_verdict`: the one rule combining per-claim verdicts.

What a claim says about its own conditions is the claimant's word: it can make a claim weak
(so that it cannot be paid on without a confirmation), never hold back a refutation.
"""

from __future__ import annotations

from attest.verdicts._rules import (
    FLOOR_MARGIN,
    HALFWIDTH_WEAK,
    KNOWN_HARDWARE,
    MAX_SAMPLES_BYTES,
    MIN_RUNS,
    NOISE_CAVEATS,
    PINNED_BUSY_WEAK,
    STEAL_WEAK,
    VERDICTS,
    Finding,
    FindingKind,
    Hardware,
    Verdict,
    Weakness,
    WeaknessKind,
    contradictions,
    evidence_findings,
    floor_findings,
    noise_only,
    overall_verdict,
    samples_findings,
    weaknesses,
)

__all__ = [
    "FLOOR_MARGIN",
    "HALFWIDTH_WEAK",
    "KNOWN_HARDWARE",
    "MAX_SAMPLES_BYTES",
    "MIN_RUNS",
    "NOISE_CAVEATS",
    "PINNED_BUSY_WEAK",
    "STEAL_WEAK",
    "VERDICTS",
    "Finding",
    "FindingKind",
    "Hardware",
    "Verdict",
    "Weakness",
    "WeaknessKind",
    "contradictions",
    "evidence_findings",
    "floor_findings",
    "noise_only",
    "overall_verdict",
    "samples_findings",
    "weaknesses",
]
