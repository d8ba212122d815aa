"""`ktl publish`: sign a kernel's claims, log them, verify what the log answers, keep receipts.

Nothing the log returns is trusted until checked: the checkpoint signature
against the log key, the leaf hash against the bytes we sent, the inclusion
proof against the signed root, and consistency with the trusted checkpoint.
Only then is a receipt written next to the kernel (`KERNEL_DIR/.ktl/receipts/`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from attest import AttestError
from attest.entry import encode_entry, make_entry
from attest.ops import OP_DIMS
from attest.predicates import (
    BENCHMARK_V1,
    KERNEL_V1,
    VERIFICATION_V1,
    BenchmarkPredicate,
    parse_predicate,
)
from attest.statement import Statement, make_statement
from attest.verdicts import contradictions, evidence_findings, weaknesses
from client.errors import InputError, VerificationFailed
from client.receipts import write_receipt
from client.state import TrustedState, read_capped
from ledger.tlog.merkle import leaf_hash
from ledger.tlog.witness_policy import WitnessPolicy

if TYPE_CHECKING:
    from client.session import Session
    from verifier.progress import Progress

MAX_RESULTS_BYTES = 16 * 1024 * 1024
KIND_TYPES: Mapping[str, str] = {
    "kernel": KERNEL_V1,
    "verification": VERIFICATION_V1,
    "benchmark": BENCHMARK_V1,
}


def receipts_dir(kernel_dir: Path) -> Path:
    return kernel_dir / ".ktl" / "receipts"


@dataclass(frozen=True)
class Claim:
    """One statement to publish: its kind (`kernel`, `verification`, ...) and predicate body."""

    kind: str
    predicate_type: str
    body: Mapping[str, Any]


@dataclass(frozen=True)
class Results:
    """`--results FILE`: the JSON of `ktl check --json` and `ktl bench --json`, and raw samples."""

    verification: Mapping[str, Any] | None
    benchmark: Mapping[str, Any] | None
    samples: bytes | None

    def to_json(self) -> dict[str, Any]:
        return {
            "verification": self.verification,
            "benchmark": self.benchmark,
            "samples": self.samples.decode("utf-8") if self.samples is not None else None,
        }

    @classmethod
    def from_json(cls, obj: Any, base: Path | None = None) -> Results:
        """Parse a results object; `samples` is inline JSON text or a path relative to `base`."""
        if not isinstance(obj, dict):
            raise InputError("results must be a JSON object with 'verification' and 'benchmark'")
        unknown = set(obj) - {"verification", "benchmark", "samples"}
        if unknown:
            raise InputError(f"results have unknown keys {sorted(unknown)}")
        ver, bench, samples = obj.get("verification"), obj.get("benchmark"), obj.get("samples")
        for key, val in (("verification", ver), ("benchmark", bench)):
            if val is not None and not isinstance(val, dict):
                raise InputError(f"results[{key!r}] must be the JSON object `ktl` printed")
        raw: bytes | None = None
        if isinstance(samples, str) and base is not None and not samples.lstrip().startswith(
            ("[", "{")
        ):
            raw = read_capped((base / samples), MAX_RESULTS_BYTES, "samples file")
        elif isinstance(samples, str):
            raw = samples.encode("utf-8")
        elif samples is not None:
            raw = json.dumps(samples, separators=(",", ":")).encode("utf-8")
        return cls(ver, bench, raw)


def load_results(path: Path) -> Results:
    raw = read_capped(path, MAX_RESULTS_BYTES, "results file")
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise InputError(f"results file {path} is not JSON: {exc}") from exc
    return Results.from_json(obj, path.parent)


def statement_for(name: str, digest: str, claim: Claim) -> Statement:
    """The in-toto statement for one claim about the kernel `name` with source `digest`."""
    try:
        predicate = parse_predicate(claim.predicate_type, dict(claim.body))
        return make_statement(name, digest, predicate)
    except AttestError as exc:
        raise InputError(f"the {claim.kind} claim is not a valid {claim.predicate_type}: {exc}") from exc


@dataclass(frozen=True)
class Published:
    """One entry published and verified, with where its receipt was written."""

    kind: str
    index: int
    leaf_hash: str
    tree_size: int
    duplicate: bool
    entry_path: str
    proof_path: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "index": self.index, "leaf_hash": self.leaf_hash,
                "tree_size": self.tree_size, "duplicate": self.duplicate,
                "entry_path": self.entry_path, "proof_path": self.proof_path}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Published:
        return cls(str(obj["kind"]), int(obj["index"]), str(obj["leaf_hash"]),
                   int(obj["tree_size"]), bool(obj["duplicate"]), str(obj["entry_path"]),
                   str(obj["proof_path"]))


def results_mismatches(kernel: Mapping[str, Any], results: Results, digest: str = ""
                       ) -> list[str]:
    """Every way the results do not belong to the kernel folder (empty: they do).

    The benchmark's op must be the kernel's; every shape (benchmark workload and results,
    every check's inputs) must have exactly the op's dimensions; results that name the
    folder they were measured on (`kernel`: name, version, source_sha256) must name this
    one, at this version, with this source."""
    op = str(kernel.get("op"))
    problems: list[str] = []
    for what, body in (("verification", results.verification), ("benchmark", results.benchmark)):
        ref = body.get("kernel") if body is not None else None
        if not isinstance(ref, dict):
            continue
        for field, want in (("name", kernel.get("name")), ("version", kernel.get("version")),
                            ("source_sha256", digest or None)):
            if want is not None and ref.get(field) != want:
                problems.append(f"the {what} was measured on {field} {ref.get(field)!r}, but "
                                f"the kernel folder's is {want!r}")
    dims = set(OP_DIMS.get(op, ()))
    bench = results.benchmark
    if bench is not None:
        got = bench.get("workload", {}).get("op") if isinstance(bench.get("workload"), dict) \
            else None
        if got != op:
            problems.append(f"the benchmark measured op {got!r}, but the kernel folder's op is "
                            f"{op!r}")
        shapes = [*(bench.get("workload", {}).get("shapes") or [])] if isinstance(
            bench.get("workload"), dict) else []
        shapes += [r.get("shape") for r in bench.get("results", []) if isinstance(r, dict)]
        problems += _shape_problems("benchmark", shapes, dims, op)
    ver = results.verification
    if ver is not None:
        shapes = [s for c in ver.get("checks", []) if isinstance(c, dict)
                  for s in (c.get("inputs", {}) or {}).get("shapes", [])]
        problems += _shape_problems("verification", shapes, dims, op)
    return problems


def _shape_problems(what: str, shapes: list[Any], dims: set[str], op: str) -> list[str]:
    if not dims:
        return []
    for shape in shapes:
        if isinstance(shape, dict) and set(shape) != dims:
            return [f"the {what} ran shapes with dimensions {sorted(shape)} (e.g. "
                    f"{json.dumps(shape, sort_keys=True)}), not op {op!r}'s {sorted(dims)}"]
    return []


@dataclass(frozen=True)
class Prepared:
    """Every statement of a release built, validated and signed before anything is sent."""

    name: str
    archive: bytes
    digest: str
    claims: tuple[Claim, ...]
    entries: tuple[bytes, ...]
    samples: bytes | None


def prepare_claims(name: str, archive: bytes, claims: list[Claim], key: Ed25519PrivateKey,
                   samples: bytes | None = None) -> Prepared:
    """Build, validate and sign every statement; InputError naming every problem, at once."""
    digest = hashlib.sha256(archive).hexdigest()
    entries: list[bytes] = []
    problems: list[str] = []
    for claim in claims:
        try:
            stmt = statement_for(name, digest, claim)
            entries.append(encode_entry(make_entry(stmt, [key])))
        except InputError as exc:
            problems.append(str(exc))
        except AttestError as exc:
            problems.append(f"cannot sign the {claim.kind} statement: {exc}")
    if problems:
        raise InputError("nothing was sent: " + "; ".join(problems))
    return Prepared(name, archive, digest, tuple(claims), tuple(entries), samples)


JOURNAL = "publish-pending.json"
"""Beside the receipts: the signed entries of a publish that has not finished."""


def _journal_path(receipt_folder: Path) -> Path:
    return receipt_folder.parent / JOURNAL


def write_journal(receipt_folder: Path, prep: Prepared, signer: str) -> None:
    """Keep the signed entries before the first submission, so a failure between
    submissions resumes with the very same bytes (the log answers duplicate for those
    already logged)."""
    from base64 import b64encode

    from client.state import atomic_write

    doc = {"subject_sha256": prep.digest, "name": prep.name, "signer": signer,
           "kinds": [c.kind for c in prep.claims],
           "entries": [b64encode(e).decode() for e in prep.entries],
           "samples": None if prep.samples is None else b64encode(prep.samples).decode()}
    path = _journal_path(receipt_folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(doc, sort_keys=True).encode())


def read_journal(receipt_folder: Path, digest: str, signer: str) -> dict[str, Any] | None:
    """The unfinished publish of this archive by this signer, if one is pending."""
    path = _journal_path(receipt_folder)
    if not path.is_file():
        return None
    try:
        doc = json.loads(read_capped(path, 4 * MAX_RESULTS_BYTES, "publish journal"))
    except ValueError as exc:
        raise InputError(f"{path} is not JSON ({exc}); remove it to publish afresh") from exc
    if not isinstance(doc, dict) or doc.get("subject_sha256") != digest \
            or doc.get("signer") != signer:
        return None
    return doc


def resumed(doc: Mapping[str, Any], prep: Prepared | None, name: str, archive: bytes
            ) -> Prepared:
    """The pending publish's entries, checked: equal to `prep`'s when results were given."""
    from base64 import b64decode

    from attest.entry import decode_entry, verify_entry

    entries = tuple(b64decode(e) for e in doc["entries"])
    kinds = list(doc["kinds"])
    if prep is not None and prep.entries != entries:
        raise InputError("an unfinished publish of this kernel (same source, same key) is "
                         "pending with other results; rerun without results to finish it, or "
                         "remove .ktl/" + JOURNAL + " to abandon it (what it logged stays "
                         "logged)")
    claims = []
    for kind, entry in zip(kinds, entries, strict=True):
        try:
            verified = verify_entry(decode_entry(entry))
        except AttestError as exc:
            raise InputError(f"the pending publish journal holds an unusable entry: {exc}; "
                             f"remove .ktl/{JOURNAL}") from exc
        stmt = verified.statement
        if stmt.subject_sha256 != hashlib.sha256(archive).hexdigest() or \
                doc["signer"] not in verified.signer_keyids:
            raise InputError(f"the pending publish journal holds an entry about another source "
                             f"or by another key; remove .ktl/{JOURNAL}")
        claims.append(Claim(kind, stmt.predicate_type, stmt.predicate.to_json()))
    samples = doc.get("samples")
    return Prepared(name, archive, hashlib.sha256(archive).hexdigest(), tuple(claims), entries,
                    None if samples is None else b64decode(samples))


def submit_prepared(sess: Session, prep: Prepared, receipt_folder: Path,
                    progress: Progress | None = None) -> list[Published]:
    """Upload the blobs, then submit and verify each prepared entry, writing receipts."""
    progress = progress or (lambda _line: None)
    progress(f"uploading source archive sha256:{prep.digest[:16]}…")
    if sess.log.put_blob(prep.archive) != prep.digest:
        raise VerificationFailed("the log stored the source archive under another digest")
    if prep.samples is not None:
        progress("uploading raw benchmark samples")
        sess.log.put_blob(prep.samples)
    out: list[Published] = []
    for claim, entry_bytes in zip(prep.claims, prep.entries, strict=True):
        progress(f"submitting the {claim.kind} entry ({len(entry_bytes)} bytes)")
        logged = sess.submit(entry_bytes)
        if logged.duplicate:
            progress(f"the {claim.kind} entry was already logged at index {logged.index} "
                     "(resumed)")
        paths = write_receipt(receipt_folder, claim.kind, entry_bytes, logged.tlog_proof())
        out.append(Published(claim.kind, logged.index, leaf_hash(entry_bytes).hex(),
                             logged.tree_size, logged.duplicate, str(paths.entry),
                             str(paths.proof)))
    return out


@dataclass(frozen=True)
class KernelRelease:
    """What a publish signs: the kernel's name, its canonical source archive, the claims
    about it and the raw benchmark samples they name."""

    name: str
    archive: bytes
    claims: tuple[Claim, ...]
    samples: bytes | None = None


def publish_claims(sess: Session, key: Ed25519PrivateKey, release: KernelRelease,
                   receipt_folder: Path, progress: Progress | None = None) -> list[Published]:
    """Sign and validate every claim first (nothing is sent if one fails), then upload the
    blobs and submit and verify each entry, writing receipts as we go."""
    prep = prepare_claims(release.name, release.archive, list(release.claims), key,
                          release.samples)
    return submit_prepared(sess, prep, receipt_folder, progress)


def kernel_claim(kernel_dir: Path) -> tuple[str, bytes, Claim]:
    """(kernel name, canonical source archive, kernel/v1 claim) for a kernel folder."""
    from verifier import VerifierError
    from verifier.kernel import KernelSpec, pack_kernel
    from verifier.runtimes import get_runtime

    try:
        spec = KernelSpec.load(kernel_dir)
        archive = pack_kernel(kernel_dir)
        compiler, version = get_runtime(spec.runtime).compiler()
        body = spec.kernel_predicate(compiler, version).to_json()
    except (VerifierError, AttestError) as exc:
        raise InputError(f"{kernel_dir}: {exc}") from exc
    return spec.name, archive, Claim("kernel", KERNEL_V1, body)


def not_timed_here(kernel: Path) -> str | None:
    """Why the kernel is checked but not benchmarked on this machine (a Triton kernel where no
    GPU runs it: Triton's interpreter gives correctness, not a time), or None."""
    from verifier import KernelSpec, VerifierError
    from verifier.gpu import probe

    try:
        runtime = KernelSpec.load(kernel).runtime
    except VerifierError:
        return None
    if runtime == "triton" and probe().error is not None:  # with a GPU it is timed there
        return ("runtime 'triton' runs through Triton's interpreter on this machine: ktl check "
                "judges its correctness, ktl bench does not time it, so there is no speed-up "
                "claim to publish")
    return None


def measure(kernel_dir: Path, budget: str, progress: Progress) -> Results:
    """Run the verification suite and the benchmark now (no --results given); a kernel not
    timed here (`not_timed_here`) is published with its verification and no benchmark."""
    from verifier import VerifierError, bench_runs
    from verifier import check as run_check

    try:
        progress(f"running `ktl check --budget {budget}` (this can take a while)")
        check = run_check(kernel_dir, budget=budget, seed=None, progress=progress)  # fresh seed
        untimed = not_timed_here(kernel_dir)
        if untimed is not None:
            progress(f"no benchmark: {untimed}")
            return Results(check.to_predicate().to_json(), None, None)
        progress("running `ktl bench` (independent runs)")
        bench = bench_runs(kernel_dir, progress=progress)
    except VerifierError as exc:
        raise InputError(f"{kernel_dir}: the verifier could not run: {exc}") from exc
    return Results(check.to_predicate().to_json(), bench.to_predicate().to_json(),
                   bench.samples_blob())


def load_signing_key(path: Path, passphrase_env: str | None = None,
                     progress: Callable[[str], None] | None = None) -> Ed25519PrivateKey:
    """The publisher's private key; an encrypted one's passphrase is in env var `passphrase_env`.
    A key file other users may read is used, with a warning to `progress` (issue 42 item 7)."""
    import os
    import stat

    from attest.keys import load_private_key

    passphrase = os.environ.get(passphrase_env) if passphrase_env else None
    if passphrase_env and not passphrase:
        raise InputError(f"environment variable {passphrase_env} is unset or empty")
    if not path.is_file():
        raise InputError(f"key file {path} does not exist (create one with `ktl keygen`)")
    mode = path.stat().st_mode
    if progress is not None and mode & (stat.S_IRGRP | stat.S_IROTH):
        progress(f"the private key {path} is readable by other users (mode "
             f"{stat.S_IMODE(mode):03o}); anyone who reads it can sign as you: chmod 600 {path}")
    try:
        return load_private_key(path, passphrase.encode() if passphrase else None)
    except AttestError as exc:
        raise InputError(f"cannot load the signing key {path}: {exc}") from exc


def results_from_files(
    verification: Path | None, benchmark: Path | None, samples: Path | None
) -> Results:
    """Results from the separate outputs of `ktl check --json`, `ktl bench --json` and
    `ktl bench --samples-out`."""
    bodies: list[dict[str, Any] | None] = []
    for path, what in ((verification, "verification"), (benchmark, "benchmark")):
        if path is None:
            bodies.append(None)
            continue
        try:
            obj = json.loads(read_capped(path, MAX_RESULTS_BYTES, f"{what} file"))
        except ValueError as exc:
            raise InputError(f"{what} file {path} is not JSON: {exc}") from exc
        if not isinstance(obj, dict):
            raise InputError(f"{what} file {path} must hold the JSON object `ktl` printed")
        bodies.append(obj)
    raw = read_capped(samples, MAX_RESULTS_BYTES, "samples file") if samples else None
    return Results(bodies[0], bodies[1], raw)


def evidence_problems(bench: Mapping[str, Any], samples: bytes | None, allow_weak: bool,
                      out: Any) -> list[str]:
    """Why a benchmark claim may not be published (empty: it may), by the rules `ktl
    reproduce`, `ktl monitor` and the explorer apply (`attest.verdicts`): figures its raw
    samples do not give and times below the physical floor are refused; a weak claim (its
    own record says its measurement was disturbed or thin) is said, and refused without
    `allow_weak`. A body attest rejects is left to the statement's own validation."""
    try:
        pred = BenchmarkPredicate.from_json(bench)
    except AttestError:
        return []
    found = evidence_findings(pred, samples)
    problems = [f"the benchmark contradicts its own evidence: {f.describe()}" for f in found]
    if samples is None:
        out.note("no raw samples given (--samples): the benchmark's figures cannot be "
                 "recomputed from them, by you or by anyone reproducing it", "bold yellow")
    weak = weaknesses(pred)
    if weak:
        said = "; ".join(w.describe() for w in weak)
        if not allow_weak:
            problems.append(f"the benchmark is weak: {said} (a reproduction that cannot "
                            "confirm it says UNSUPPORTED; measure again on a quieter machine, "
                            "or publish it as weak with --allow-weak)")
        else:
            out.note(f"publishing a weak benchmark (--allow-weak): {said}", "bold yellow")
    return problems


def _claims_of(kclaim: Claim, archive: bytes, results: Results, out: Any,
               allow_weak: bool = False) -> list[Claim]:
    """The release's claims from the results, refused (one message) if they are not this
    kernel's, or if the benchmark contradicts its own evidence or is weak (without
    `allow_weak`)."""
    problems = results_mismatches(kclaim.body, results,
                                  hashlib.sha256(archive).hexdigest())
    if results.benchmark is not None:
        ref = results.benchmark.get("samples")
        if results.samples is not None and isinstance(ref, dict):
            got = hashlib.sha256(results.samples).hexdigest()
            if ref.get("sha256") != got:
                problems.append(f"the raw samples (sha256 {got}) are not the ones the benchmark "
                                f"names (sha256 {ref.get('sha256')})")
        if not problems:
            problems += evidence_problems(results.benchmark, results.samples, allow_weak, out)
    if problems:
        raise InputError("nothing was sent: the results are not this kernel folder's: "
                         + "; ".join(problems))
    claims = [kclaim]
    if results.verification is not None and results.verification.get("verdict") != "pass":
        out.note("the verification verdict is not 'pass'; publishing it as it is "
                 "(the log records failures too)", "bold yellow")
    if results.benchmark is not None and results.benchmark.get("trusted") is False:
        out.note("the benchmark marks itself untrusted; publishing it with its notes",
                 "bold yellow")
    if results.verification is not None:
        claims.append(Claim("verification", VERIFICATION_V1, results.verification))
    if results.benchmark is not None:
        claims.append(Claim("benchmark", BENCHMARK_V1, results.benchmark))
    return claims


#: Earlier benchmark entries of the same key about the same kernel a publish compares the
#: new claim with, at most (the newest first).
MAX_EARLIER_CLAIMS = 16


def earlier_contradictions(sess: Session, prep: Prepared, signer: str) -> list[str]:
    """What `attest.verdicts.contradictions` says of the release's benchmark against the
    same key's earlier benchmark claims about the same kernel in the log (each fetched and
    verified; at most MAX_EARLIER_CLAIMS): said before publishing, as `ktl monitor`, the
    explorer and `ktl reproduce` will say it after (both claims are then flagged)."""
    mine = [BenchmarkPredicate.from_json(c.body) for c in prep.claims
            if c.predicate_type == BENCHMARK_V1]
    if not mine:
        return []
    page = sess.log.search(digest=prep.digest, keyid=signer, limit=100)
    earlier = [h.index for h in page.results
               if h.predicate_type == BENCHMARK_V1][-MAX_EARLIER_CLAIMS:]
    bodies = []
    for index in earlier:
        verified = sess.fetch_entry(index).verified
        pred = verified.statement.predicate
        if isinstance(pred, BenchmarkPredicate) and signer in verified.signer_keyids:
            bodies.append((index, pred))
    out = []
    for body in mine:
        for index, other in bodies:
            out += [f"this benchmark disagrees with your benchmark claim at entry {index}: "
                    f"{f.describe()} (ktl monitor, the explorer and ktl reproduce will flag "
                    "both)" for f in contradictions(body, [other])]
    return out[:16]


def run_publish(
    kernel_dir: Path,
    key_path: Path,
    results: Results | None,
    budget: str,
    log_url: str | None,
    log_key: str | None,
    trusted: TrustedState,
    out: Any,
    *,
    passphrase_env: str | None = None,
    witness_policy: WitnessPolicy | None = None,
    allow_weak: bool = False,
) -> dict[str, Any]:
    """`ktl publish`: everything from the kernel folder to verified receipts; returns a report.
    A weak benchmark (`evidence_problems`) is published only with `allow_weak`.

    Every statement is built, validated and signed before anything is sent, and kept in a
    journal beside the receipts until all are logged: a failure between submissions
    (network, 503) is resumed by running the same command again."""
    from attest.keys import keyid
    from client.claims_view import claims_view
    from client.session import connect, require_url

    url = require_url(log_url)
    key = load_signing_key(key_path, passphrase_env,
                           progress=lambda text: out.note(text, "bold yellow"))
    signer = keyid(key.public_key())
    name, archive, kclaim = kernel_claim(kernel_dir)
    folder = receipts_dir(kernel_dir)
    pending = read_journal(folder, hashlib.sha256(archive).hexdigest(), signer)
    prep: Prepared | None = None
    if results is not None or pending is None:
        if results is None:
            results = measure(kernel_dir, budget, out.note)
        prep = prepare_claims(name, archive,
                              _claims_of(kclaim, archive, results, out, allow_weak), key,
                              results.samples)
    if pending is not None:
        out.note(f"resuming an unfinished publish of sha256:{pending['subject_sha256'][:16]}… "
                 "(the same signed entries; those already logged come back as duplicates)",
                 "bold yellow")
        prep = resumed(pending, prep, name, archive)
    assert prep is not None
    write_journal(folder, prep, signer)
    sess = connect(url, trusted, log_key, witness_policy=witness_policy)
    out.note(f"log {sess.origin}: {sess.key.describe()}")
    try:
        for said in earlier_contradictions(sess, prep, signer):
            out.note(said, "bold yellow")
        published = submit_prepared(sess, prep, folder, out.note)
    finally:
        sess.close()
    _journal_path(folder).unlink(missing_ok=True)
    signed = [v.to_json() for c in prep.claims
              if (v := claims_view(c.predicate_type, c.body)) is not None]
    return {
        "name": name,
        "origin": sess.origin,
        "log_key": sess.key.key,
        "log_key_source": sess.key.how,
        "subject_sha256": prep.digest,
        "signer": signer,
        "entries": [p.to_json() for p in published],
        "signed": signed,
        "receipts": str(folder),
    }
