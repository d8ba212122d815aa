"""The HTTP front door of `ktl serve` and `ktl witness serve`: a gunicorn worker on asyncio.

gunicorn's thread workers read a request head in a pool thread with no deadline, so a
client sending one header line every few seconds holds a thread, and a few dozen such
clients hold them all. This worker reads every request head and body on one asyncio
event loop, where a slow connection costs a buffer and no thread, with:

* a deadline for the whole head (`FrontLimits.head_timeout`) and for the whole body
  (`body_timeout`), however slowly the bytes come; an idle keep-alive connection is
  closed after `keepalive`; a reader that does not take its answer after `write_timeout`;
* caps on open connections, per client address (`per_address`) and in all (`max_connections`);
* size limits answered before anything is read into memory: request line (414),
  head (431), body (413, from the app's ``MAX_CONTENT_LENGTH``).

Only a complete request reaches the WSGI app, in a thread of a bounded pool (a
submission waits there for its batch). gunicorn still runs the processes: one master,
``--workers`` of these, graceful stop on SIGTERM, `worker_exit` hooks.
"""

from __future__ import annotations

import asyncio
import io
import os
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

from gunicorn.workers.base import Worker

MAX_REQUEST_LINE = 8190
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100


@dataclass(frozen=True)
class FrontLimits:
    """Deadlines (seconds) and caps of the front door (per worker process)."""

    head_timeout: float = 10.0
    body_timeout: float = 60.0
    keepalive: float = 5.0
    write_timeout: float = 30.0
    per_address: int = 64
    max_connections: int = 8192
    max_body: int = 64 * 1024 * 1024


class _Refused(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class _Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes = b""

    def header(self, name: str) -> str | None:
        name = name.lower()
        values = [v for k, v in self.headers if k.lower() == name]
        return ",".join(values) if values else None


def _parse_head(head: bytes) -> _Request:
    lines = head[:-4].split(b"\r\n")
    line = lines[0]
    if len(line) > MAX_REQUEST_LINE:
        raise _Refused("414 URI Too Long", "request line too long")
    parts = line.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise _Refused("400 Bad Request", "malformed request line")
    try:
        method, target, version = (p.decode("ascii") for p in parts)
    except UnicodeDecodeError:
        raise _Refused("400 Bad Request", "request line is not ASCII") from None
    if not method.isalpha() or not method.isupper():
        raise _Refused("400 Bad Request", "malformed method")
    if len(lines) - 1 > MAX_HEADERS:
        raise _Refused("431 Request Header Fields Too Large", "too many header fields")
    headers: list[tuple[str, str]] = []
    for raw in lines[1:]:
        name, sep, value = raw.partition(b":")
        if not sep or not name or name != name.strip() or raw[:1] in (b" ", b"\t"):
            raise _Refused("400 Bad Request", "malformed header field")
        headers.append((name.decode("latin-1"), value.strip(b" \t").decode("latin-1")))
    return _Request(method, target, version, headers)


class FrontWorker(Worker):  # type: ignore[misc]
    """A gunicorn worker: asyncio reads requests, a thread pool runs the WSGI app."""

    limits = FrontLimits()

    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._pool = ThreadPoolExecutor(max(1, int(self.cfg.threads)),
                                        thread_name_prefix="ktl-wsgi")
        self._open: dict[str, int] = {}
        self._total = 0
        self._inflight = 0
        limit = getattr(self.wsgi, "config", {}).get("MAX_CONTENT_LENGTH")
        self._max_body = int(limit) if limit else self.limits.max_body
        servers = [await asyncio.start_server(self._serve, sock=s.sock, limit=MAX_HEAD_BYTES,
                                              backlog=2048)
                   for s in self.sockets]
        try:
            while self.alive:
                self.notify()
                if self.ppid != os.getppid():
                    self.log.info("parent changed, shutting down: %s", self)
                    break
                await asyncio.sleep(0.5)
        finally:
            for srv in servers:
                srv.close()
            deadline = time.monotonic() + float(self.cfg.graceful_timeout)
            while self._inflight and time.monotonic() < deadline:
                self.notify()
                await asyncio.sleep(0.05)
            self._pool.shutdown(wait=False, cancel_futures=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("", 0)
        addr = str(peer[0])
        if self._open.get(addr, 0) >= self.limits.per_address or (
                self._total >= self.limits.max_connections):
            writer.transport.abort()  # nothing read, nothing owed
            return
        self._open[addr] = self._open.get(addr, 0) + 1
        self._total += 1
        try:
            await self._requests(reader, writer, peer)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            self._total -= 1
            left = self._open[addr] - 1
            if left:
                self._open[addr] = left
            else:
                del self._open[addr]
            writer.transport.abort()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        peer: tuple[Any, ...]) -> None:
        first = True
        while self.alive:
            try:
                req = await self._read_request(reader, writer, first)
            except _Refused as e:
                await self._write(writer, _plain(e.status, e.message, close=True))
                return
            if req is None:
                return
            first = False
            keep = self._keep_alive(req)
            self._inflight += 1
            try:
                answer = await asyncio.get_running_loop().run_in_executor(
                    self._pool, self._call_app, req, peer, keep)
            finally:
                self._inflight -= 1
            await self._write(writer, answer)
            if not keep or not self.alive:
                return

    async def _read_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            first: bool) -> _Request | None:
        lim = self.limits
        try:
            if not first:  # an idle keep-alive connection waits at most `keepalive` s
                start = await asyncio.wait_for(reader.readexactly(1), lim.keepalive)
            else:
                start = b""
            head = start + await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                                  lim.head_timeout)
        except asyncio.IncompleteReadError:
            return None  # closed by the client, mid-head or between requests
        except asyncio.LimitOverrunError:
            raise _Refused("431 Request Header Fields Too Large",
                           "request head too large") from None
        except (TimeoutError, ValueError):
            return None  # the head did not come in time: nothing is owed
        req = _parse_head(head)
        if req.header("transfer-encoding") is not None:
            raise _Refused("411 Length Required", "send a Content-Length (no chunked bodies)")
        length_text = req.header("content-length")
        length = 0
        if length_text is not None:
            if not length_text.isdigit() or len(length_text) > 18:
                raise _Refused("400 Bad Request", "malformed Content-Length")
            length = int(length_text)
        if length > self._max_body:
            raise _Refused("413 Request Entity Too Large",
                           f"request body over {self._max_body} bytes")
        if length:
            if (req.header("expect") or "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            try:
                req.body = await asyncio.wait_for(reader.readexactly(length), lim.body_timeout)
            except (TimeoutError, asyncio.IncompleteReadError):
                return None
        return req

    @staticmethod
    def _keep_alive(req: _Request) -> bool:
        conn = (req.header("connection") or "").lower()
        if req.version == "HTTP/1.0":
            return "keep-alive" in conn
        return "close" not in conn

    async def _write(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        await asyncio.wait_for(writer.drain(), self.limits.write_timeout)

    # ---- in a pool thread
    def _call_app(self, req: _Request, peer: tuple[Any, ...], keep: bool) -> bytes:
        environ = self._environ(req, peer)
        got: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]],
                           exc_info: Any = None) -> Any:
            got["status"], got["headers"] = status, headers
            return lambda _data: None

        started = time.monotonic()
        try:
            result: Iterable[bytes] = self.wsgi(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        except Exception:
            self.log.exception("error handling request %s %s", req.method, req.target)
            return _plain("500 Internal Server Error", "internal error", close=True)
        status = str(got.get("status", "500 Internal Server Error"))
        headers = [(k, v) for k, v in got.get("headers", [])
                   if k.lower() not in ("content-length", "connection", "transfer-encoding")]
        if req.method == "HEAD":
            length, body = len(body), b""
        else:
            length = len(body)
        if self.cfg.accesslog:
            took = (time.monotonic() - started) * 1000
            print(f'{peer[0]} "{req.method} {req.target} {req.version}" {status.split()[0]} '
                  f"{length} {took:.1f}ms", file=sys.stdout, flush=True)
        lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers),
                 f"Content-Length: {length}",
                 "Connection: keep-alive" if keep else "Connection: close"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    def _environ(self, req: _Request, peer: tuple[Any, ...]) -> dict[str, Any]:
        path, _, query = req.target.partition("?")
        host = self.sockets[0].sock.getsockname() if self.sockets else ("", 0)
        environ: dict[str, Any] = {
            "REQUEST_METHOD": req.method,
            "SCRIPT_NAME": "",
            "PATH_INFO": unquote_to_bytes(path).decode("latin-1"),
            "QUERY_STRING": query,
            "RAW_URI": req.target,
            "SERVER_NAME": str(host[0]),
            "SERVER_PORT": str(host[1]),
            "SERVER_PROTOCOL": req.version,
            "REMOTE_ADDR": str(peer[0]),
            "REMOTE_PORT": str(peer[1]) if len(peer) > 1 else "",
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(req.body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }
        for name, value in req.headers:
            if "_" in name:
                continue  # never let Foo_Bar pass for Foo-Bar
            key = name.upper().replace("-", "_")
            if key == "CONTENT_TYPE":
                environ["CONTENT_TYPE"] = value
            elif key == "CONTENT_LENGTH":
                environ["CONTENT_LENGTH"] = value
            else:
                k = "HTTP_" + key
                environ[k] = f"{environ[k]},{value}" if k in environ else value
        return environ


def _plain(status: str, message: str, close: bool) -> bytes:
    body = (message + "\n").encode()
    head = (f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n")
    return head.encode("ascii") + body
