"""attest.keys: Ed25519 key files (PEM, 0600, passphrase, no overwrite) and keyids."""

from __future__ import annotations

import base64
import errno
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


def test_key_file_size_limit_is_exactly_16_kib(tmp_path: Path) -> None:
    """A file of exactly the limit is read (and refused as not a key); one byte more is refused unread."""
    (tmp_path / "at").write_bytes(b"A" * 16 * 1024)
    with pytest.raises(KeyFileError, match="not a PEM"):
        load_public_key(tmp_path / "at")
    (tmp_path / "over").write_bytes(b"A" * (16 * 1024 + 1))
    with pytest.raises(KeyFileError, match="larger than 16384 bytes"):
        load_private_key(tmp_path / "over")


def test_unreadable_key_file_is_a_key_file_error(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="cannot read key file"):
        load_public_key(tmp_path)  # a folder


def test_load_errors_say_exactly_what_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "junk").write_bytes(b"not a key")
    with pytest.raises(KeyFileError) as ei:
        load_private_key(tmp_path / "junk")
    assert str(ei.value) == f"cannot load {tmp_path / 'junk'}: not a PEM PKCS#8 private key"
    with pytest.raises(KeyFileError) as ei:
        load_private_key(tmp_path / "junk", b"pw")
    assert str(ei.value) == (
        f"cannot load {tmp_path / 'junk'}: wrong passphrase, or not a PEM PKCS#8 private key")


def test_public_key_from_b64_says_why() -> None:
    good = public_key_b64(generate_ed25519().public_key())
    with pytest.raises(KeyFileError, match="must be a base64 string"):
        public_key_from_b64(good.encode())  # type: ignore[arg-type]
    with pytest.raises(KeyFileError, match="not valid base64"):
        public_key_from_b64(good[:20] + "\n" + good[20:])  # lenient decoders skip the newline
    with pytest.raises(KeyFileError, match="canonical base64 of 32 raw bytes"):
        public_key_from_b64(base64.b64encode(bytes(31)).decode())
    # 32 bytes, but the unused bits of the last character are set: a second spelling of a key
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    flipped = alphabet[alphabet.index(good[42]) ^ 1]  # an unused low bit, still base64
    with pytest.raises(KeyFileError, match="canonical base64 of 32 raw bytes"):
        public_key_from_b64(good[:42] + flipped + "=")


def test_empty_passphrase_is_refused_not_silently_unencrypted(tmp_path: Path) -> None:
    """Attack: b"" as passphrase would write the private key in the clear."""
    with pytest.raises(KeyFileError, match="passphrase must not be empty"):
        save_private_key(tmp_path / "k.pem", generate_ed25519(), passphrase=b"")
    assert list(tmp_path.iterdir()) == []


def test_only_ed25519_keys_are_saved(tmp_path: Path) -> None:
    ec = generate_private_key(SECP256R1())
    with pytest.raises(KeyFileError, match="only Ed25519 private keys"):
        save_private_key(tmp_path / "ec.pem", ec)  # type: ignore[arg-type]
    with pytest.raises(KeyFileError, match="only Ed25519 public keys"):
        save_public_key(tmp_path / "ec.pub", ec.public_key())  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_dangling_symlink_is_never_followed(tmp_path: Path) -> None:
    """Attack: a symlink planted at the key's name, pointing where the attacker reads."""
    (tmp_path / "k.pem").symlink_to(tmp_path / "attacker-reads-this")
    with pytest.raises(KeyFileError, match=r"already exists; refusing to overwrite it \(choose"):
        save_private_key(tmp_path / "k.pem", generate_ed25519())
    assert not (tmp_path / "attacker-reads-this").exists()


def test_public_key_mode_is_0644_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        save_public_key(tmp_path / "k.pub", generate_ed25519().public_key())
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "k.pub").st_mode) == 0o644


class _FsyncSpy:
    """Records, for each fsync, whether it was a folder and how many bytes the file held."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[bool, int]] = []
        real = os.fsync

        def spy(fd: int) -> None:
            st_ = os.fstat(fd)
            self.calls.append((stat.S_ISDIR(st_.st_mode), st_.st_size))
            real(fd)

        monkeypatch.setattr(os, "fsync", spy)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_key_bytes_are_flushed_and_fsynced_then_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _FsyncSpy(monkeypatch)
    before = _open_fds()
    save_private_key(tmp_path / "k.pem", generate_ed25519())
    size = (tmp_path / "k.pem").stat().st_size
    assert spy.calls == [(False, size), (True, spy.calls[1][1])]  # whole file, then the folder
    assert _open_fds() == before  # the folder's descriptor is closed


def _link_fails(monkeypatch: pytest.MonkeyPatch, code: int, plant: bytes | None = None) -> None:
    def link(src: object, dst: object) -> None:
        if plant is not None:
            Path(str(dst)).write_bytes(plant)
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "link", link)


def test_file_system_without_hard_links_falls_back_to_exclusive_create(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = generate_ed25519()
    _link_fails(monkeypatch, errno.EPERM)
    spy = _FsyncSpy(monkeypatch)
    save_private_key(tmp_path / "k.pem", key)
    data = (tmp_path / "k.pem").read_bytes()
    assert keyid(load_private_key(tmp_path / "k.pem").public_key()) == keyid(key.public_key())
    assert stat.S_IMODE(os.stat(tmp_path / "k.pem").st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["k.pem"]
    assert (False, len(data)) in spy.calls[1:]  # the fallback's own file, flushed and fsynced


def test_racing_writer_is_never_overwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack: a file appears at the key's name between the check and the link."""
    real_link = os.link

    def racing_link(src: str, dst: str) -> None:
        Path(dst).write_bytes(b"racer")
        real_link(src, dst)

    monkeypatch.setattr(os, "link", racing_link)
    with pytest.raises(KeyFileError, match="already exists; refusing to overwrite it"):
        save_private_key(tmp_path / "k.pem", generate_ed25519())
    assert (tmp_path / "k.pem").read_bytes() == b"racer"
    # the same race on a file system without hard links
    _link_fails(monkeypatch, errno.EPERM, plant=b"racer2")
    with pytest.raises(KeyFileError, match="already exists; refusing to overwrite it"):
        save_private_key(tmp_path / "k2.pem", generate_ed25519())
    assert (tmp_path / "k2.pem").read_bytes() == b"racer2"


def test_write_errors_are_key_file_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _link_fails(monkeypatch, errno.EIO)
    with pytest.raises(KeyFileError, match=r"cannot create .*k\.pem"):
        save_private_key(tmp_path / "k.pem", generate_ed25519())
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()

    def no_space(*args: object, **kwargs: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "open", no_space)
    with pytest.raises(KeyFileError, match="cannot write in"):
        save_private_key(tmp_path / "k.pem", generate_ed25519())
