"""A throwaway PostgreSQL cluster for tests: initdb + pg_ctl in a temp folder, UNIX socket only.

Uses Debian's `postgresql` package (``/usr/lib/postgresql/<ver>/bin``, or ``initdb`` on
PATH). initdb refuses to run as root, so as root the cluster runs as ``nobody``.
`PgCluster.start` raises `PgUnavailable` (the tests skip with its reason) only when no
PostgreSQL can be had; anything else that goes wrong fails loudly.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path


class PgUnavailable(Exception):
    """No PostgreSQL server binaries on this machine (the reason is the message)."""


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    raise PgUnavailable(
        "PostgreSQL is not installed (no initdb): `make test` installs Debian's postgresql "
        "package when run as root; or apt-get install postgresql"
    )


class PgCluster:
    """One server on a UNIX socket in its own folder; `url(db)` for each database."""

    def __init__(self, durable: bool = False) -> None:
        """``durable``: fsync on, as in production (benchmarks); tests run without it."""
        self.durable = durable
        self.bin = _bindir()
        self.root = Path(tempfile.mkdtemp(prefix="ktl-pg-"))
        self.data = self.root / "data"
        self.sock = self.root
        self.user = "ktl"
        self._run_as: list[str] = []
        if os.getuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
            self._run_as = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                            "--clear-groups", "--"]

    def _run(self, *args: str, timeout: float = 120) -> None:
        proc = subprocess.run([*self._run_as, *args], capture_output=True, text=True,
                              timeout=timeout, cwd=self.root, env={"PATH": "/usr/bin:/bin", "LANG": "C"})
        if proc.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {proc.stdout}\n{proc.stderr}")

    def start(self) -> PgCluster:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", self.user,
                  "--auth=trust", "--encoding=UTF8", "--no-instructions")
        opts = (f"-c listen_addresses='' -c unix_socket_directories={self.sock} "
                "-c max_connections=200 -c shared_buffers=256MB")
        if not self.durable:
            opts += " -c fsync=off -c full_page_writes=off"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"),
                  "-o", opts, "-w", "-t", "60", "start")
        return self

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{self.user}@/{dbname}?host={self.sock}"

    def new_database(self) -> str:
        """A fresh empty database; returns its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                      "-w", "stop", timeout=60)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
