"""Receipts: the logged entry plus a `c2sp.org/tlog-proof@v1` file, verified fully offline.

A receipt for the entry of kind K (kernel, verification, benchmark, reproduction) logged
at index N is two files side by side: `K-N.entry.json` (the entry's canonical RFC 8785
bytes, exactly what the log hashed) and `K-N.tlog-proof` (index, inclusion proof, signed
checkpoint). They are never overwritten; `K.entry.json` and `K.tlog-proof` link to the
latest receipt of kind K.
`verify_receipt` checks, in order and each with its own message: the checkpoint
signature, the inclusion proof of the entry bytes, the envelope signature and
statement, the trust policy, and the subject digest against the given source.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from attest import AttestError
from attest.entry import VerifiedEntry
from attest.policy import TrustPolicy
from attest.predicates import BENCHMARK_V1, REPRODUCTION_V1, VERIFICATION_V1
from client.claims_view import (
    ClaimReproductions,
    ClaimsView,
    claims_view,
    reproductions_of,
    signer_phrase,
)
from client.errors import InputError, NetworkError, VerificationFailed
from client.session import FetchedEntry, connect, require_url
from client.state import TrustedState, atomic_write, read_capped
from client.trust import check_entry, check_inclusion, load_verifier, open_signed
from client.witnesses import load_witness_policy, quorum_result
from ledger import LedgerError
from ledger.tlog.checkpoint import SignedCheckpoint
from ledger.tlog.cosignature import CosignatureVerifier, verify_cosignatures
from ledger.tlog.note import NoteVerifier
from ledger.tlog.proof_bundle import TlogProof
from ledger.tlog.witness_policy import WitnessPolicy
from verifier import VerifierError
from verifier.kernel import pack_kernel

MAX_PROOF_FILE_BYTES = 64 * 1024
MAX_ENTRY_FILE_BYTES = 65535
MAX_SOURCE_FILE_BYTES = 256 * 1024 * 1024
PROOF_SUFFIX = ".tlog-proof"
ENTRY_SUFFIX = ".entry.json"


@dataclass(frozen=True)
class ReceiptPaths:
    entry: Path
    proof: Path


def receipt_paths(folder: Path, kind: str) -> ReceiptPaths:
    return ReceiptPaths(folder / f"{kind}{ENTRY_SUFFIX}", folder / f"{kind}{PROOF_SUFFIX}")


def entry_path_for(proof_path: Path) -> Path:
    """`X.tlog-proof` -> `X.entry.json`, the default place of a receipt's entry."""
    name = proof_path.name
    stem = name[: -len(PROOF_SUFFIX)] if name.endswith(PROOF_SUFFIX) else name
    return proof_path.with_name(stem + ENTRY_SUFFIX)


def write_receipt(folder: Path, kind: str, entry_bytes: bytes, proof: TlogProof) -> ReceiptPaths:
    """Write `<kind>-<index>.entry.json` and `.tlog-proof` into `folder`; link `<kind>.*` to them.

    A receipt already there is never replaced: the same entry keeps its first receipt, and
    other bytes under the same name (a receipt from another log) are an `InputError` that
    leaves both files as they are. A `<kind>.*` pair written by an older `ktl` as plain files
    is first renamed to its own `<kind>-<index>.*` names.
    """
    latest = receipt_paths(folder, kind)
    _keep_legacy(latest, kind)
    paths = receipt_paths(folder, f"{kind}-{proof.index}")
    if paths.entry.exists():
        if read_capped(paths.entry, MAX_ENTRY_FILE_BYTES, "receipt entry") != entry_bytes:
            raise InputError(f"{paths.entry} already holds another entry (a receipt from another "
                             "log?); it is kept: write these receipts to another folder")
    else:
        atomic_write(paths.proof, proof.to_text().encode("utf-8"))
        atomic_write(paths.entry, entry_bytes)
    _link(latest.entry, paths.entry)
    _link(latest.proof, paths.proof)
    return paths


def _keep_legacy(latest: ReceiptPaths, kind: str) -> None:
    """Rename a plain-file `<kind>.*` receipt (no index in its name) to `<kind>-<index>.*`."""
    if latest.proof.is_symlink() or not latest.proof.is_file():
        return
    index = parse_proof(read_capped(latest.proof, MAX_PROOF_FILE_BYTES, "receipt")).index
    target = receipt_paths(latest.proof.parent, f"{kind}-{index}")
    for old, new in ((latest.proof, target.proof), (latest.entry, target.entry)):
        if old.is_file() and not old.is_symlink() and not new.exists():
            old.rename(new)


def _link(link: Path, target: Path) -> None:
    """Point `link` at `target` (a relative symlink, replaced atomically; a copy where the
    filesystem has no symlinks)."""
    tmp = link.with_name(f".{link.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        tmp.symlink_to(target.name)
        tmp.replace(link)
    except OSError:
        tmp.unlink(missing_ok=True)
        atomic_write(link, target.read_bytes())


def parse_proof(data: bytes) -> TlogProof:
    """Parse a tlog-proof file's bytes, or say why it is not one."""
    try:
        return TlogProof.from_text(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise VerificationFailed(f"receipt: the tlog-proof file is not UTF-8 ({exc})") from exc
    except LedgerError as exc:
        raise VerificationFailed(f"receipt: the tlog-proof file is malformed: {exc}") from exc


def source_digest(path: Path) -> str:
    """sha256 hex of a source file, or of the canonical archive of a kernel folder."""
    if path.is_dir():
        try:
            return hashlib.sha256(pack_kernel(path)).hexdigest()
        except VerifierError as exc:
            raise InputError(f"cannot pack the kernel folder {path}: {exc}") from exc
    return hashlib.sha256(read_capped(path, MAX_SOURCE_FILE_BYTES, "source file")).hexdigest()


@dataclass(frozen=True)
class ReceiptReport:
    """What an offline receipt verification established."""

    origin: str
    index: int
    tree_size: int
    root_hash: str
    leaf_hash: str
    subject_name: str
    subject_sha256: str
    predicate_type: str
    signer_keyids: tuple[str, ...]
    policy: str | None = None
    source: str | None = None
    consistent_with: int | None = None
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "index": self.index,
            "tree_size": self.tree_size,
            "root_hash": self.root_hash,
            "leaf_hash": self.leaf_hash,
            "subject_name": self.subject_name,
            "subject_sha256": self.subject_sha256,
            "predicate_type": self.predicate_type,
            "signer_keyids": list(self.signer_keyids),
            "policy": self.policy,
            "source": self.source,
            "consistent_with": self.consistent_with,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ReceiptReport:
        return cls(
            origin=obj["origin"], index=obj["index"], tree_size=obj["tree_size"],
            root_hash=obj["root_hash"], leaf_hash=obj["leaf_hash"],
            subject_name=obj["subject_name"], subject_sha256=obj["subject_sha256"],
            predicate_type=obj["predicate_type"], signer_keyids=tuple(obj["signer_keyids"]),
            policy=obj["policy"], source=obj["source"], consistent_with=obj["consistent_with"],
            notes=tuple(obj["notes"]),
        )


def check_policy(verified: VerifiedEntry, policy: TrustPolicy) -> str:
    result = policy.evaluate(verified)
    if not result.allowed:
        raise VerificationFailed(f"policy: entry not allowed by the trust policy: {result.reason}")
    return f"allowed by rule {result.rule}" if result.rule else result.reason


def load_witnesses(key_strings: Sequence[str]) -> list[CosignatureVerifier]:
    """Parse witness cosignature/v1 verifier keys (`name+keyid+base64`)."""
    out = []
    for k in key_strings:
        try:
            out.append(CosignatureVerifier.from_key_string(k.strip()))
        except LedgerError as exc:
            raise InputError(f"witness key {k.strip()!r} is not a cosignature/v1 key: {exc}") from exc
    return out


def check_witnesses(
    note: bytes, verifier: NoteVerifier, witnesses: Sequence[CosignatureVerifier], threshold: int
) -> str:
    """Require `threshold` valid cosignatures from `witnesses` on the checkpoint note."""
    try:
        _, cosigs = verify_cosignatures(note, verifier, list(witnesses), threshold)
    except LedgerError as exc:
        raise VerificationFailed(f"witness cosignatures: {exc}") from exc
    return f"{len(cosigs)} of {len(witnesses)} witnesses cosigned (threshold {threshold}): " + (
        ", ".join(c.name for c in cosigs))


@dataclass(frozen=True)
class ReceiptChecks:
    """What a receipt is held to beyond its checkpoint signature, inclusion proof and
    envelope signature: the origin its checkpoint must name, a trust policy, the source
    its subject digest must match, witness cosignatures (keys and how many) and a witness
    policy."""

    origin: str | None = None
    policy: TrustPolicy | None = None
    source: Path | None = None
    witnesses: Sequence[CosignatureVerifier] = ()
    witness_threshold: int = 0
    witness_policy: WitnessPolicy | None = None


def verify_receipt(
    proof_bytes: bytes, entry_bytes: bytes, verifier: NoteVerifier,
    checks: ReceiptChecks | None = None,
) -> tuple[ReceiptReport, SignedCheckpoint]:
    """Verify a receipt offline; raise `VerificationFailed` naming the first failed step."""
    checks = checks or ReceiptChecks()
    if len(proof_bytes) > MAX_PROOF_FILE_BYTES:
        raise VerificationFailed("receipt: the tlog-proof file is larger than 64 KiB")
    if len(entry_bytes) > MAX_ENTRY_FILE_BYTES:
        raise VerificationFailed("entry: larger than the 65535 bytes a log entry can have")
    proof = parse_proof(proof_bytes)
    cp = open_signed(proof.checkpoint, verifier, checks.origin)
    notes: tuple[str, ...] = ()
    if checks.witnesses or checks.witness_threshold:
        notes = (check_witnesses(proof.checkpoint, verifier, checks.witnesses,
                                 checks.witness_threshold),)
    if checks.witness_policy is not None:
        notes += (quorum_result(cp, verifier, checks.witness_policy).describe(),)
    leaf = check_inclusion(entry_bytes, proof.index, tuple(proof.hashes), cp)
    verified = check_entry(entry_bytes)
    subject = verified.statement.subjects[0]
    policy_note = check_policy(verified, checks.policy) if checks.policy is not None else None
    source_note = None
    if checks.source is not None:
        got = source_digest(checks.source)
        if got != subject.sha256:
            raise VerificationFailed(
                f"source digest: {checks.source} has sha256 {got}, but the entry's subject "
                f"{subject.name} is sha256 {subject.sha256}"
            )
        source_note = f"{checks.source} matches sha256:{got}"
    report = ReceiptReport(
        origin=cp.checkpoint.origin,
        index=proof.index,
        tree_size=cp.checkpoint.size,
        root_hash=cp.checkpoint.root_hash.hex(),
        leaf_hash=leaf.hex(),
        subject_name=subject.name,
        subject_sha256=subject.sha256,
        predicate_type=verified.statement.predicate_type,
        signer_keyids=tuple(verified.signer_keyids),
        policy=policy_note,
        source=source_note,
        notes=notes,
    )
    return report, cp


def load_policy(path: Path | None) -> TrustPolicy | None:
    """The trust policy TOML at `path` (None: no policy); InputError if it is invalid."""
    if path is None:
        return None
    read_capped(path, 1024 * 1024, "policy file")
    try:
        return TrustPolicy.load(path)
    except AttestError as exc:
        raise InputError(f"policy file {path} is invalid: {exc}") from exc


@dataclass(frozen=True)
class VerifyOptions:
    """`ktl verify`: the receipt, its entry (default: beside it), the log's key, and what
    else it is held to; with `log_url`, also proven consistent with the log's latest
    checkpoint."""

    receipt: Path
    entry_path: Path | None = None
    log_key: str | None = None
    policy_path: Path | None = None
    source_path: Path | None = None
    witness_keys: tuple[str, ...] = ()
    witness_threshold: int | None = None
    witness_policy_path: Path | None = None
    log_url: str | None = None

    def checks(self) -> ReceiptChecks:
        if self.source_path is not None and not self.source_path.exists():
            raise InputError(f"source {self.source_path} does not exist")
        witnesses = load_witnesses(self.witness_keys)
        threshold = ((1 if witnesses else 0) if self.witness_threshold is None
                     else self.witness_threshold)
        return ReceiptChecks(policy=load_policy(self.policy_path), source=self.source_path,
                             witnesses=witnesses, witness_threshold=threshold,
                             witness_policy=load_witness_policy(self.witness_policy_path))


def verify_receipt_files(opts: VerifyOptions) -> ReceiptReport:
    """`ktl verify`: the receipt files verified offline, then (with `log_url`) proven a
    prefix of the log's latest checkpoint."""
    if not opts.log_key:
        raise InputError("verify needs the log's key: pass --log-key KEYSTRING "
                         "(print it with `ktl log-key` on the log's host)")
    verifier = load_verifier(opts.log_key)
    proof_bytes = read_capped(opts.receipt, MAX_PROOF_FILE_BYTES, "receipt")
    entry_file = opts.entry_path or entry_path_for(opts.receipt)
    entry_bytes = read_capped(entry_file, MAX_ENTRY_FILE_BYTES, "entry file")
    checks = opts.checks()
    report, cp = verify_receipt(proof_bytes, entry_bytes, verifier, checks)
    if not opts.log_url:
        return report
    latest = _prove_current(opts.log_url, opts.log_key, checks.witness_policy, report, cp)
    return replace(report, consistent_with=latest.checkpoint.size)


def _prove_current(url: str, log_key: str, witness_policy: WitnessPolicy | None,
                   report: ReceiptReport, cp: SignedCheckpoint) -> SignedCheckpoint:
    """The log's latest checkpoint, proven to extend the receipt's `cp`; a network failure
    says what did verify offline first."""
    try:
        sess = connect(url, TrustedState(), log_key, witness_policy=witness_policy)
    except NetworkError as exc:
        checked = ", ".join(["checkpoint signature", "inclusion proof",
                             "envelope signature and statement"]
                            + ["trust policy"] * bool(report.policy)
                            + ["source digest"] * bool(report.source)
                            + ["witnesses"] * bool(report.notes))
        raise NetworkError(
            f"the receipt (entry {report.index}) verified offline ({checked}), but "
            f"its consistency with the log at {url} could not be checked: {exc}"
        ) from exc
    try:
        if sess.origin != cp.checkpoint.origin:
            raise InputError(f"the log at {url} is {sess.origin!r}, but the receipt "
                             f"is from {cp.checkpoint.origin!r}")
        return sess.prove_receipt_current(cp)
    finally:
        sess.close()


@dataclass(frozen=True)
class GetOptions:
    """`ktl get`: the entry's index, where to save it as a receipt (None: not saved), the
    policy naming trusted reproducers, and the log."""

    index: int
    out_path: Path | None = None
    policy_path: Path | None = None
    log_url: str | None = None
    log_key: str | None = None
    witness_policy_path: Path | None = None


@dataclass(frozen=True)
class ShownEntry:
    """`ktl get`'s answer: the verified entry's facts (`data`, its JSON), what its claims
    say (`view`) and, for a claim, who reproduced it (`found`)."""

    data: dict[str, Any]
    view: ClaimsView | None
    found: ClaimReproductions | None
    key_note: tuple[str, str]
    """How the log's key was chosen (`KeyChoice.how`) and its description."""


def show_entry(opts: GetOptions) -> ShownEntry:
    """Fetch one entry and verify it all; for a claim, its reproductions weighed by the
    policy; with `out_path`, saved as a receipt (the entry and its tlog-proof beside it)."""
    policy = load_policy(opts.policy_path)
    sess = connect(require_url(opts.log_url), TrustedState(), opts.log_key,
                   witness_policy=load_witness_policy(opts.witness_policy_path))
    try:
        fetched = sess.fetch_entry(opts.index)
        found = None
        if fetched.verified.statement.predicate_type in (BENCHMARK_V1, VERIFICATION_V1):
            found = reproductions_of(sess, fetched, policy)
    finally:
        sess.close()
    data = fetched.summary()
    if found is not None:
        data["reproduced"] = found.to_json()
    stmt = fetched.verified.statement
    data["statement"] = stmt.to_json()
    if opts.out_path is not None:
        data["entry_path"], data["proof_path"] = _save_fetched(fetched, opts.out_path)
    view = claims_view(stmt.predicate_type, stmt.predicate.to_json(),
                       signer_phrase(fetched.verified.signer_keyids, policy))
    if view is not None:
        data["signed"] = view.to_json()
    if stmt.predicate_type == REPRODUCTION_V1:
        data["reproducer"] = signer_phrase(fetched.verified.signer_keyids, policy)
    return ShownEntry(data, view, found, (sess.key.how, sess.key.describe()))


def _save_fetched(fetched: FetchedEntry, out_path: Path) -> tuple[str, str]:
    """Write the entry's bytes to `out_path` and its tlog-proof beside it; their paths."""
    atomic_write(out_path, fetched.entry_bytes)
    name = out_path.name
    stem = name[: -len(ENTRY_SUFFIX)] if name.endswith(ENTRY_SUFFIX) else name
    proof_path = out_path.with_name(stem + PROOF_SUFFIX)
    proof = TlogProof(fetched.index, tuple(fetched.proof), fetched.checkpoint.note_bytes, None)
    atomic_write(proof_path, proof.to_text().encode("utf-8"))
    return str(out_path), str(proof_path)
