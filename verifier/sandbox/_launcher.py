"""The sandbox launcher program (`_launcher.c`), compiled once per process with the system cc.

`launcher_binary()` builds the C source beside this module into a private temporary
folder (mode 0700, removed at exit) the first time a sandboxed child is started, and
returns the same path afterwards; a source that changed gets a new build. The
launcher applies `verifier.sandbox._confine`'s plan between fork and exec.
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import subprocess
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

from verifier.errors import SandboxError

__all__ = ["SOURCE", "launcher_binary"]

SOURCE = Path(__file__).resolve().parent / "_launcher.c"
_COMPILER_PATH = "/usr/bin:/bin:/usr/local/bin"
_lock = threading.Lock()


@lru_cache(maxsize=1)
def _cache_dir() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="ktl-launcher-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def launcher_binary() -> Path:
    """The launcher's path, built on first use; SandboxError if it cannot be built."""
    try:
        source = SOURCE.read_bytes()
    except OSError as exc:
        raise SandboxError(f"cannot read the sandbox launcher's source {SOURCE}: {exc}") from exc
    folder = _cache_dir() / hashlib.sha256(source).hexdigest()[:16]
    binary = folder / "ktl-launcher"
    with _lock:
        if binary.is_file():
            return binary
        folder.mkdir(exist_ok=True)
        (folder / "launcher.c").write_bytes(source)
        cc = shutil.which("cc", path=_COMPILER_PATH) or "cc"
        env = {"PATH": _COMPILER_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        try:
            out = subprocess.run([cc, "-O2", "-Wall", "-o", str(folder / "ktl-launcher.tmp"),
                                  str(folder / "launcher.c")], capture_output=True, text=True,
                                 timeout=120, check=False, env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxError(f"cannot build the sandbox launcher with {cc}: {exc}") from exc
        if out.returncode != 0:
            raise SandboxError(f"cannot build the sandbox launcher with {cc}: "
                               f"{out.stderr[-1500:]}")
        (folder / "ktl-launcher.tmp").rename(binary)
    return binary
