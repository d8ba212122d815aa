"""`ktl publish`: sign a kernel's claims, log them, verify what the log answers, keep receipts.

Nothing the log returns is trusted until checked: the checkpoint signature
against the log key, the leaf hash against the bytes we sent, the inclusion
proof against the signed root, and consistency with the trusted checkpoint.
Only then is a receipt written next to the kernel (`KERNEL_DIR/.ktl/receipts/`).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from base64 import b64decode, b64encode
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from attest import AttestError
from attest.entry import decode_entry, encode_entry, make_entry, verify_entry
from attest.keys import keyid, load_private_key
from attest.ops import OP_DIMS
from attest.predicates import (
    BENCHMARK_V1,
    BenchmarkPredicate,
    KernelPredicate,
    Predicate,
    Shape,
    VerificationPredicate,
    parse_predicate,
)
from attest.statement import Statement, make_statement
from attest.verdicts import contradictions, evidence_findings, weaknesses
from client.claims_view import claims_view
from client.errors import InputError, VerificationFailed
from client.output import Output
from client.receipts import write_receipt
from client.session import Session, connect, require_url
from client.state import TrustedState, atomic_write, read_capped
from client.witnesses import load_witness_policy
from ledger.tlog.merkle import leaf_hash
from verifier import (
    DEFAULT_RUNS,
    PUBLISH_MAX_RUNS,
    BenchSettings,
    KernelSpec,
    VerifierError,
    bench_runs,
    pack_kernel,
)
from verifier import check as run_check
from verifier.gpu import probe
from verifier.progress import Progress
from verifier.runtimes import get_runtime

MAX_RESULTS_BYTES = 16 * 1024 * 1024


def receipts_dir(kernel_dir: Path) -> Path:
    return kernel_dir / ".ktl" / "receipts"


@dataclass(frozen=True)
class Claim:
    """One statement to publish: its kind (`kernel`, `verification`, ...) and its typed
    predicate."""

    kind: str
    predicate: Predicate

    @property
    def predicate_type(self) -> str:
        return self.predicate.PREDICATE_TYPE

    @classmethod
    def parse(cls, kind: str, predicate_type: str, body: Any) -> Claim:
        """The claim from the JSON body a tool printed; InputError naming the kind."""
        try:
            return cls(kind, parse_predicate(predicate_type, body))
        except AttestError as exc:
            raise InputError(f"nothing was sent: the {kind} claim is not a valid "
                             f"{predicate_type}: {exc}") from exc


@dataclass(frozen=True)
class Results:
    """What a release claims beside its kernel: the verification `ktl check` gave, the
    benchmark `ktl bench` gave (typed, parsed where they were read), and the raw samples."""

    verification: VerificationPredicate | None
    benchmark: BenchmarkPredicate | None
    samples: bytes | None

    def to_json(self) -> dict[str, Any]:
        return {
            "verification": None if self.verification is None else self.verification.to_json(),
            "benchmark": None if self.benchmark is None else self.benchmark.to_json(),
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
        return cls(_parsed(VerificationPredicate, "verification", ver),
                   _parsed(BenchmarkPredicate, "benchmark", bench), raw)


_P = TypeVar("_P", VerificationPredicate, BenchmarkPredicate)


def _parsed(kind: type[_P], what: str, body: dict[str, Any] | None) -> _P | None:
    """The typed predicate of a results body (None: none given); InputError naming it."""
    if body is None:
        return None
    try:
        return kind.from_json(body)
    except AttestError as exc:
        raise InputError(f"nothing was sent: the {what} claim is not a valid "
                         f"{kind.PREDICATE_TYPE}: {exc}") from exc


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
        return make_statement(name, digest, claim.predicate)
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


def results_mismatches(kernel: KernelPredicate, results: Results, digest: str = ""
                       ) -> list[str]:
    """Every way the results do not belong to the kernel folder (empty: they do).

    The benchmark's op must be the kernel's; every shape (benchmark workload and results,
    every check's inputs) must have exactly the op's dimensions; results that name the
    folder they were measured on (`kernel`: name, version, source_sha256) must name this
    one, at this version, with this source."""
    op = kernel.op
    problems: list[str] = []
    for what, pred in (("verification", results.verification), ("benchmark", results.benchmark)):
        ref = None if pred is None else pred.kernel
        if ref is None:
            continue
        for field, got, want in (("name", ref.name, kernel.name),
                                 ("version", ref.version, kernel.version),
                                 ("source_sha256", ref.source_sha256, digest or None)):
            if want is not None and got != want:
                problems.append(f"the {what} was measured on {field} {got!r}, but "
                                f"the kernel folder's is {want!r}")
    dims = set(OP_DIMS.get(op, ()))
    bench = results.benchmark
    if bench is not None:
        if bench.workload.op != op:
            problems.append(f"the benchmark measured op {bench.workload.op!r}, but the kernel "
                            f"folder's op is {op!r}")
        shapes = [*bench.workload.shapes, *(r.shape for r in bench.results)]
        problems += _shape_problems("benchmark", shapes, dims, op)
    ver = results.verification
    if ver is not None:
        shapes = [s for c in ver.checks for s in (c.inputs.shapes or ())]
        problems += _shape_problems("verification", shapes, dims, op)
    return problems


def _shape_problems(what: str, shapes: Sequence[Shape], dims: set[str], op: str) -> list[str]:
    if not dims:
        return []
    for shape in shapes:
        if set(shape) != dims:
            return [f"the {what} ran shapes with dimensions {sorted(shape)} (e.g. "
                    f"{json.dumps(dict(shape), sort_keys=True)}), not op {op!r}'s {sorted(dims)}"]
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


@dataclass(frozen=True)
class Journal:
    """A publish that has not finished: its signed entries (and their kinds), by `signer`,
    about the archive `subject_sha256`, and the raw samples to upload."""

    subject_sha256: str
    name: str
    signer: str
    kinds: tuple[str, ...]
    entries: tuple[bytes, ...]
    samples: bytes | None

    def to_json(self) -> dict[str, Any]:
        return {"subject_sha256": self.subject_sha256, "name": self.name,
                "signer": self.signer, "kinds": list(self.kinds),
                "entries": [b64encode(e).decode() for e in self.entries],
                "samples": None if self.samples is None else b64encode(self.samples).decode()}

    @classmethod
    def from_json(cls, obj: Any) -> Journal:
        """The journal from its JSON; InputError (naming what is wrong) if it is not one."""
        try:
            kinds, entries, samples = obj["kinds"], obj["entries"], obj["samples"]
            if not (isinstance(kinds, list) and isinstance(entries, list)
                    and len(kinds) == len(entries)
                    and all(isinstance(x, str) for x in (*kinds, *entries))):
                raise InputError("its kinds and entries are not two lists of strings "
                                 "of one length")
            return cls(str(obj["subject_sha256"]), str(obj["name"]), str(obj["signer"]),
                       tuple(kinds), tuple(b64decode(e, validate=True) for e in entries),
                       None if samples is None else b64decode(samples, validate=True))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"not a publish journal ({exc!r})") from exc


def write_journal(receipt_folder: Path, prep: Prepared, signer: str) -> None:
    """Keep the signed entries before the first submission, so a failure between
    submissions resumes with the very same bytes (the log answers duplicate for those
    already logged)."""
    doc = Journal(prep.digest, prep.name, signer, tuple(c.kind for c in prep.claims),
                  prep.entries, prep.samples)
    path = _journal_path(receipt_folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(doc.to_json(), sort_keys=True).encode())


def read_journal(receipt_folder: Path, digest: str, signer: str) -> Journal | None:
    """The unfinished publish of this archive by this signer, if one is pending."""
    path = _journal_path(receipt_folder)
    if not path.is_file():
        return None
    try:
        obj = json.loads(read_capped(path, 4 * MAX_RESULTS_BYTES, "publish journal"))
        if not isinstance(obj, dict) or obj.get("subject_sha256") != digest \
                or obj.get("signer") != signer:
            return None
        return Journal.from_json(obj)
    except (ValueError, InputError) as exc:
        raise InputError(f"{path} is not a publish journal ({exc}); remove it to publish "
                         "afresh") from exc


def resumed(journal: Journal, prep: Prepared | None, name: str, archive: bytes) -> Prepared:
    """The pending publish's entries, checked: equal to `prep`'s when results were given."""
    if prep is not None and prep.entries != journal.entries:
        raise InputError("an unfinished publish of this kernel (same source, same key) is "
                         "pending with other results; rerun without results to finish it, or "
                         "remove .ktl/" + JOURNAL + " to abandon it (what it logged stays "
                         "logged)")
    digest = hashlib.sha256(archive).hexdigest()
    claims = []
    for kind, entry in zip(journal.kinds, journal.entries, strict=True):
        try:
            verified = verify_entry(decode_entry(entry))
        except AttestError as exc:
            raise InputError(f"the pending publish journal holds an unusable entry: {exc}; "
                             f"remove .ktl/{JOURNAL}") from exc
        stmt = verified.statement
        if stmt.subject_sha256 != digest or journal.signer not in verified.signer_keyids:
            raise InputError(f"the pending publish journal holds an entry about another source "
                             f"or by another key; remove .ktl/{JOURNAL}")
        claims.append(Claim(kind, stmt.predicate))
    return Prepared(name, archive, digest, tuple(claims), journal.entries, journal.samples)


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
    try:
        spec = KernelSpec.load(kernel_dir)
        archive = pack_kernel(kernel_dir)
        compiler, version = get_runtime(spec.runtime).compiler()
        predicate = spec.kernel_predicate(compiler, version)
    except (VerifierError, AttestError) as exc:
        raise InputError(f"{kernel_dir}: {exc}") from exc
    return spec.name, archive, Claim("kernel", predicate)


def not_timed_here(kernel: Path) -> str | None:
    """Why the kernel is checked but not benchmarked on this machine (a Triton kernel where no
    GPU runs it: Triton's interpreter gives correctness, not a time), or None."""
    try:
        runtime = KernelSpec.load(kernel).runtime
    except VerifierError:
        return None
    if runtime == "triton" and probe().error is not None:  # with a GPU it is timed there
        return ("runtime 'triton' runs through Triton's interpreter on this machine: ktl check "
                "judges its correctness, ktl bench does not time it, so there is no speed-up "
                "claim to publish")
    return None


def measure(kernel_dir: Path, budget: str, progress: Progress,
            runs: int = DEFAULT_RUNS) -> Results:
    """Run the verification suite and the benchmark now (no --results given): `runs`
    independent runs, and while they disagree as many more at a time, up to
    PUBLISH_MAX_RUNS in all (or `runs`, if more); a kernel not timed here
    (`not_timed_here`) is published with its verification and no benchmark."""
    try:
        progress(f"running `ktl check --budget {budget}` (this can take a while)")
        check = run_check(kernel_dir, budget=budget, seed=None, progress=progress)  # fresh seed
        untimed = not_timed_here(kernel_dir)
        if untimed is not None:
            progress(f"no benchmark: {untimed}")
            return Results(check.to_predicate(), None, None)
        most = max(runs, PUBLISH_MAX_RUNS)
        progress(f"running `ktl bench` ({runs} independent runs; more while they disagree, "
                 f"up to {most})")
        bench = bench_runs(kernel_dir, runs, settings=BenchSettings(until_agree=most),
                           progress=progress)
    except VerifierError as exc:
        raise InputError(f"{kernel_dir}: the verifier could not run: {exc}") from exc
    return Results(check.to_predicate(), bench.to_predicate(), bench.samples_blob())


def load_signing_key(path: Path, passphrase_env: str | None = None,
                     progress: Callable[[str], None] | None = None) -> Ed25519PrivateKey:
    """The publisher's private key; an encrypted one's passphrase is in env var `passphrase_env`.
    A key file other users may read is used, with a warning to `progress` (issue 42 item 7)."""
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
    return Results(_parsed(VerificationPredicate, "verification", bodies[0]),
                   _parsed(BenchmarkPredicate, "benchmark", bodies[1]), raw)


def evidence_problems(pred: BenchmarkPredicate, samples: bytes | None, allow_weak: bool,
                      out: Output) -> list[str]:
    """Why a benchmark claim may not be published (empty: it may), by the rules `ktl
    reproduce`, `ktl monitor` and the explorer apply (`attest.verdicts`): figures its raw
    samples do not give and times below the physical floor are refused; a weak claim (its
    own record says its measurement was disturbed or thin) is said, and refused without
    `allow_weak`."""
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


def _claims_of(kclaim: Claim, archive: bytes, results: Results, out: Output,
               allow_weak: bool = False) -> list[Claim]:
    """The release's claims from the results, refused (one message) if they are not this
    kernel's, or if the benchmark contradicts its own evidence or is weak (without
    `allow_weak`)."""
    assert isinstance(kclaim.predicate, KernelPredicate)
    problems = results_mismatches(kclaim.predicate, results,
                                  hashlib.sha256(archive).hexdigest())
    bench, ver = results.benchmark, results.verification
    if bench is not None:
        if results.samples is not None:
            got = hashlib.sha256(results.samples).hexdigest()
            if bench.samples.sha256 != got:
                problems.append(f"the raw samples (sha256 {got}) are not the ones the benchmark "
                                f"names (sha256 {bench.samples.sha256})")
        if not problems:
            problems += evidence_problems(bench, results.samples, allow_weak, out)
    if problems:
        raise InputError("nothing was sent: the results are not this kernel folder's: "
                         + "; ".join(problems))
    if ver is not None and ver.verdict != "pass":
        out.note("the verification verdict is not 'pass'; publishing it as it is "
                 "(the log records failures too)", "bold yellow")
    if bench is not None and not bench.trusted:
        out.note("the benchmark marks itself untrusted; publishing it with its notes",
                 "bold yellow")
    return [kclaim, *([Claim("verification", ver)] if ver is not None else []),
            *([Claim("benchmark", bench)] if bench is not None else [])]


#: Earlier benchmark entries of the same key about the same kernel a publish compares the
#: new claim with, at most (the newest first).
MAX_EARLIER_CLAIMS = 16


def earlier_contradictions(sess: Session, prep: Prepared, signer: str) -> list[str]:
    """What `attest.verdicts.contradictions` says of the release's benchmark against the
    same key's earlier benchmark claims about the same kernel in the log (each fetched and
    verified; at most MAX_EARLIER_CLAIMS): said before publishing, as `ktl monitor`, the
    explorer and `ktl reproduce` will say it after (both claims are then flagged)."""
    mine = [c.predicate for c in prep.claims if isinstance(c.predicate, BenchmarkPredicate)]
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


@dataclass(frozen=True)
class PublishOptions:
    """`ktl publish`: the kernel folder, the signing key, the results (a `--results` file,
    or the separate outputs, or none: measured now with `budget`), whether a weak benchmark
    may be published, and the log."""

    kernel_dir: Path
    key_path: Path
    passphrase_env: str | None = None
    results_path: Path | None = None
    verification_path: Path | None = None
    benchmark_path: Path | None = None
    samples_path: Path | None = None
    budget: str = "quick"
    runs: int | None = None
    """Benchmark runs when measuring now (None: DEFAULT_RUNS); refused with given results."""
    allow_weak: bool = False
    log_url: str | None = None
    log_key: str | None = None
    witness_policy_path: Path | None = None
    given: Results | None = None
    """Results already read by the caller (`ktl suite publish`), instead of their files."""

    def results(self) -> Results | None:
        """The results given (None: to be measured now); InputError for both kinds at once."""
        separate = (self.verification_path, self.benchmark_path, self.samples_path)
        if self.runs is not None and (self.given is not None or self.results_path is not None
                                      or any(separate)):
            raise InputError("--runs applies to a benchmark measured now, not to given results "
                             "(`ktl bench --runs N` measures them)")
        if self.given is not None:
            if self.results_path is not None or any(separate):
                raise InputError("give the results either read or as files, not both")
            return self.given
        if self.results_path is not None and any(separate):
            raise InputError("give either --results or --verification/--benchmark/--samples")
        if self.results_path is not None:
            return load_results(self.results_path)
        if any(separate):
            return results_from_files(*separate)
        return None


def run_publish(opts: PublishOptions, out: Output, trusted: TrustedState | None = None
                ) -> dict[str, Any]:
    """`ktl publish`: everything from the kernel folder to verified receipts; returns a report.
    A weak benchmark (`evidence_problems`) is published only with `allow_weak`.

    Every statement is built, validated and signed before anything is sent, and kept in a
    journal beside the receipts until all are logged: a failure between submissions
    (network, 503) is resumed by running the same command again."""
    results = opts.results()
    url = require_url(opts.log_url)
    key = load_signing_key(opts.key_path, opts.passphrase_env,
                           progress=lambda text: out.note(text, "bold yellow"))
    signer = keyid(key.public_key())
    folder = receipts_dir(opts.kernel_dir)
    prep = _prepared(opts, results, key, signer, out)
    write_journal(folder, prep, signer)
    sess = connect(url, trusted or TrustedState(), opts.log_key,
                   witness_policy=load_witness_policy(opts.witness_policy_path))
    out.note(f"log {sess.origin}: {sess.key.describe()}")
    try:
        for said in earlier_contradictions(sess, prep, signer):
            out.note(said, "bold yellow")
        published = submit_prepared(sess, prep, folder, out.note)
    finally:
        sess.close()
    _journal_path(folder).unlink(missing_ok=True)
    signed = [v.to_json() for c in prep.claims
              if (v := claims_view(c.predicate_type, c.predicate.to_json())) is not None]
    return {
        "name": prep.name,
        "origin": sess.origin,
        "log_key": sess.key.key,
        "log_key_source": sess.key.how,
        "subject_sha256": prep.digest,
        "signer": signer,
        "entries": [p.to_json() for p in published],
        "signed": signed,
        "receipts": str(folder),
    }


def _prepared(opts: PublishOptions, results: Results | None, key: Ed25519PrivateKey,
              signer: str, out: Output) -> Prepared:
    """The release signed: from the results (measured now if none were given and no publish
    is pending), or the pending publish's entries (which given results must equal)."""
    name, archive, kclaim = kernel_claim(opts.kernel_dir)
    pending = read_journal(receipts_dir(opts.kernel_dir), hashlib.sha256(archive).hexdigest(),
                           signer)
    prep: Prepared | None = None
    if results is not None or pending is None:
        if results is None:
            results = measure(opts.kernel_dir, opts.budget, out.note,
                              DEFAULT_RUNS if opts.runs is None else opts.runs)
        prep = prepare_claims(name, archive,
                              _claims_of(kclaim, archive, results, out, opts.allow_weak), key,
                              results.samples)
    if pending is None:
        assert prep is not None
        return prep
    out.note(f"resuming an unfinished publish of sha256:{pending.subject_sha256[:16]}… "
             "(the same signed entries; those already logged come back as duplicates)",
             "bold yellow")
    return resumed(pending, prep, name, archive)
