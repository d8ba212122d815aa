"""Write vindex_checkpoint.json: signed checkpoints carrying the index commitment line.

Independent of the `ledger` package on purpose: the checkpoint body is C2SP
tlog-checkpoint (origin, size, base64 root hash, then extension lines, each ending in a
newline) and the note is C2SP signed-note (the body, an empty line, then one signature
line "— <name> base64(key ID || Ed25519(body))", key ID = SHA-256(name || 0x0A || 0x01 ||
public key)[:4]), written here from the specs, with `cryptography`'s Ed25519 and
nothing of ours. The commitment line is docs/vindex.md section 5:
``ktl/vindex/v1 <index root, 64 lowercase hex>``, at most one line starting ``ktl/vindex/``.

Every note, the invalid ones too, is correctly signed by note.json's key: what a verifier
must refuse in an invalid case is the commitment line, not the signature.

Run from the repository root: python tests/vectors/make_vindex_checkpoint_vectors.py
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

HERE = Path(__file__).parent
NOTE = json.loads((HERE / "note.json").read_text())
VINDEX = {c["name"]: c for c in json.loads((HERE / "vindex.json").read_text())}
PREFIX = "ktl/vindex/v1 "
EMPTY_MAP = bytes(32)
EMPTY_TREE = hashlib.sha256(b"").digest()


def body(origin: str, size: int, root: bytes, extensions: list[str]) -> str:
    lines = [origin, str(size), base64.b64encode(root).decode(), *extensions]
    return "".join(line + "\n" for line in lines)


def signed(text: str) -> str:
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(NOTE["key"]["seed_hex"]))
    name = NOTE["key"]["name"]
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    key_id = hashlib.sha256(name.encode() + b"\n" + b"\x01" + public).digest()[:4]
    assert key_id.hex() == NOTE["key"]["key_id_hex"]
    sig = key.sign(text.encode())
    return text + "\n" + f"\u2014 {name} {base64.b64encode(key_id + sig).decode()}\n"


def main() -> None:
    origin = NOTE["checkpoint"]["origin"]
    size = NOTE["checkpoint"]["size"]
    root = bytes.fromhex(NOTE["checkpoint"]["root_hex"])
    index_root = bytes.fromhex(VINDEX["a list grows (no deletion)"]["root"])
    valid = []
    commit, empty = PREFIX + index_root.hex(), PREFIX + EMPTY_MAP.hex()
    for name, n, r, ix, exts in [
        ("size 0: the empty tree and the empty map", 0, EMPTY_TREE, EMPTY_MAP, [empty]),
        ("size 1000 with an index root", size, root, index_root, [commit]),
        ("an unrelated extension line after the commitment", size, root, index_root,
         [commit, "example.test/other 1"]),
        ("an unrelated extension line before the commitment", size, root, index_root,
         ["example.test/other 1", commit]),
    ]:
        text = body(origin, n, r, exts)
        valid.append({"name": name, "size": n, "root_hex": r.hex(), "extensions": exts,
                      "index_root_hex": ix.hex(), "text": text, "signed_note": signed(text)})
    uncommitted = []
    for name, exts in [("no extension lines", []),
                       ("only an unrelated extension line", ["example.test/other 1"]),
                       ("a line that only contains the prefix's words later",
                        ["example.test/x ktl/vindex/v1 " + index_root.hex()])]:
        text = body(origin, size, root, exts)
        uncommitted.append({"name": name, "extensions": exts, "text": text,
                            "signed_note": signed(text)})
    h = index_root.hex()
    invalid = []
    for reason, exts in [
        ("two commitment lines, the same root", [PREFIX + h, PREFIX + h]),
        ("two commitment lines, two roots", [PREFIX + h, PREFIX + EMPTY_MAP.hex()]),
        ("uppercase hex", [PREFIX + h.upper()]),
        ("63 hex digits", [PREFIX + h[:63]]),
        ("65 hex digits", [PREFIX + h + "0"]),
        ("a trailing space", [PREFIX + h + " "]),
        ("two spaces after the name", ["ktl/vindex/v1  " + h]),
        ("no root", ["ktl/vindex/v1"]),
        ("base64 instead of hex", [PREFIX + base64.b64encode(index_root).decode()]),
        ("an unknown version under the prefix", ["ktl/vindex/v2 " + h]),
        ("a second field", [PREFIX + h + " 1000"]),
    ]:
        text = body(origin, size, root, exts)
        invalid.append({"reason": reason, "extensions": exts, "text": text,
                        "signed_note": signed(text)})
    out = {
        "description": "Signed checkpoints carrying the ktl/vindex/v1 commitment line "
                       "(docs/vindex.md section 5), made by make_vindex_checkpoint_vectors.py "
                       "with no code of this project; key: note.json's key.",
        "key": NOTE["key"]["verifier_key"],
        "valid": valid, "uncommitted": uncommitted, "invalid": invalid,
    }
    (HERE / "vindex_checkpoint.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
