"""Ed25519 keys: generate, save as PEM (private 0600, atomic, never overwriting), load, keyid.

The keyid of a key is the lowercase hex SHA-256 of its raw 32-byte public key.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import hashlib
import os
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from attest._ed25519 import WeakKey, check_public_key
from attest._errors import KeyFileError

PUBLIC_KEY_SIZE = 32
MAX_KEY_FILE_BYTES = 16 * 1024


def generate_private_key() -> Ed25519PrivateKey:
    """A fresh Ed25519 private key."""
    return Ed25519PrivateKey.generate()


def raw_public_key(public_key: Ed25519PublicKey) -> bytes:
    """The raw 32-byte encoding of a public key."""
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def keyid(public_key: Ed25519PublicKey) -> str:
    """Hex SHA-256 of the raw 32-byte public key."""
    return hashlib.sha256(raw_public_key(public_key)).hexdigest()


def public_key_b64(public_key: Ed25519PublicKey) -> str:
    """Standard base64 (padded) of the raw 32-byte public key, as log entries carry it."""
    return base64.b64encode(raw_public_key(public_key)).decode("ascii")


def public_key_from_b64(text: str) -> Ed25519PublicKey:
    """Parse `public_key_b64` output strictly (canonical padded base64 of exactly 32 bytes)."""
    if not isinstance(text, str):
        raise KeyFileError("public key must be a base64 string")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
        raise KeyFileError(f"public key is not valid base64: {exc}") from None
    if len(raw) != PUBLIC_KEY_SIZE or base64.b64encode(raw).decode("ascii") != text:
        raise KeyFileError(
            f"public key must be the canonical base64 of {PUBLIC_KEY_SIZE} raw bytes (Ed25519)"
        )
    return public_key_from_raw(raw)


def public_key_from_raw(raw: bytes) -> Ed25519PublicKey:
    """A raw 32-byte Ed25519 public key, refused unless canonical and of large order.

    Every public key this project parses (log entries, note and cosignature key
    strings, policy key files) comes through here.
    """
    try:
        check_public_key(raw)
    except WeakKey as exc:
        raise KeyFileError(str(exc)) from None
    return Ed25519PublicKey.from_public_bytes(raw)


def _write_new_file(path: Path, data: bytes, mode: int) -> None:
    """Write `data` to `path` atomically with `mode`, failing if `path` already exists.

    The bytes go to a private temporary file in the same folder, are fsynced, then
    hard-linked into place (link fails on an existing name, so nothing is ever
    overwritten and no reader sees a half-written key).
    """
    path = Path(path)
    if path.exists() or path.is_symlink():
        raise KeyFileError(f"{path} already exists; refusing to overwrite it (choose another name)")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise KeyFileError(f"folder {folder} does not exist")
    tmp = folder / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except OSError as exc:
        raise KeyFileError(f"cannot write in {folder}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise KeyFileError(f"{path} already exists; refusing to overwrite it") from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                raise KeyFileError(f"cannot create {path}: {exc.strerror}") from None
            _write_exclusive(path, data, mode)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    with contextlib.suppress(OSError):
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _write_exclusive(path: Path, data: bytes, mode: int) -> None:
    """Fallback for file systems without hard links: O_EXCL create, write, fsync."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise KeyFileError(f"{path} already exists; refusing to overwrite it") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def private_key_pem(key: Ed25519PrivateKey, passphrase: bytes | None = None) -> bytes:
    """PKCS#8 PEM of a private key, encrypted when a passphrase is given."""
    if passphrase is not None and not passphrase:
        raise KeyFileError("passphrase must not be empty (omit it for an unencrypted key)")
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def public_key_pem(public_key: Ed25519PublicKey) -> bytes:
    """SubjectPublicKeyInfo PEM of a public key."""
    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def save_private_key(path: str | os.PathLike[str], key: Ed25519PrivateKey,
                     passphrase: bytes | None = None) -> None:
    """Write the key as PKCS#8 PEM with mode 0600; never overwrites an existing file."""
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError("only Ed25519 private keys are supported")
    _write_new_file(Path(path), private_key_pem(key, passphrase), 0o600)


def save_public_key(path: str | os.PathLike[str], public_key: Ed25519PublicKey) -> None:
    """Write the key as SubjectPublicKeyInfo PEM (mode 0644); never overwrites an existing file."""
    if not isinstance(public_key, Ed25519PublicKey):
        raise KeyFileError("only Ed25519 public keys are supported")
    _write_new_file(Path(path), public_key_pem(public_key), 0o644)


def _read_key_file(path: Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_KEY_FILE_BYTES + 1)
    except FileNotFoundError:
        raise KeyFileError(f"key file {path} does not exist") from None
    except OSError as exc:
        raise KeyFileError(f"cannot read key file {path}: {exc.strerror}") from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise KeyFileError(f"key file {path} is larger than {MAX_KEY_FILE_BYTES} bytes; not a key")
    return data


def load_private_key(path: str | os.PathLike[str], passphrase: bytes | None = None) -> Ed25519PrivateKey:
    """Load a PKCS#8 PEM Ed25519 private key (decrypting it with `passphrase` if given)."""
    path = Path(path)
    data = _read_key_file(path)
    try:
        key = serialization.load_pem_private_key(data, password=passphrase or None)
    except TypeError:
        if passphrase:
            raise KeyFileError(f"{path} is not encrypted; load it without a passphrase") from None
        raise KeyFileError(f"{path} is encrypted; give its passphrase") from None
    except (ValueError, UnsupportedAlgorithm):
        hint = "wrong passphrase, or " if passphrase else ""
        raise KeyFileError(f"cannot load {path}: {hint}not a PEM PKCS#8 private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path} holds a {type(key).__name__}; only Ed25519 keys are supported")
    return key


def load_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """Load a SubjectPublicKeyInfo PEM Ed25519 public key."""
    path = Path(path)
    data = _read_key_file(path)
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        raise KeyFileError(f"cannot load {path}: not a PEM public key (SubjectPublicKeyInfo)") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{path} holds a {type(key).__name__}; only Ed25519 keys are supported")
    try:
        return public_key_from_raw(raw_public_key(key))
    except KeyFileError as exc:
        raise KeyFileError(f"{path}: {exc}") from None
