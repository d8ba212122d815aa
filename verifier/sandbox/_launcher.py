"""ktl's own C programs, compiled once per process with the system cc; the sandbox launcher.

`build_program` compiles a C source into a private temporary folder (mode 0700, removed
at exit), one build per source hash and process, and returns the same path afterwards:
the sandbox launcher (`_launcher.c`, which applies `verifier.sandbox._confine`'s plan
between fork and exec; `launcher_binary()`) and the native worker
(`verifier.worker._native`) are built this way.
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from verifier.errors import SandboxError, VerifierError

__all__ = ["SOURCE", "build_program", "launcher_binary"]

SOURCE = Path(__file__).resolve().parent / "_launcher.c"
COMPILER_PATH = "/usr/bin:/bin:/usr/local/bin"
_COMPILER_ENV = {"PATH": COMPILER_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
_lock = threading.Lock()


@lru_cache(maxsize=1)
def _cache_dir() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="ktl-programs-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def build_program(source: str, name: str, what: str, libs: Sequence[str] = (),
                  error: type[VerifierError] = SandboxError) -> Path:
    """The program `name` built from C `source` (once per process and source hash).

    Raises `error` saying it cannot build `what` (with the compiler's last words)."""
    folder = _cache_dir() / hashlib.sha256(source.encode()).hexdigest()[:16]
    binary = folder / name
    with _lock:
        if binary.is_file():
            return binary
        folder.mkdir(exist_ok=True)
        (folder / f"{name}.c").write_text(source)
        cc = shutil.which("cc", path=COMPILER_PATH) or "cc"
        partial = folder / f"{name}.partial"
        try:
            out = subprocess.run([cc, "-O2", "-o", str(partial), str(folder / f"{name}.c"),
                                  *libs], capture_output=True, text=True, timeout=120,
                                 check=False, env=_COMPILER_ENV)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise error(f"cannot build {what} with {cc}: {exc}") from exc
        if out.returncode != 0:
            raise error(f"cannot build {what} with {cc}: {out.stderr[-1500:]}")
        partial.rename(binary)
    return binary


def launcher_binary() -> Path:
    """The sandbox launcher's path, built on first use; SandboxError if it cannot be."""
    try:
        source = SOURCE.read_text()
    except OSError as exc:
        raise SandboxError(f"cannot read the sandbox launcher's source {SOURCE}: {exc}") from exc
    return build_program(source, "ktl-launcher", "the sandbox launcher")
