"""attest.keys: Ed25519 key files (PEM, 0600, passphrase, no overwrite) and keyids."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from attest import (
    KeyFileError,
    keyid,
    load_private_key,
    load_public_key,
    public_key_b64,
    public_key_from_b64,
    save_private_key,
    save_public_key,
)
from attest import generate_private_key as generate_ed25519

# RFC 8032 section 7.1, TEST 1.
RFC8032_SECRET = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC8032_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")


def test_keyid_is_sha256_of_raw_public_key() -> None:
    key = Ed25519PrivateKey.from_private_bytes(RFC8032_SECRET)
    assert keyid(key.public_key()) == hashlib.sha256(RFC8032_PUBLIC).hexdigest()
    assert public_key_from_b64(public_key_b64(key.public_key())).public_bytes_raw() == RFC8032_PUBLIC


def test_private_key_round_trip_mode_0600(tmp_path: Path) -> None:
    key = generate_ed25519()
    path = tmp_path / "signer.pem"
    save_private_key(path, key)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    loaded = load_private_key(path)
    assert keyid(loaded.public_key()) == keyid(key.public_key())
    assert [p.name for p in tmp_path.iterdir()] == ["signer.pem"]  # no temporary left behind


def test_public_key_round_trip(tmp_path: Path) -> None:
    key = generate_ed25519().public_key()
    save_public_key(tmp_path / "k.pub", key)
    assert (tmp_path / "k.pub").read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    assert keyid(load_public_key(tmp_path / "k.pub")) == keyid(key)


def test_passphrase_protects_the_key(tmp_path: Path) -> None:
    key = generate_ed25519()
    path = tmp_path / "enc.pem"
    save_private_key(path, key, passphrase=b"correct horse")
    assert b"ENCRYPTED" in path.read_bytes()
    assert keyid(load_private_key(path, b"correct horse").public_key()) == keyid(key.public_key())
    with pytest.raises(KeyFileError, match="encrypted; give its passphrase"):
        load_private_key(path)
    with pytest.raises(KeyFileError, match="wrong passphrase"):
        load_private_key(path, b"wrong")


def test_passphrase_given_for_plain_key(tmp_path: Path) -> None:
    save_private_key(tmp_path / "p.pem", generate_ed25519())
    with pytest.raises(KeyFileError, match="not encrypted"):
        load_private_key(tmp_path / "p.pem", b"x")


def test_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "k.pem"
    path.write_bytes(b"precious")
    with pytest.raises(KeyFileError, match="already exists"):
        save_private_key(path, generate_ed25519())
    with pytest.raises(KeyFileError, match="already exists"):
        save_public_key(path, generate_ed25519().public_key())
    assert path.read_bytes() == b"precious"


def test_missing_folder_and_file(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="does not exist"):
        save_private_key(tmp_path / "nope" / "k.pem", generate_ed25519())
    with pytest.raises(KeyFileError, match="does not exist"):
        load_private_key(tmp_path / "absent.pem")


def test_rejects_other_key_types_and_garbage(tmp_path: Path) -> None:
    ec = generate_private_key(SECP256R1())
    (tmp_path / "ec.pem").write_bytes(ec.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    (tmp_path / "ec.pub").write_bytes(ec.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(KeyFileError, match="only Ed25519"):
        load_private_key(tmp_path / "ec.pem")
    with pytest.raises(KeyFileError, match="only Ed25519"):
        load_public_key(tmp_path / "ec.pub")
    (tmp_path / "junk").write_bytes(b"not a key")
    with pytest.raises(KeyFileError, match="not a PEM"):
        load_private_key(tmp_path / "junk")
    with pytest.raises(KeyFileError, match="not a PEM"):
        load_public_key(tmp_path / "junk")
    (tmp_path / "big").write_bytes(b"A" * 20000)
    with pytest.raises(KeyFileError, match="larger than"):
        load_public_key(tmp_path / "big")


@pytest.mark.parametrize("text", ["", "AAAA", "not base64!", "A" * 42 + "==", "A" * 43 + "B", "A" * 43 + "F"])
def test_public_key_from_b64_is_strict(text: str) -> None:
    with pytest.raises(KeyFileError):
        public_key_from_b64(text)
