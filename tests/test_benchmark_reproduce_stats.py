"""benchmarks/bench_reproduce_stats.py --tiny: the experiment behind BENCHMARKS.md still runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_tiny_experiment_runs_and_prints_its_tables() -> None:
    """Eight tiny bench runs: ~15 s on an idle 2-core machine."""
    out = subprocess.run([sys.executable, "benchmarks/bench_reproduce_stats.py", "--tiny"],
                         capture_output=True, text=True, cwd=ROOT, timeout=240, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "load average (1/5/15 min) at start" in text
    assert "| sum-rows | " in text and "not pinned (before)" in text
    assert "| kernel | honest | inflated 1.1x | inflated 1.25x | inflated 1.5x |" in text
    row = next(line for line in text.splitlines() if line.startswith("| sum-rows | ")
               and "refuted (" in line)
    assert row.count("/1 refuted") == 4
    assert "| between-run spread | honest: refuted |" in text


@pytest.mark.slow
def test_tiny_cross_experiment_runs_and_prints_its_table() -> None:
    """Issue 25's busy/quiet experiment, tiny: its table comes out (verdicts are timings')."""
    out = subprocess.run([sys.executable, "benchmarks/bench_reproduce_stats.py", "--only",
                          "cross", "--tiny", "--time-budget", "2"],
                         capture_output=True, text=True, cwd=ROOT, timeout=400, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "| kernel | published -> reproduced | honest claims | 1.25x-inflated claim |" \
        in out.stdout
    assert "| sum-rows | busy -> quiet |" in out.stdout
    assert "| sum-rows | quiet -> busy |" in out.stdout
