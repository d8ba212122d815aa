"""Talking to a log over HTTP: `LogAPI` (the interface) and `LogClient` (requests).

Nothing here trusts the log. Answers are size-capped while they stream in and
parsed strictly (`client.models`); proofs and checkpoints are returned for the
caller to verify (see `client.trust` and `client.receipts`). Blobs are checked
against the digest they were asked for before they are returned.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import socket
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import requests

from attest import HEX64_PATTERN
from client._deadline import Deadline, DeadlineAdapter
from client.errors import InputError, NetworkError, NotInLog, ServerError
from client.models import (
    MAX_CHECKPOINT_BYTES,
    EntryRecord,
    LogInfo,
    SubmitResult,
    parse_proof_answer,
)
from ledger.tlog import SearchAnswerError, SearchHit, SearchPage

MAX_JSON_BYTES = 1024 * 1024
MAX_TILE_BYTES = 256 * 32
MAX_BUNDLE_BYTES = 256 * (2 + 65535)
DEFAULT_MAX_BLOB_BYTES = 64 * 1024 * 1024
DEFAULT_TIMEOUT = (5.0, 60.0)  # connect, read (a submission waits for its batch)
#: Overall limit on one request, retries included: head and body, however slowly sent. A
#: command line wants an answer in well under a minute (issue 42: 120 s let a server dripping
#: a byte every 2 s hold each request two minutes); 45 s is still above what an honest log
#: takes to acknowledge a submission (its 30 s submit timeout and 10 s witness wait);
#: $KTL_DEADLINE sets another.
DEFAULT_DEADLINE = 45.0
DEFAULT_RETRIES = 3
MAX_BATCH = 1000
_RETRY_STATUS = frozenset({429, 502, 503, 504})
_HEX64 = re.compile(HEX64_PATTERN)
_TILE_PATH = re.compile(r"^tile/(?:[0-9]{1,2}|entries)/(?:x[0-9]{3}/)*[0-9]{3}(?:\.p/[0-9]{1,3})?$")


class LogAPI(Protocol):
    """What the client needs from a log; `LogClient` speaks it over HTTP."""

    def info(self) -> LogInfo: ...
    def checkpoint(self) -> bytes: ...
    def tile(self, path: str) -> bytes: ...
    def submit(self, entry_bytes: bytes) -> SubmitResult: ...
    def entry(self, index: int) -> EntryRecord: ...
    def inclusion_proof(self, index: int, tree_size: int) -> tuple[bytes, ...]: ...
    def consistency_proof(self, old_size: int, new_size: int) -> tuple[bytes, ...]: ...
    def search(
        self,
        *,
        digest: str | None = None,
        name: str | None = None,
        keyid: str | None = None,
        predicate_type: str | None = None,
        cursor: int | None = None,
        limit: int | None = None,
    ) -> SearchPage[SearchHit]: ...
    def put_blob(self, data: bytes) -> str: ...
    def get_blob(self, sha256_hex: str) -> bytes: ...


#: Largest index lookup answer read: 100,000 indices of up to 19 digits, and the proof.
MAX_LOOKUP_BYTES = 4 * 1024 * 1024


def _env_deadline() -> float:
    """`$KTL_DEADLINE` (seconds), else DEFAULT_DEADLINE."""
    text = os.environ.get("KTL_DEADLINE", "").strip()
    if not text:
        return DEFAULT_DEADLINE
    try:
        return float(text)
    except ValueError:
        raise InputError(f"KTL_DEADLINE={text[:40]!r} is not a number of seconds") from None


def _check_digest(sha256_hex: str) -> str:
    if not _HEX64.fullmatch(sha256_hex):
        raise InputError(f"{sha256_hex!r} is not a sha256 digest (64 lowercase hex digits)")
    return sha256_hex


@dataclass(frozen=True)
class Transport:
    """How a `LogClient` talks HTTP: (connect, read) timeouts, attempts per request, the
    overall deadline per request (None: $KTL_DEADLINE, else DEFAULT_DEADLINE) and the
    largest blob it reads."""

    timeout: tuple[float, float] = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    deadline: float | None = None
    max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES


@dataclass(frozen=True)
class _Call:
    """One HTTP request as sent, the most bytes its answer may have and the statuses that
    answer it."""

    method: str
    url: str
    cap: int
    params: Mapping[str, str | int] | None
    data: bytes | None
    headers: Mapping[str, str]
    ok: tuple[int, ...]


class LogClient:
    """A `LogAPI` over HTTP with timeouts, bounded retries and capped answers."""

    def __init__(
        self,
        base_url: str,
        *,
        session: requests.Session | None = None,
        transport: Transport | None = None,
        write_token: str | None = None,
    ) -> None:
        transport = transport or Transport()
        retries, deadline = transport.retries, transport.deadline
        if not re.match(r"^https?://[^\s/]+", base_url):
            raise InputError(f"log URL {base_url!r} must start with http:// or https://")
        if retries < 1 or retries > 10:
            raise InputError("retries must be between 1 and 10")
        if deadline is None:
            deadline = _env_deadline()
        if not 0 < deadline <= 3600:
            raise InputError("the request deadline must be in (0, 3600] seconds")
        self.base_url = base_url.rstrip("/")
        self.session = session or requests.Session()
        self.session.headers.setdefault("User-Agent", "ktl-client/0.1")
        if session is None:
            for prefix in ("http://", "https://"):
                self.session.mount(prefix, DeadlineAdapter())
        self.timeout = transport.timeout
        self.deadline = deadline
        self.retries = retries
        self.max_blob_bytes = transport.max_blob_bytes
        token = write_token if write_token is not None else os.environ.get("KTL_WRITE_TOKEN")
        self._auth = {"Authorization": f"Bearer {token}"} if token else {}

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> LogClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport -----------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        cap: int,
        params: Mapping[str, str | int] | None = None,
        body: tuple[bytes, str] | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> tuple[int, bytes]:
        """Send one request (`body`: the bytes and their content type) with retries within
        the deadline; the status and the answer (at most `cap` bytes)."""
        headers = {"Content-Type": body[1]} if body is not None else {}
        if method in ("POST", "PUT"):
            headers.update(self._auth)
        call = _Call(method, f"{self.base_url}/{path.lstrip('/')}", cap, params,
                     None if body is None else body[0], headers, ok)
        with Deadline(self.deadline) as deadline:
            return self._attempts(call, deadline)

    def _attempts(self, call: _Call, deadline: Deadline) -> tuple[int, bytes]:
        method, url, cap, params, data, headers, ok = (
            call.method, call.url, call.cap, call.params, call.data, call.headers, call.ok)
        last: Exception | None = None
        for attempt in range(self.retries):
            if attempt:
                time.sleep(min(0.2 * 2 ** (attempt - 1), 2.0, deadline.remaining()))
            if deadline.passed():
                break
            connect, read = self.timeout
            left = deadline.remaining()
            try:
                with self.session.request(
                    method, url, params=params, data=data, headers=dict(headers),
                    timeout=(min(connect, left), min(read, left)), stream=True,
                ) as resp:
                    body = self._read_capped(resp, cap, url)
                    status, said = resp.status_code, (resp.reason or "",
                                                      resp.headers.get("Content-Type", ""))
            except (requests.ConnectionError, requests.Timeout) as exc:
                last = exc
                continue
            except requests.RequestException as exc:
                if deadline.passed():
                    break
                raise NetworkError(f"request to {url} failed: {cause(exc)}") from exc
            if status in ok:
                return status, body
            if status in _RETRY_STATUS and attempt + 1 < self.retries:
                last = ServerError(f"{url} answered HTTP {status}", status)
                continue
            raise answer_error(url, status, *said, body)
        if deadline.passed():
            raise NetworkError(
                f"the log at {url} did not answer in full within {deadline.seconds:g} s "
                "(the overall deadline per request, head and body together)")
        why = cause(last) if last is not None and not isinstance(last, ServerError) else last
        raise NetworkError(f"could not reach the log at {url} after {self.retries} attempts: {why}")

    @staticmethod
    def _read_capped(resp: requests.Response, cap: int, url: str) -> bytes:
        declared = resp.headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > cap:
            raise ServerError(f"{url} answered {declared} bytes, more than the {cap} allowed")
        chunks: list[bytes] = []
        total = 0
        for chunk in resp.iter_content(chunk_size=65536):
            total += len(chunk)
            if total > cap:
                raise ServerError(f"{url} answered more than the {cap} bytes allowed")
            chunks.append(chunk)
        return b"".join(chunks)

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        _, body = self._request(method, path, cap=kw.pop("cap", MAX_JSON_BYTES), **kw)
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ServerError(f"{path} answered something that is not JSON: {exc}") from exc

    # -- LogAPI ---------------------------------------------------------------------

    def info(self) -> LogInfo:
        return LogInfo.from_json(self._json("GET", "api/v1/log"))

    def checkpoint(self) -> bytes:
        _, body = self._request("GET", "checkpoint", cap=MAX_CHECKPOINT_BYTES)
        return body

    def tile(self, path: str) -> bytes:
        if not _TILE_PATH.match(path):
            raise InputError(f"{path!r} is not a tile path")
        cap = MAX_BUNDLE_BYTES if path.startswith("tile/entries/") else MAX_TILE_BYTES
        _, body = self._request("GET", path, cap=cap)
        return body

    def submit(self, entry_bytes: bytes) -> SubmitResult:
        obj = self._json(
            "POST", "api/v1/entries", body=(entry_bytes, "application/json"), ok=(200, 201),
        )
        return SubmitResult.from_json(obj)

    def submit_batch(self, entries: list[bytes]) -> list[SubmitResult | ServerError]:
        """Submit several canonical entries at once; a per-entry error comes back in place."""
        if not 1 <= len(entries) <= MAX_BATCH:
            raise InputError(f"a batch holds 1 to {MAX_BATCH} entries")
        body = b'{"entries":[' + b",".join(entries) + b"]}"
        obj = self._json("POST", "api/v1/entries:batch", body=(body, "application/json"),
                         ok=(200, 201),
                         cap=MAX_JSON_BYTES * 16)
        results = obj.get("results") if isinstance(obj, dict) else None
        if not isinstance(results, list) or len(results) != len(entries):
            raise ServerError("the log's batch answer does not have one result per entry")
        out: list[SubmitResult | ServerError] = []
        for item in results:
            if isinstance(item, dict) and isinstance(item.get("error"), dict):
                err = item["error"]
                out.append(ServerError(f"entry rejected ({str(err.get('code'))[:64]}): "
                                       f"{str(err.get('message'))[:300]}", None,
                                       str(err.get("code"))[:64]))
            else:
                out.append(SubmitResult.from_json(item))
        return out

    def entry(self, index: int) -> EntryRecord:
        if index < 0:
            raise InputError("an entry index is a non-negative integer")
        try:
            return EntryRecord.from_json(self._json("GET", f"api/v1/entries/{index}"))
        except ServerError as exc:
            if exc.status == 404 and exc.code is not None:  # a ktl log's typed answer
                raise NotInLog(f"entry {index} is not in the log at {self.base_url} "
                               f"(the log answered: {exc})") from exc
            raise

    def inclusion_proof(self, index: int, tree_size: int) -> tuple[bytes, ...]:
        obj = self._json(
            "GET", "api/v1/proof/inclusion", params={"index": index, "tree_size": tree_size}
        )
        return parse_proof_answer(obj, "proof", "inclusion proof")

    def consistency_proof(self, old_size: int, new_size: int) -> tuple[bytes, ...]:
        obj = self._json(
            "GET", "api/v1/proof/consistency", params={"old_size": old_size, "new_size": new_size}
        )
        return parse_proof_answer(obj, "proof", "consistency proof")

    def search(
        self,
        *,
        digest: str | None = None,
        name: str | None = None,
        keyid: str | None = None,
        predicate_type: str | None = None,
        cursor: int | None = None,
        limit: int | None = None,
    ) -> SearchPage[SearchHit]:
        params: dict[str, str | int] = {}
        for key, value in (
            ("digest", digest), ("name", name), ("keyid", keyid),
            ("predicate_type", predicate_type), ("cursor", cursor), ("limit", limit),
        ):
            if value is not None:
                params[key] = value
        if not {"digest", "name", "keyid", "predicate_type"} & params.keys():
            raise InputError("search needs at least one of digest, name, keyid, predicate_type")
        answer = self._json("GET", "api/v1/search", params=params)
        try:
            return SearchPage.from_json(answer, SearchHit.from_json)
        except SearchAnswerError as exc:
            raise ServerError(f"log answer for {exc}") from exc

    def index_lookup(self, key: str, *, after: int | None = None, limit: int | None = None
                     ) -> Any:
        """`GET /api/v1/index/lookup`: a key's list with its proof, as JSON (not yet checked:
        `client.vindex.verified_lookup` verifies it); with `limit`, the page of `limit`
        indices above `after` (None: from the first)."""
        params: dict[str, Any] = {"key": key}
        if limit is not None:
            params["limit"] = limit
            if after is not None:
                params["after"] = after
        return self._json("GET", "api/v1/index/lookup", params=params, cap=MAX_LOOKUP_BYTES)

    def put_blob(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        self._request(
            "PUT", f"api/v1/blobs/sha256:{digest}", body=(data, "application/octet-stream"),
            cap=MAX_JSON_BYTES, ok=(200, 201),
        )
        return digest

    def get_blob(self, sha256_hex: str) -> bytes:
        _check_digest(sha256_hex)
        _, body = self._request(
            "GET", f"api/v1/blobs/sha256:{sha256_hex}", cap=self.max_blob_bytes
        )
        got = hashlib.sha256(body).hexdigest()
        if got != sha256_hex:
            raise ServerError(
                f"blob sha256:{sha256_hex} came back with digest sha256:{got}; refusing it"
            )
        return body


# -- one line for a request that failed ---------------------------------------------------
# `requests` wraps a refused connection in three layers of urllib3 objects
# (``HTTPConnectionPool(host=..., port=...): Max retries exceeded ... NewConnectionError(
# '<urllib3.connection.HTTPConnection object at 0x...>: ...')``), and a server that is not a
# ktl log answers an error with its own page (an HTML 404). `cause` finds the reason under
# the wrapping; `answer_error` turns an error answer into one line naming the URL and the
# status, quoting only a ktl log's own typed error (`{"error": {"code", "message"}}`), never
# another server's page (issue 42, item 7).

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
