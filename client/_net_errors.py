"""One line for a request that failed: what went wrong in words, never a library's internals.

`requests` wraps a refused connection in three layers of urllib3 objects
(``HTTPConnectionPool(host=..., port=...): Max retries exceeded ... NewConnectionError(
'<urllib3.connection.HTTPConnection object at 0x...>: ...')``), and a server that is not a ktl
log answers an error with its own page (an HTML 404). `cause` finds the reason under the
wrapping (connection refused, host name not found, timed out, ...); `answer_error` turns an
error answer into one line naming the URL and the status, quoting only a ktl log's own typed
error (`{"error": {"code", "message"}}`), never another server's page (issue 42, item 7).
"""

from __future__ import annotations

import errno
import json
import socket
import ssl

from client.errors import ServerError

__all__ = ["answer_error", "cause"]

MAX_CHAIN = 16
"""How deep `cause` looks through wrapped exceptions."""

_ERRNO_WORDS = {
    errno.ECONNREFUSED: "connection refused (nothing listens there)",
    errno.ECONNRESET: "connection reset by the server",
    errno.ECONNABORTED: "connection aborted",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.ETIMEDOUT: "timed out",
    errno.EPIPE: "connection closed by the server",
}


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and what it wraps (its cause, its context, and exceptions among its args, as
    urllib3's MaxRetryError keeps its reason), outermost first, at most MAX_CHAIN."""
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(seen) < MAX_CHAIN:
        e = todo.pop(0)
        if any(e is s for s in seen):
            continue
        seen.append(e)
        todo.extend(x for x in (e.__cause__, e.__context__, getattr(e, "reason", None), *e.args)
                    if isinstance(x, BaseException))
    return seen


def _words(e: BaseException) -> str | None:
    if isinstance(e, socket.gaierror):
        return "the host name was not found"
    if isinstance(e, ssl.SSLError):
        return f"the TLS handshake failed ({(e.reason or 'no reason given')[:80]})"
    if isinstance(e, TimeoutError) or type(e).__name__.endswith(("Timeout", "TimeoutError")):
        return "timed out"
    if isinstance(e, OSError) and e.errno in _ERRNO_WORDS:
        return _ERRNO_WORDS[e.errno]
    if isinstance(e, OSError) and e.strerror:
        return e.strerror[:120].lower()
    return None


def cause(exc: BaseException) -> str:
    """Why a request failed, in a few words (the innermost reason found; else the kind of
    failure, by its class name)."""
    chain = _chain(exc)
    for e in reversed(chain):
        words = _words(e)
        if words is not None:
            return words
    if any(type(e).__name__ in ("RemoteDisconnected", "ProtocolError") for e in chain):
        return "the server closed the connection without an answer"
    return f"the connection failed ({type(chain[-1]).__name__})"


def _what(content_type: str, body: bytes) -> str:
    kind = content_type.split(";")[0].strip().lower()
    if kind == "text/html" or body.lstrip()[:1] == b"<":
        return "an HTML page"
    if not body:
        return "an empty body"
    return f"{len(body)} bytes of {kind[:60] or 'an unnamed type'}"


def answer_error(url: str, status: int, reason: str, content_type: str,
                 body: bytes) -> ServerError:
    """The error for an answer of status `status`: a ktl log's typed error quoted (its code and
    message, capped), anything else named by its kind and never pasted."""
    head = f"{url} answered HTTP {status}" + (f" {reason[:60]}" if reason else "")
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        obj = None
    err = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(err, dict) and err.get("code") is not None:
        code = str(err["code"])[:64]
        message = " ".join(str(err.get("message"))[:500].split())
        return ServerError(f"{head} ({code}): {message}", status, code)
    return ServerError(f"{head} with {_what(content_type, body)}, not a ktl log's error answer "
                       "(is the URL a ktl log's?)", status, None)
