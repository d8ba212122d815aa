"""What `ktl` writes to a terminal: attacker text is shown literally, never obeyed.

Kernel sources (through compiler messages), logged entries (through the log's answers)
and server errors can hold rich markup (`[reverse]`, `[link=…]`) and terminal escape
sequences (CSI, OSC 8 hyperlinks, C1 controls). The real `ktl` runs on a pseudo-terminal
here and the bytes it writes are checked: the text appears literally, the escapes do not.
"""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import sys
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from client_fakes import serving
from hypothesis import given
from hypothesis import strategies as st

from client.output import clean, rows_table, safe

REPO = Path(__file__).resolve().parent.parent
MARKUP = "[reverse]HIDDEN[/reverse] [link=http://evil.example]click[/link]"
ESCAPES = "\x1b]8;;http://evil.example\x07osc\x1b]8;;\x07 \x1b[7mcsi\x1b[0m \x9b7m c1 \r\x08"


def _on_pty(*args: str, env: dict[str, str] | None = None, timeout: float = 240.0
            ) -> tuple[int, bytes]:
    """Run the real `ktl` with stdout and stderr on a pseudo-terminal; (exit code, bytes)."""
    master, slave = pty.openpty()
    full_env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "200",
                "KTL_LOG": "", "KTL_LOG_KEY": "", **(env or {})}
    proc = subprocess.Popen([sys.executable, "-c", "from client.cli import main; main()", *args],
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=REPO,
                            env=full_env)
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                proc.kill()
                raise AssertionError(f"ktl {args} wrote nothing for {timeout} s")
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    return proc.wait(timeout), b"".join(chunks)


def _assert_inert(written: bytes) -> None:
    """No hyperlink, no reverse video, no C1 or bell from the attacker; the markup literal."""
    for bad in (b"\x1b]", b"\x07", b"\x1b[7m", b"\x9b", "\x9b".encode(), b"\r\x08"):
        assert bad not in written, (bad, written)
    assert b"evil.example" in written  # shown as text ...
    assert b"[reverse]HIDDEN[/reverse]" in written  # ... with its markup literal


def test_clean_known_answers() -> None:
    assert clean(ESCAPES) == "osc csi  c1 "  # the C1 CSI `\x9b7m` goes whole
    assert clean("a\tb\nc\x00\x7f\u202eevil") == "a\tb\ncevil"
    assert clean(None) == "" and clean(3) == "3"
    assert safe(MARKUP).plain == MARKUP  # a Text: rich never parses it as markup


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_clean_leaves_no_control(text: str) -> None:
    out = clean(text)
    assert not any(ord(ch) < 0x20 and ch not in "\t\n" for ch in out)
    assert not any(0x7f <= ord(ch) <= 0x9f for ch in out)


def test_table_cells_are_not_markup() -> None:
    from rich.console import Console

    console = Console(record=True, width=200, force_terminal=True)
    console.print(rows_table("[reverse]title[/reverse]", ["claim"],
                             [["benchmark.speedup[R=512,C=1024]"], [MARKUP], [ESCAPES]]))
    text = console.export_text()
    assert "benchmark.speedup[R=512,C=1024]" in text and MARKUP in text
    assert "[reverse]title[/reverse]" in text and "osc csi  c1" in text


def test_check_shows_compiler_text_literally(tmp_path: Path) -> None:
    kdir = tmp_path / "evil"
    shutil.copytree(REPO / "examples" / "sum-rows", kdir)
    (kdir / "sum.c").write_text(f'#error "{MARKUP} {ESCAPES}"\n', encoding="utf-8")
    code, written = _on_pty("check", str(kdir), "--seed", "1")
    assert code == 1, written
    _assert_inert(written)
    assert b"build" in written


class _EvilLog(BaseHTTPRequestHandler):
    """A log whose every answer carries markup and escape sequences."""

    def do_GET(self) -> None:
        if self.path.startswith("/api/v1/search"):
            row = {"index": 0, "leaf_hash": "00" * 32, "subject_name": f"{MARKUP} {ESCAPES}",
                   "subject_sha256": "ab" * 32, "predicate_type": f"{MARKUP}/kernel/v1",
                   "keyids": []}
            self._send(200, {"results": [row], "next_cursor": None})
        else:
            self._send(503, {"error": {"code": "unavailable", "message": f"{MARKUP} {ESCAPES}"}})

    def _send(self, status: int, obj: object) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _evil_log() -> AbstractContextManager[str]:
    return serving(_EvilLog)


@pytest.mark.slow
def test_logged_rows_and_server_errors_are_shown_literally(tmp_path: Path) -> None:
    env = {"KTL_HOME": str(tmp_path / "home")}
    with _evil_log() as url:
        code, written = _on_pty("search", "--name", "acme/x", "--unverified", "--log", url,
                                env=env)
        assert code == 0, written
        _assert_inert(written)
        code, written = _on_pty("log-info", "--log", url, env=env)
        assert code == 3, written
        _assert_inert(written)
        assert b"network error" in written
