"""What a signed statement claims, as rows a person reads: the same view in `publish` and `get`.

A benchmark's claims are its speed-ups (with their 95 % intervals) per shape; a
verification's are its checks' outcomes and the overall verdict; a reproduction's are its
verdicts per claim, with the signer who gave them. Pure: predicate bodies in, rows out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attest.ops import ordered_shape
from attest.policy import unknown_signer_phrase
from attest.predicates import BENCHMARK_V1, REPRODUCTION_V1, VERIFICATION_V1

if TYPE_CHECKING:
    from attest.policy import TrustPolicy

__all__ = ["SPEEDUP_MEANING", "ClaimsView", "claims_view", "signer_phrase", "speedup_phrase",
           "views"]

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
