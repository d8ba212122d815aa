"""A request that fails ends in one clear line naming the URL (and the status where there was
an answer), never urllib3's internals or another server's error page (issue 42, item 7)."""

from __future__ import annotations

import errno
import json
import socket
import subprocess
import sys
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import requests
from client_fakes import serving

from client import NetworkError, ServerError
from client.api import LogClient, Transport, answer_error, cause

REPO = Path(__file__).resolve().parent.parent
PAGE = b"<!DOCTYPE html><html><head><title>404 Not Found</title></head><body><h1>Not Found" \
    b"</h1><p>The requested URL was not found on this server.</p><hr><address>Apache" \
    b"</address></body></html>\n"


class _NotALog(BaseHTTPRequestHandler):
    """Some other web server: every path is an HTML 404 page."""

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=iso-8859-1")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: object) -> None:
        pass


def _not_a_log() -> AbstractContextManager[str]:
    return serving(_NotALog)


def _refusing() -> str:
    """A URL where nothing listens (a port bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _ktl(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from client.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
                          env={"PATH": "/usr/bin:/bin", "KTL_HOME": str(home), "KTL_LOG": "",
                               "KTL_LOG_KEY": "", "KTL_DEADLINE": "10"})


def _one_clean_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    for internal in ("urllib3", "HTTPConnectionPool", "object at 0x", "Max retries", "<html",
                     "Traceback", "Apache", "Not Found</"):
        assert internal not in lines[0], lines[0]
    return lines[0]


def test_an_html_404_names_the_url_and_status_and_pastes_no_page() -> None:
    with _not_a_log() as url, LogClient(url, transport=Transport(retries=1)) as client:
        with pytest.raises(ServerError) as ei:
            client.info()
        message = _one_clean_line(str(ei.value))
        assert f"{url}/api/v1/log answered HTTP 404 Not Found with an HTML page" in message
        assert "not a ktl log's" in message and ei.value.status == 404
        # an entry the page says is missing is not "not in the log": the page is no log's word
        with pytest.raises(ServerError) as ei2:
            client.entry(3)
        assert type(ei2.value) is ServerError and "HTML page" in str(ei2.value)


def test_a_refused_connection_says_so_in_words() -> None:
    url = _refusing()
    with LogClient(url, transport=Transport(retries=2)) as client, pytest.raises(NetworkError) as ei:
        client.checkpoint()
    message = _one_clean_line(str(ei.value))
    assert message == (f"could not reach the log at {url}/checkpoint after 2 attempts: "
                       "connection refused (nothing listens there)")


@pytest.mark.slow
def test_the_command_line_prints_one_line_for_each(tmp_path: Path) -> None:
    with _not_a_log() as url:
        got = _ktl("log-info", "--log", url, home=tmp_path)
    assert got.returncode == 3, got.stderr
    line = _one_clean_line(got.stderr)
    assert line.startswith("network error: ") and f"{url}/api/v1/log" in line and "404" in line
    url = _refusing()
    got = _ktl("log-info", "--log", url, home=tmp_path)
    assert got.returncode == 3, got.stderr
    line = _one_clean_line(got.stderr)
    assert url in line and "connection refused" in line


def test_a_ktl_logs_typed_error_is_still_quoted() -> None:
    body = json.dumps({"error": {"code": "entry_too_large", "message": "too\n big"}}).encode()
    err = answer_error("http://l/api/v1/entries", 413, "Payload Too Large", "application/json",
                       body)
    assert str(err) == ("http://l/api/v1/entries answered HTTP 413 Payload Too Large "
                        "(entry_too_large): too big")
    assert err.code == "entry_too_large" and err.status == 413
    other = answer_error("http://l/x", 500, "", "application/octet-stream", b"\x00" * 7)
    assert "with 7 bytes of application/octet-stream" in str(other) and other.code is None


def test_cause_looks_under_the_wrapping() -> None:
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    wrapped = requests.ConnectionError(OSError("pool"))
    wrapped.__context__ = refused
    assert cause(wrapped) == "connection refused (nothing listens there)"
    assert cause(requests.ConnectionError(socket.gaierror(-2, "Name or service not known"))) \
        == "the host name was not found"
    assert cause(requests.ReadTimeout("read timed out")) == "timed out"
    assert cause(requests.ConnectionError("odd")) == "the connection failed (ConnectionError)"
