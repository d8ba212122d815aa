"""`ktl keygen`: create an Ed25519 signing key pair for attestations."""

from __future__ import annotations

import os
from pathlib import Path

import click

from attest import generate_private_key, keyid, save_private_key, save_public_key
from client.errors import InputError
from client.output import Output, run_guarded


def _passphrase(var: str | None) -> bytes | None:
    if var is None:
        return None
    value = os.environ.get(var)
    if not value:
        raise InputError(f"environment variable {var} is unset or empty; export the passphrase "
                         "in it, or drop --passphrase-env for an unencrypted key")
    return value.encode("utf-8")


def _write_key_pair(out_path: Path, passphrase: bytes | None) -> dict[str, object]:
    """Create the pair at `out_path` and `out_path`.pub, refusing to overwrite either."""
    pub_path = out_path.with_name(out_path.name + ".pub")
    for path in (out_path, pub_path):
        if path.exists() or path.is_symlink():
            raise InputError(f"{path} already exists; refusing to overwrite a key "
                             "(choose another --out)")
    key = generate_private_key()
    save_private_key(out_path, key, passphrase)
    save_public_key(pub_path, key.public_key())
    return {"keyid": keyid(key.public_key()), "private_key": str(out_path),
            "public_key": str(pub_path), "encrypted": passphrase is not None}


@click.command()
@click.option("--out", "out_path", required=True, metavar="FILE",
              type=click.Path(path_type=Path, dir_okay=False),
              help="Private key file to create (PEM PKCS#8, mode 0600); FILE.pub gets the public key.")
@click.option("--passphrase-env", metavar="VAR",
              help="Encrypt the private key with the passphrase held in environment variable VAR.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def keygen(out_path: Path, passphrase_env: str | None, as_json: bool) -> None:
    """Create an Ed25519 key pair (FILE and FILE.pub) and print its keyid.

    The keyid is the hex SHA-256 of the raw 32-byte public key; trust policies and
    log searches name keys by it. Existing files are never overwritten.
    """
    out = Output(as_json)

    def body() -> int:
        written = _write_key_pair(out_path, _passphrase(passphrase_env))
        out.note(f"wrote {out_path} (private, mode 0600"
                 f"{', encrypted' if written['encrypted'] else ''}) and {written['public_key']}")
        out.result(written, lambda console: console.print(written["keyid"], highlight=False))
        return 0

    run_guarded(out, body)


def register(group: click.Group) -> None:
    """Add this module's commands to the `ktl` group."""
    group.add_command(keygen)
