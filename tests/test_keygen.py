"""`ktl keygen` through the real command line."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from attest import keyid, load_private_key, load_public_key


def ktl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from client.cli import main; main()", *args],
                          capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=60)


def test_keygen_writes_pair_and_prints_keyid(tmp_path: Path) -> None:
    out = tmp_path / "signer.pem"
    result = ktl("keygen", "--out", str(out))
    assert result.returncode == 0, result.stderr
    private = load_private_key(out)
    public = load_public_key(tmp_path / "signer.pem.pub")
    assert keyid(private.public_key()) == keyid(public) == result.stdout.strip()
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600


def test_keygen_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "k.pem"
    (tmp_path / "k.pem.pub").write_text("keep me")
    result = ktl("keygen", "--out", str(out))
    assert result.returncode == 2
    assert "already exists" in result.stderr
    assert not out.exists()
    assert (tmp_path / "k.pem.pub").read_text() == "keep me"


def test_keygen_with_passphrase_and_json(tmp_path: Path) -> None:
    out = tmp_path / "enc.pem"
    result = ktl("keygen", "--out", str(out), "--passphrase-env", "KTL_TEST_PASS", "--json",
                 env={"KTL_TEST_PASS": "s3cret"})
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["encrypted"] is True
    assert keyid(load_private_key(out, b"s3cret").public_key()) == data["keyid"]
    missing = ktl("keygen", "--out", str(tmp_path / "x.pem"), "--passphrase-env", "KTL_UNSET_VAR_X")
    assert missing.returncode == 2
    assert "KTL_UNSET_VAR_X is unset or empty" in missing.stderr
    assert not (tmp_path / "x.pem").exists()
