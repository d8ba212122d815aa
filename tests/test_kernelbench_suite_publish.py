"""Runs docs/kernelbench.md's "Publishing a suite" walkthrough literally: every `ktl` line of
its `sh` block, in order, as `ktl` subprocesses in one folder holding our own suite, against a
real log server; then checks what it logged."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from client_server import running_log

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "kernelbench.md"
SECTION = "#### Publishing a suite, and verifying it"


def _lines() -> list[str]:
    text = DOC.read_text().split(SECTION, 1)[1]
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block is not None
    return [line for line in block.group(1).strip().splitlines() if line.startswith("ktl ")]


def test_the_walkthrough_publishes_then_verifies() -> None:
    commands = [shlex.split(line)[1:3] for line in _lines()]
    assert commands == [["keygen", "--out"], ["suite", "run"], ["suite", "verify"]]
    assert "--publish" in _lines()[1]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_publishing_walkthrough_runs(tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(REPO / "tests" / "kernelbench_suite", work / "tests" / "kernelbench_suite")
    with running_log(tmp_path / "log") as url:
        env = {**os.environ, "KTL_HOME": str(tmp_path / "home"), "KTL_LOG": url,
               "KTL_LOG_KEY": "", "COLUMNS": "200"}
        outs = []
        for line in _lines():
            done = subprocess.run([sys.executable, "-c", "from client.cli import main; main()",
                                   *shlex.split(line)[1:], "--json"] if "suite" in line else
                                  [sys.executable, "-c", "from client.cli import main; main()",
                                   *shlex.split(line)[1:]],
                                  cwd=work, env=env, capture_output=True, text=True,
                                  timeout=1100)
            assert done.returncode == 0, (line, done.stdout[-3000:], done.stderr[-3000:])
            outs.append(done.stdout)
    run, verified = json.loads(outs[1]), json.loads(outs[2])
    published = run["published"]
    assert published["name"] == "acme/kb-ours" and published["suite"]["index"] == 2
    (row,) = published["rows"]
    assert row["key"] == "level3/1_Small_MLP" and row["status"] == "correct"
    assert row["indices"] == [0, 1]
    assert verified["verified"] and verified["checked_entries"] == 2
    assert verified["summary"]["correct_pct"] == 100.0
    assert verified["settings"]["memory_limit_bytes"] == run["memory_limit_bytes"] > 0
