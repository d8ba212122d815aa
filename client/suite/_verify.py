"""`ktl suite verify`: a logged suite statement checked against the log, row by row.

Pure parts (bytes in, a typed result or a typed exception out, every size and count bounded):
`read_suite(entry_bytes)` verifies the entry's signature and parses its `suite/v1` statement
(whose summary attest has already recomputed from the rows); `check_rows(claim, named,
sources)` takes the bytes of every entry the rows name (and, when asked, a lookup of the
named kernels' source archives) and says, per row, what does not hold: an index with no
entry, a leaf-hash digest that is not the named one, an entry by another key, about another
problem's kernel, of an unexpected type, figures (status, speed-up, trusted) the logged
statements do not give, or a `solution_sha256` that is not the logged kernel's solution
file (less the scalar adapter `ktl import kernelbench` appends). `verify_suite(sess, index)`
is the one networked part: it fetches the suite entry and each named entry with
`Session.fetch_entry` (inclusion proof and checkpoint signature verified), and each named
kernel's source archive from the log's blob store, and calls the two.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from attest import MAX_ENTRY_BYTES, AttestError
from attest.entry import decode_entry, verify_entry
from attest.predicates import (
    BENCHMARK_V1,
    KERNEL_V1,
    MAX_SUITE_ENTRIES_PER_ROW,
    MAX_SUITE_ROWS,
    SUITE_V1,
    VERIFICATION_V1,
    BenchmarkPredicate,
    SuitePredicate,
    SuiteRow,
    VerificationPredicate,
)
from attest.statement import Statement
from client.errors import InputError, ServerError, VerificationFailed
from client.kernelbench import solution_as_given
from client.session import Session
from client.suite._entries import kernel_name_of
from ledger.tlog.merkle import leaf_hash
from verifier import ArchiveError, KernelSpecError, UnknownOpError, read_kernel_archive

__all__ = ["ROW_FAULTS", "RowProblem", "SuiteClaim", "SuiteRefuted", "SuiteReport",
           "check_rows", "read_suite", "verify_suite"]

RowFault = Literal["missing_entry", "digest_mismatch", "other_signer", "other_problem",
                   "unexpected_type", "unsupported_status", "figure_mismatch",
                   "solution_mismatch"]
ROW_FAULTS: tuple[RowFault, ...] = get_args(RowFault)
_KINDS = {KERNEL_V1: "kernel", VERIFICATION_V1: "verification", BENCHMARK_V1: "benchmark"}


@dataclass(frozen=True)
class RowProblem:
    """One thing a row states that the log does not bear out."""

    key: str
    fault: RowFault
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"key": self.key, "fault": self.fault, "detail": self.detail}


class SuiteRefuted(VerificationFailed):
    """The suite statement names entries the log does not bear out (each row's problems)."""

    def __init__(self, problems: tuple[RowProblem, ...]) -> None:
        self.problems = problems
        shown = "; ".join(f"{p.key}: {p.fault}: {p.detail}" for p in problems[:8])
        more = f" (and {len(problems) - 8} more)" if len(problems) > 8 else ""
        super().__init__(f"the suite statement is not borne out by the log: {shown}{more}")


@dataclass(frozen=True)
class SuiteClaim:
    """A suite/v1 statement whose signature verified."""

    name: str
    dataset_sha256: str
    signers: tuple[str, ...]
    predicate: SuitePredicate


@dataclass(frozen=True)
class SuiteReport:
    """A suite statement verified against the log: every row borne out."""

    claim: SuiteClaim
    checked_entries: int
    solutions_checked: bool = False

    def to_json(self) -> dict[str, Any]:
        body = self.claim.predicate
        return {"name": self.claim.name, "dataset_sha256": self.claim.dataset_sha256,
                "signers": list(self.claim.signers), "rows": len(body.rows),
                "checked_entries": self.checked_entries,
                "solutions_checked": self.solutions_checked, "summary": body.summary.to_json(),
                "settings": body.settings.to_json()}


def _statement(entry_bytes: bytes) -> tuple[Statement, tuple[str, ...]]:
    if len(entry_bytes) > MAX_ENTRY_BYTES:
        raise InputError(f"an entry of {len(entry_bytes)} bytes (at most {MAX_ENTRY_BYTES})")
    try:
        verified = verify_entry(decode_entry(entry_bytes))
    except AttestError as exc:
        raise VerificationFailed(f"the entry does not verify: {exc}") from exc
    return verified.statement, tuple(verified.signer_keyids)


def read_suite(entry_bytes: bytes) -> SuiteClaim:
    """The suite statement of a log entry, its signature verified and its summary recomputed
    from its rows (attest refuses a body whose summary is not); VerificationFailed if not."""
    stmt, signers = _statement(entry_bytes)
    if not isinstance(stmt.predicate, SuitePredicate) or stmt.predicate_type != SUITE_V1:
        raise VerificationFailed(f"the entry is a {stmt.predicate_type}, not a suite statement")
    return SuiteClaim(stmt.subjects[0].name, stmt.subjects[0].sha256, signers, stmt.predicate)


def _logged(row: SuiteRow, named: Mapping[int, bytes], signers: tuple[str, ...]
            ) -> tuple[dict[str, Statement], list[RowProblem], bytes]:
    by_kind: dict[str, Statement] = {}
    problems: list[RowProblem] = []
    leaves = b""

    def said(fault: RowFault, detail: str) -> None:
        problems.append(RowProblem(row.key, fault, detail))

    for index in row.indices:
        data = named.get(index)
        if data is None:
            said("missing_entry", f"entry {index} is not in the log")
            continue
        leaves += leaf_hash(data)
        try:
            stmt, their = _statement(data)
        except (InputError, VerificationFailed) as exc:
            said("unexpected_type", f"entry {index}: {exc}")
            continue
        kind = _KINDS.get(stmt.predicate_type)
        if kind is None or kind in by_kind:
            said("unexpected_type", f"entry {index} is a {stmt.predicate_type} (a row names "
                 "one kernel, at most one verification and one benchmark)")
            continue
        if not set(signers) & set(their):
            said("other_signer", f"entry {index} is signed by another key")
        if stmt.subjects[0].name != kernel_name_of(row.key):
            said("other_problem", f"entry {index} is about {stmt.subjects[0].name!r}, not "
                 f"{kernel_name_of(row.key)!r}")
        by_kind[kind] = stmt
    return by_kind, problems, leaves


def _figures(row: SuiteRow, by_kind: Mapping[str, Statement]) -> list[RowProblem]:
    out: list[RowProblem] = []
    if by_kind and "kernel" not in by_kind:
        out.append(RowProblem(row.key, "unexpected_type", "no kernel entry among those named"))
    if len({s.subjects[0].sha256 for s in by_kind.values()}) > 1:
        out.append(RowProblem(row.key, "other_problem", "the named entries are about "
                              "different kernel sources"))
    ver = by_kind.get("verification")
    verdict = ver.predicate.verdict if ver is not None and isinstance(
        ver.predicate, VerificationPredicate) else None
    if row.status == "correct" and verdict != "pass":
        out.append(RowProblem(row.key, "unsupported_status", "stated correct, but no named "
                              "verification has verdict 'pass'"))
    if row.status != "correct" and verdict == "pass":
        out.append(RowProblem(row.key, "unsupported_status", f"stated {row.status}, but its "
                              "named verification has verdict 'pass'"))
    bench = by_kind.get("benchmark")
    logged: tuple[float | None, bool | None] = (None, None)
    if bench is not None and isinstance(bench.predicate, BenchmarkPredicate) and \
            bench.predicate.results and row.status == "correct":
        logged = (bench.predicate.results[0].speedup, bench.predicate.trusted)
    if (row.speedup, row.trusted) != logged:
        out.append(RowProblem(row.key, "figure_mismatch", f"states speed-up {row.speedup} "
                              f"(trusted {row.trusted}); the named benchmark gives "
                              f"{logged[0]} (trusted {logged[1]})"))
    return out


#: A named kernel's source archive by its sha256 (None: the log does not serve it).
Sources = Callable[[str], bytes | None]


def _solution(row: SuiteRow, by_kind: Mapping[str, Statement], sources: Sources
              ) -> list[RowProblem]:
    """The row's solution_sha256 against the solution file of the kernel it names."""
    kernel = by_kind.get("kernel")
    if row.solution_sha256 is None or kernel is None:
        return []
    digest = kernel.subjects[0].sha256
    archive = sources(digest)

    def fault(detail: str) -> list[RowProblem]:
        return [RowProblem(row.key, "solution_mismatch", detail)]

    if archive is None:
        return fault(f"the log serves no source archive sha256:{digest[:16]}…")
    if hashlib.sha256(archive).hexdigest() != digest:
        return fault(f"the archive served for sha256:{digest[:16]}… has another digest")
    try:
        spec, files = read_kernel_archive(archive)
    except (ArchiveError, KernelSpecError, UnknownOpError) as exc:
        return fault(f"the logged source archive is unusable: {exc}")
    if spec.solution is None:
        return fault(f"the logged kernel (runtime {spec.runtime}) has no solution file")
    given = hashlib.sha256(solution_as_given(files[spec.solution])).hexdigest()
    if given != row.solution_sha256:
        return fault(f"states solution sha256:{row.solution_sha256[:16]}…; the logged "
                     f"kernel's {spec.solution} is sha256:{given[:16]}…")
    return []


def check_rows(claim: SuiteClaim, named: Mapping[int, bytes],
               sources: Sources | None = None) -> int:
    """Check every row against the entries it names (`named`: index -> the entry's bytes as
    the log holds it; an index absent from it is not in the log) and, given `sources`, its
    solution_sha256 against the named kernel's logged solution file. Returns how many
    entries were checked; raises SuiteRefuted naming every row's problems."""
    rows = claim.predicate.rows
    if len(rows) > MAX_SUITE_ROWS or len(named) > MAX_SUITE_ROWS * MAX_SUITE_ENTRIES_PER_ROW:
        raise InputError("more rows or entries than a suite statement may name")
    problems: list[RowProblem] = []
    checked = 0
    for row in rows:
        by_kind, found, leaves = _logged(row, named, claim.signers)
        checked += len(row.indices)
        if row.indices and not any(p.fault == "missing_entry" for p in found) and \
                hashlib.sha256(leaves).hexdigest() != row.entries_sha256:
            found.append(RowProblem(row.key, "digest_mismatch", "the named entries' leaf "
                                    "hashes do not give the row's entries_sha256"))
        problems += found + _figures(row, by_kind)
        if sources is not None:
            problems += _solution(row, by_kind, sources)
    if problems:
        raise SuiteRefuted(tuple(problems))
    return checked


def verify_suite(sess: Session, index: int, solutions: bool = True) -> SuiteReport:
    """Fetch the suite entry at `index` and every entry its rows name (each with its
    inclusion proof) and, with `solutions`, each named kernel's source archive, and check
    them (`read_suite`, `check_rows`). An index at or past the tree size of the suite
    entry's checkpoint is not in the log (named as missing)."""
    fetched = sess.fetch_entry(index)
    claim = read_suite(fetched.entry_bytes)
    size = fetched.checkpoint.checkpoint.size
    named: dict[int, bytes] = {}
    for row in claim.predicate.rows:
        for i in row.indices:
            if i < size and i != index:
                named[i] = sess.fetch_entry(i).entry_bytes

    def source(digest: str) -> bytes | None:
        try:
            return sess.log.get_blob(digest)
        except ServerError as exc:
            if exc.status != 404:
                raise
            return None

    return SuiteReport(claim, check_rows(claim, named, source if solutions else None),
                       solutions)
