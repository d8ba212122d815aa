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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attest.entry import VerifiedEntry
from ledger import LedgerError
from ledger.tlog.checkpoint import SignedCheckpoint
from ledger.tlog.cosignature import CosignatureVerifier, verify_cosignatures
from ledger.tlog.note import NoteVerifier
from ledger.tlog.proof_bundle import TlogProof
from ledger.tlog.witness_policy import WitnessPolicy

if TYPE_CHECKING:
    from attest.policy import TrustPolicy

from client.errors import InputError, VerificationFailed
from client.state import atomic_write, read_capped
from client.trust import check_entry, check_inclusion, open_signed
from client.witnesses import quorum_result

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
        from verifier import VerifierError
        from verifier.kernel import pack_kernel

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


def verify_receipt(
    proof_bytes: bytes,
    entry_bytes: bytes,
    verifier: NoteVerifier,
    *,
    origin: str | None = None,
    policy: TrustPolicy | None = None,
    source: Path | None = None,
    witnesses: Sequence[CosignatureVerifier] = (),
    witness_threshold: int = 0,
    witness_policy: WitnessPolicy | None = None,
) -> tuple[ReceiptReport, SignedCheckpoint]:
    """Verify a receipt offline; raise `VerificationFailed` naming the first failed step."""
    if len(proof_bytes) > MAX_PROOF_FILE_BYTES:
        raise VerificationFailed("receipt: the tlog-proof file is larger than 64 KiB")
    if len(entry_bytes) > MAX_ENTRY_FILE_BYTES:
        raise VerificationFailed("entry: larger than the 65535 bytes a log entry can have")
    proof = parse_proof(proof_bytes)
    cp = open_signed(proof.checkpoint, verifier, origin)
    notes: tuple[str, ...] = ()
    if witnesses or witness_threshold:
        notes = (check_witnesses(proof.checkpoint, verifier, witnesses, witness_threshold),)
    if witness_policy is not None:
        notes += (quorum_result(cp, verifier, witness_policy).describe(),)
    leaf = check_inclusion(entry_bytes, proof.index, tuple(proof.hashes), cp)
    verified = check_entry(entry_bytes)
    subject = verified.statement.subjects[0]
    policy_note = check_policy(verified, policy) if policy is not None else None
    source_note = None
    if source is not None:
        got = source_digest(source)
        if got != subject.sha256:
            raise VerificationFailed(
                f"source digest: {source} has sha256 {got}, but the entry's subject "
                f"{subject.name} is sha256 {subject.sha256}"
            )
        source_note = f"{source} matches sha256:{got}"
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
