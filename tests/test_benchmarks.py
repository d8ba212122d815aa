"""Every benchmark script runs as docs/performance.md documents it (`python benchmarks/X.py`).

Scripts are found by glob, so a new one is covered the day it lands: each must accept
``--tiny`` (a smoke run of a few seconds) and must not be named like one of our
packages (run as a script, its folder comes first on ``sys.path`` and would shadow it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))
PACKAGES = sorted(p.parent.name for p in ROOT.glob("*/__init__.py"))


def test_scripts_are_found() -> None:
    assert len(SCRIPTS) >= 5, SCRIPTS
    assert {"attest", "ledger", "client", "verifier"} <= set(PACKAGES)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_script_shadows_a_package(script: Path) -> None:
    assert script.stem not in PACKAGES, (
        f"benchmarks/{script.name} would shadow the {script.stem!r} package when run as a "
        "script: name it bench_<what>.py"
    )


#: Tiny runs that take 6-25 s each (a real log or several real benches): `make slow`'s,
#: so that `make test` keeps to its budget; each still runs in CI.
HEAVY = {"bench_ledger.py", "bench_witness.py", "bench_reproduce_stats.py", "bench_front.py",
         "bench_trust_boundary.py", "bench_write_cpu.py", "bench_verifier.py", "bench_client.py",
         "kernelbench_pass_rate.py", "bench_torch_busy.py", "bench_pages.py",
         "bench_suite_publish.py", "bench_write_path.py"}


@pytest.mark.parametrize(
    "script",
    [pytest.param(s, marks=pytest.mark.slow) if s.name in HEAVY else s for s in SCRIPTS],
    ids=lambda p: p.name,
)
def test_script_runs_tiny(script: Path, tmp_path: Path) -> None:
    # Run from an unrelated folder, as a user would from anywhere, with the documented
    # `python benchmarks/<script>.py` form.
    env = {**os.environ, "COLUMNS": "160", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [sys.executable, str(script), "--tiny"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, (
        f"{script.name} --tiny failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    assert "ModuleNotFoundError" not in proc.stderr
