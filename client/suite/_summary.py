"""A suite's figures in KernelBench's terms beside ours, and its per-problem CSV.

KernelBench: `correct` is the share of problems whose solution passes the check; `fast_p` the
share that is correct AND faster than the baseline by more than p (speed-up > p), over ALL
problems of the run (a problem without a solution counts against it). Ours beside them:
`trusted` (correct, benchmarked, and the measurement can be trusted; fast_p over trusted
speed-ups only), refused and why (a limit of this machine, by kind), and the static findings.
`merge` joins the results of shards into one run (the same key twice must be the same
result, else it is refused).
"""

from __future__ import annotations

import csv
import io
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from attest.predicates import SUITE_FAST_P, suite_summary
from client.errors import InputError
from client.suite._entries import REFUSALS, EntryResult

__all__ = ["CSV_COLUMNS", "FAST_P", "merge", "refusal_kind", "summarize", "to_csv"]

FAST_P = SUITE_FAST_P
CSV_COLUMNS = ("key", "level", "problem_id", "status", "refusal", "stage", "speedup", "trusted",
               "sizes",
               "failed_checks", "findings", "seconds", "bench_seconds", "reason",
               "solution_sha256")


def refusal_kind(result: EntryResult) -> str:
    """How the summary names the limit a refused entry met: its typed `refusal`; a row written
    before refusals were typed is "not recorded" (its reason is prose, never read for it)."""
    return REFUSALS.get(result.refusal, "not recorded (an older result file)")


def summarize(results: Sequence[EntryResult]) -> dict[str, Any]:
    """The run's summary (see the module doc); per level and over all."""
    out: dict[str, Any] = {"all": _figures(results)}
    for level in sorted({r.level for r in results}):
        out[f"level{level}"] = _figures([r for r in results if r.level == level])
    return out


def _figures(results: Sequence[EntryResult]) -> dict[str, Any]:
    figures = suite_summary(results, [refusal_kind(r) for r in results
                                      if r.status == "refused"]).to_json()
    return {
        **figures,
        "failed_checks": dict(Counter(c for r in results for c in r.failed_checks).most_common(12)),
        "findings": dict(Counter(f for r in results for f in r.findings).most_common(12)),
        "median_seconds": statistics.median(r.seconds for r in results) if results else 0.0,
        # KernelBench's speed target is per stage: import + check, then the bench
        "median_check_seconds": statistics.median(
            round(r.seconds - r.bench_seconds, 1) for r in results) if results else 0.0,
        "median_bench_seconds": statistics.median(benched) if (benched := [
            r.bench_seconds for r in results if r.bench_seconds > 0]) else 0.0,
        "scaled": sum(1 for r in results if r.scaled),
    }


def to_csv(results: Iterable[EntryResult]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(CSV_COLUMNS)
    for r in results:
        row = r.to_json()
        writer.writerow([";".join(row[c]) if isinstance(row[c], list) else
                         "" if row[c] is None else row[c] for c in CSV_COLUMNS])
    return buf.getvalue()


def merge(shards: Sequence[Sequence[EntryResult]]) -> list[EntryResult]:
    """One run from its shards' results, in key order; a key given twice differently is
    refused (two shards of different runs)."""
    by_key: dict[str, EntryResult] = {}
    for shard in shards:
        for r in shard:
            seen = by_key.get(r.key)
            if seen is not None and seen.to_json() != r.to_json():
                raise InputError(f"{r.key}: two shards hold different results for it")
            by_key[r.key] = r
    return [by_key[k] for k in sorted(by_key, key=lambda k: (by_key[k].level,
                                                            by_key[k].problem_id, k))]
