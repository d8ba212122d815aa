"""tests/vectors/vindex_checkpoint.json: the index commitment line in signed checkpoints.

The vectors are written by tests/vectors/make_vindex_checkpoint_vectors.py from the C2SP
specs and docs/vindex.md with no code of ours; here our signer must produce each valid
note byte for byte, and our reader must find each commitment, find none where there is
none, and refuse every malformed line (typed, never by message text).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.tlog.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from ledger.tlog.note import NoteSigner, NoteVerifier
from ledger.vindex import IndexProofError, commitment_line, committed_root

HERE = Path(__file__).parent / "vectors"
VECTORS = json.loads((HERE / "vindex_checkpoint.json").read_text())
NOTE = json.loads((HERE / "note.json").read_text())
SIGNER = NoteSigner.from_key_string(NOTE["key"]["signer_key"])
VERIFIER = NoteVerifier.from_key_string(VECTORS["key"])


def _opened(case: dict[str, Any]) -> Checkpoint:
    return open_checkpoint(case["signed_note"].encode(), VERIFIER, NOTE["key"]["name"]).checkpoint


def test_the_vectors_are_what_their_generator_writes(tmp_path: Path) -> None:
    """The file is the generator's output (nobody edited a vector by hand)."""
    copy = tmp_path / "vectors"
    copy.mkdir()
    for name in ("make_vindex_checkpoint_vectors.py", "note.json", "vindex.json"):
        (copy / name).write_bytes((HERE / name).read_bytes())
    subprocess.run([sys.executable, str(copy / "make_vindex_checkpoint_vectors.py")], check=True,
                   cwd=tmp_path)
    assert (copy / "vindex_checkpoint.json").read_bytes() == \
        (HERE / "vindex_checkpoint.json").read_bytes()


@pytest.mark.parametrize("case", VECTORS["valid"], ids=lambda c: c["name"])
def test_our_signer_writes_each_valid_note_byte_for_byte(case: dict[str, Any]) -> None:
    index_root = bytes.fromhex(case["index_root_hex"])
    exts = tuple(case["extensions"])
    assert commitment_line(index_root) in exts
    cp = Checkpoint(NOTE["key"]["name"], case["size"], bytes.fromhex(case["root_hex"]), exts)
    assert cp.to_text() == case["text"]
    assert sign_checkpoint(cp, SIGNER) == case["signed_note"].encode()
    assert committed_root(_opened(case)) == index_root


@pytest.mark.parametrize("case", VECTORS["uncommitted"], ids=lambda c: c["name"])
def test_a_checkpoint_without_the_line_commits_to_no_index(case: dict[str, str]) -> None:
    assert committed_root(_opened(case)) is None


@pytest.mark.parametrize("case", VECTORS["invalid"], ids=lambda c: c["reason"])
def test_every_malformed_commitment_is_refused(case: dict[str, str]) -> None:
    cp = _opened(case)  # the signature is good: what is wrong is the line
    with pytest.raises(IndexProofError):
        committed_root(cp)


def test_the_vectors_cover_what_docs_vindex_md_names() -> None:
    reasons = {c["reason"] for c in VECTORS["invalid"]}
    assert {"two commitment lines, the same root", "two commitment lines, two roots",
            "uppercase hex", "63 hex digits", "an unknown version under the prefix"} <= reasons
    assert any(c["size"] == 0 and c["index_root_hex"] == "00" * 32 for c in VECTORS["valid"])
