"""The `ktl` entry point loads and answers --help."""

from __future__ import annotations

import subprocess
import sys


def test_ktl_help_lists_usage() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from client.cli import main; main()", "--help"],
        capture_output=True, text=True, check=True,
    )
    assert "Kernel Transparency Log" in out.stdout
