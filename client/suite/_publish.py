"""`ktl suite publish` (and `ktl suite run --publish`): a suite run logged as one claim.

Every problem that was judged (correct or incorrect) is published as `ktl publish` does it,
through `client.publish.run_publish`: its kernel, verification and benchmark entries under
the one key, receipts beside its kernel folder, resumable. A benchmark `ktl publish` would
refuse as weak (`client.publish.evidence_problems`) is left out without `allow_weak` (the row
then has no speed-up). Problems refused here or in error name no entries. Then one signed
`suite/v1` statement names every row (its log indices and the sha256 over their leaf
hashes), the dataset (the subject: the manifest's sha256, the manifest uploaded as its blob),
the solutions' digests and the summary recomputed from the rows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from attest import AttestError
from attest.entry import encode_entry, make_entry
from attest.predicates import (
    MAX_SUITE_ROWS,
    SUITE_STATUSES,
    BenchmarkPredicate,
    SuitePredicate,
    SuiteRow,
    SuiteRunSettings,
    SuiteStatus,
    suite_summary,
)
from attest.statement import make_statement
from client.errors import InputError
from client.publish import (
    Claim,
    KernelRelease,
    PublishOptions,
    Results,
    evidence_problems,
    kernel_claim,
    load_signing_key,
    publish_claims,
    results_from_files,
    run_publish,
)
from client.session import connect, require_url
from client.state import TrustedState
from client.suite._entries import KERNEL_VENDOR, EntryResult, dataset_manifest, kernel_name_of
from client.suite._run import evidence_dir
from client.suite._summary import refusal_kind
from client.witnesses import load_witness_policy

__all__ = ["PublishSettings", "publish_suite", "row_of", "suite_body"]

SUITE_RECEIPTS = ".ktl/receipts"
"""Where the suite statement's receipt goes, in the suite's --out folder."""


@dataclass(frozen=True)
class PublishSettings:
    """Where and as whom a suite is published (the options of `ktl suite publish`)."""

    out: Path
    problems: Path
    key_path: Path
    log_url: str | None
    log_key: str | None = None
    name: str = f"{KERNEL_VENDOR}/suite"
    allow_weak: bool = False
    passphrase_env: str | None = None
    witness_policy_path: Path | None = None


def _evidence(out: Path, result: EntryResult, allow_weak: bool, note: Any) -> Results | None:
    folder = evidence_dir(out, result.key.replace("/", "__"))
    ver = folder / "verification.json"
    if result.status not in ("correct", "incorrect") or not ver.is_file():
        return None
    bench = folder / "benchmark.json"
    samples = folder / "samples.json"
    results = results_from_files(ver, bench if bench.is_file() else None,
                                 samples if samples.is_file() and bench.is_file() else None)
    if results.benchmark is not None and evidence_problems(
            results.benchmark, results.samples, allow_weak, note):
        note.note(f"{result.key}: its benchmark is left out (weak or contradicted by its own "
                  "samples; --allow-weak publishes a weak one)", "bold yellow")
        results = Results(results.verification, None, None)
    return results


def _status(text: str) -> SuiteStatus:
    for status in SUITE_STATUSES:
        if status == text:
            return status
    raise InputError(f"a suite result has status {text[:40]!r}")


def row_of(result: EntryResult, published: dict[str, Any] | None,
           benchmark: dict[str, Any] | None) -> SuiteRow:
    """One problem's row: its outcome and, when published, its entries and logged figures."""
    refused = refusal_kind(result) if result.status == "refused" else None
    if published is None:
        status = _status(result.status) if result.status != "correct" else "error"
        return SuiteRow(key=result.key, status=status,
                        solution_sha256=result.solution_sha256 or None, indices=(),
                        entries_sha256=None, speedup=None, trusted=None, refused=refused)
    entries = sorted(published["entries"], key=lambda e: int(e["index"]))
    leaves = b"".join(bytes.fromhex(e["leaf_hash"]) for e in entries)
    speedup = trusted = None
    if benchmark is not None and result.status == "correct":
        pred = BenchmarkPredicate.from_json(benchmark)
        if pred.results:
            speedup, trusted = pred.results[0].speedup, pred.trusted
    return SuiteRow(key=result.key, status=_status(result.status),
                    solution_sha256=result.solution_sha256 or None,
                    indices=tuple(int(e["index"]) for e in entries),
                    entries_sha256=hashlib.sha256(leaves).hexdigest(),
                    speedup=speedup, trusted=trusted, refused=None)


def _publish_entry(settings: PublishSettings, result: EntryResult, out: Any) -> SuiteRow:
    results = _evidence(settings.out, result, settings.allow_weak, out)
    if results is None:
        if result.status == "correct":
            out.note(f"{result.key}: no check output kept in {settings.out} (an older run?): "
                     "stated as an error, not as correct", "bold yellow")
        return row_of(result, None, None)
    kernel = settings.out / "kernels" / result.key.replace("/", "__")
    name, _archive, _claim = kernel_claim(kernel)
    if name != kernel_name_of(result.key):
        raise InputError(f"{kernel}: its kernel is named {name!r}, not "
                         f"{kernel_name_of(result.key)!r} (imported by an older ktl suite run: "
                         "run the suite again into a fresh --out)")
    report = run_publish(PublishOptions(
        kernel, settings.key_path, settings.passphrase_env, allow_weak=settings.allow_weak,
        log_url=settings.log_url, log_key=settings.log_key,
        witness_policy_path=settings.witness_policy_path, given=results), out)
    bench = results.benchmark.to_json() if results.benchmark is not None else None
    return row_of(result, report, bench)


def suite_body(rows: list[SuiteRow], dataset_sha256: str, run: SuiteRunSettings
               ) -> SuitePredicate:
    return SuitePredicate(dataset_sha256=dataset_sha256, settings=run, rows=tuple(rows),
                          summary=suite_summary(rows, [r.refused for r in rows
                                                       if r.refused is not None]))


def _check_fits(results: list[EntryResult], dataset: str, run: SuiteRunSettings,
                name: str, key: Ed25519PrivateKey) -> None:
    """Refuse, before anything is logged, a run whose statement could not fit one log entry
    (each row at its largest: three indices near 2^53, every digest, a speed-up)."""
    rows = [SuiteRow(key=r.key, status="correct", solution_sha256="f" * 64,
                     indices=(2**53 - 3, 2**53 - 2, 2**53 - 1), entries_sha256="f" * 64,
                     speedup=1.0 / 3.0, trusted=True, refused=None) for r in results]
    rows = [replace(row, indices=tuple(i - 3 * n for i in row.indices))
            for n, row in enumerate(rows)]
    try:
        encode_entry(make_entry(make_statement(name, dataset, suite_body(rows, dataset, run)),
                                [key]))
    except AttestError as exc:
        raise InputError(f"nothing was sent: a suite statement of {len(results)} problems "
                         f"could not be one log entry ({exc}); run and publish each level "
                         "(or a part of one, --shard) into its own --out") from None


def publish_suite(settings: PublishSettings, results: list[EntryResult], run: SuiteRunSettings,
                  out: Any) -> dict[str, Any]:
    """Publish every judged problem, then the signed suite statement; returns a report."""
    if not results:
        raise InputError(f"{settings.out}: no finished entries to publish")
    if len(results) > MAX_SUITE_ROWS:
        raise InputError(f"{len(results)} problems: a suite statement names at most "
                         f"{MAX_SUITE_ROWS}; publish each level from its own --out")
    manifest = dataset_manifest(settings.problems)
    dataset = hashlib.sha256(manifest).hexdigest()
    key = load_signing_key(settings.key_path, settings.passphrase_env)
    _check_fits(results, dataset, run, settings.name, key)
    rows = []
    for n, result in enumerate(results, 1):
        out.note(f"[{n}/{len(results)}] {result.key}: {result.status}", "dim")
        rows.append(_publish_entry(settings, result, out))
    body = suite_body(rows, dataset, run)
    claim = Claim("suite", body)
    sess = connect(require_url(settings.log_url), TrustedState(), settings.log_key,
                   witness_policy=load_witness_policy(settings.witness_policy_path))
    try:
        published = publish_claims(sess, key, KernelRelease(settings.name, manifest, (claim,)),
                                   settings.out / SUITE_RECEIPTS, out.note)
    finally:
        sess.close()
    return {"name": settings.name, "origin": sess.origin, "dataset_sha256": dataset,
            "suite": published[0].to_json(), "summary": body.summary.to_json(),
            "rows": [r.to_json() for r in rows]}

