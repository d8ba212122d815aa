"""Write cosignature.json: tlog-cosignature/v1 vectors that transparency-dev/formats accepts.

Independent of the `ledger` package on purpose: each step below transcribes
transparency-dev/formats `note/note_cosigv1.go` (commit
032646044519b7b248c659f8ef289c21efff4e89), the cosigner used by
transparency-dev/witness (omniwitness):

- `keyHashEd25519(name, key)`: big-endian uint32 of SHA-256(name || "\\n" || key) where
  key = 0x04 || public key (`NewVerifierForCosignatureV1`, case algEd25519CosignatureV1);
- `formatEd25519CosignatureV1(t, msg)`: "cosignature/v1\\ntime %d\\n" || msg, msg being
  the whole checkpoint text (all lines, extension lines included), at least 3 lines;
- the signature: big-endian uint64 t || Ed25519(key, message) (`NewSignerForCosignatureV1`);
- `verifyEd25519CosigV1`: length must be 8 + 64, then Ed25519 verification.

Run from the repository root: python tests/vectors/make_cosignature_vectors.py
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

HERE = Path(__file__).parent
NOTE = json.loads((HERE / "note.json").read_text())
SOURCE = {
    "repository": "transparency-dev/formats",
    "path": "note/note_cosigv1.go",
    "commit": "032646044519b7b248c659f8ef289c21efff4e89",
    "functions": ["keyHashEd25519", "formatEd25519CosignatureV1", "NewSignerForCosignatureV1",
                  "NewVerifierForCosignatureV1", "verifyEd25519CosigV1"],
}


def key_hash(name: str, key: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + key).digest()[:4]


def message(t: int, msg: bytes) -> bytes:
    assert len(msg.split(b"\n")) >= 3
    return b"cosignature/v1\ntime %d\n" % t + msg


def _grown(text: bytes) -> bytes:
    origin, size, rest = text.split(b"\n", 2)
    return origin + b"\n" + str(int(size) + 1).encode() + b"\n" + rest


def main() -> None:
    wk = NOTE["witness_key"]
    priv = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(wk["seed_hex"]))
    pub = priv.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    name = wk["name"]
    kid = key_hash(name, b"\x04" + pub)
    material = base64.b64encode(b"\x04" + pub).decode()
    vkey = f"{name}+{kid.hex()}+{material}"
    log_note = NOTE["signed_checkpoint"]["signed_note"].encode()
    text = NOTE["signed_checkpoint"]["text"].encode()
    ext_text = text + b"extension line\n"
    valid = []
    for t, body in ((1_700_000_000, text), (0, text), (1_679_315_147, text),
                    ((1 << 63) - 1, text)):
        sig = struct.pack(">Q", t) + priv.sign(message(t, body))
        line = f"\u2014 {name} {base64.b64encode(kid + sig).decode()}\n"
        valid.append({"timestamp": t, "message_hex": message(t, body).hex(),
                      "cosignature_line": line, "cosigned_note": (log_note.decode() + line)})
    t = 1_700_000_000
    good_sig = struct.pack(">Q", t) + priv.sign(message(t, text))

    def line_of(k: bytes, s: bytes) -> str:
        return f"\u2014 {name} {base64.b64encode(k + s).decode()}\n"

    invalid = [
        {"reason": "timestamp bytes changed after signing",
         "cosignature_line": line_of(kid, struct.pack(">Q", t + 1) + good_sig[8:])},
        {"reason": "key ID computed with type 0x01 instead of 0x04",
         "cosignature_line": line_of(key_hash(name, b"\x01" + pub), good_sig)},
        {"reason": "no timestamp: a plain Ed25519 signature over the checkpoint",
         "cosignature_line": line_of(kid, priv.sign(text))},
        {"reason": "signed without the 'cosignature/v1' line",
         "cosignature_line": line_of(kid, struct.pack(">Q", t) + priv.sign(b"time %d\n" % t + text))},
        {"reason": "signature over another checkpoint (size + 1)",
         "cosignature_line": line_of(kid, struct.pack(">Q", t) + priv.sign(message(
             t, _grown(text))))},
        {"reason": "one byte of the Ed25519 signature flipped",
         "cosignature_line": line_of(kid, good_sig[:-1] + bytes([good_sig[-1] ^ 1]))},
    ]
    ext_sig = struct.pack(">Q", t) + priv.sign(message(t, ext_text))
    out = {
        "description": "tlog-cosignature/v1 (Ed25519, type 0x04) vectors built by transcribing "
                       "the source below step by step; see make_cosignature_vectors.py",
        "source": SOURCE,
        "log_verifier_key": NOTE["key"]["verifier_key"],
        "checkpoint_text": text.decode(),
        "log_signed_note": log_note.decode(),
        "witness": {"name": name, "seed_hex": wk["seed_hex"], "public_key_hex": pub.hex(),
                    "key_id_hex": kid.hex(), "verifier_key": vkey},
        "valid": valid,
        "invalid": invalid,
        "extension_lines": {"checkpoint_text": ext_text.decode(),
                            "cosignature_line": line_of(kid, ext_sig),
                            "note": "the whole text is signed, extension lines included"},
    }
    (HERE / "cosignature.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
