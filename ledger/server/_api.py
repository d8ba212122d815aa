"""The JSON API under ``/api/v1`` (see ``ledger/openapi.json``)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
from importlib import resources
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from ledger.sequencer import Receipt, SequencerBusy, SequencerClosed, SequencerTimeout, Submission
from ledger.server._admit import admit, admit_body, parse_json
from ledger.server._budget import Budget
from ledger.server._config import check_body_size
from ledger.server._errors import ApiError
from ledger.server._params import hex64, int_arg, only_args, parse_int
from ledger.server._service import LogService
from ledger.storage import SEARCH_FIELDS
from ledger.vindex import MAX_PAGE, IndexKey, ListPage

bp = Blueprint("ktl_api", __name__, url_prefix="/api/v1")
IMMUTABLE = "public, max-age=31536000, immutable"


def _service() -> LogService:
    svc: LogService = current_app.extensions["ktl"]
    return svc


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _json(obj: Any, status: int = 200, cache: str = "no-cache") -> Response:
    resp = jsonify(obj)
    resp.status_code = status
    resp.headers["Cache-Control"] = cache
    return resp


# ---- guards for writes
def _require_auth(svc: LogService) -> None:
    token = svc.config.write_token
    if token is not None:
        got = request.headers.get("Authorization", "")
        if not (got.startswith("Bearer ") and hmac.compare_digest(got[7:].encode(), token.encode())):
            raise ApiError(
                401, "unauthorized", "writes need 'Authorization: Bearer <token>'",
                {"WWW-Authenticate": 'Bearer realm="ktl"'},
            )


def _spend(svc: LogService, budget: Budget, cost: float, what: str) -> None:
    """Charge the client's budget, and for anonymous writers their shared one too."""
    addr = request.remote_addr or "unknown"
    clients = [addr] if svc.config.write_token is not None else [addr, "*anonymous*"]
    for client in clients:
        wait = svc.budgets.take(budget, client, float(cost))
        if wait:
            everyone = client != addr
            if math.isinf(wait):
                raise ApiError(
                    413 if budget is not svc.entry_budget else 429, "over_budget",
                    f"this request costs {cost:g} {what}, more than the "
                    f"{budget.burst:g} a client may spend at once; split it",
                    {"Retry-After": "3600"} if budget is svc.entry_budget else {})
            retry = str(max(1, math.ceil(wait)))
            size = (f"{svc.config.blob_bytes_per_hour} bytes per hour"
                    if budget is svc.blob_budget else
                    f"{budget.rate:g} {what}/s (burst {budget.burst:g})")
            raise ApiError(
                429, "rate_limited",
                f"{'anonymous writers together have' if everyone else 'this address has'} used "
                f"the budget of {size}; retry in {retry} s", {"Retry-After": retry})


def _require_tokens(svc: LogService, entries: int, size: int) -> None:
    _spend(svc, svc.entry_budget, entries, "entries")
    _spend(svc, svc.byte_budget, size, "request bytes")


def _require_blob_budget(svc: LogService, size: int) -> None:
    _spend(svc, svc.blob_budget, size, "blob bytes")


def _require_type(expected: str) -> None:
    got = (request.mimetype or "").lower()
    if got != expected:
        raise ApiError(
            415, "unsupported_media_type",
            f"Content-Type must be {expected}, got {request.content_type or 'none'!r}",
        )


def _body(limit: int, what: str) -> bytes:
    check_body_size(request.content_length, limit, what)
    data = request.get_data(cache=False)
    check_body_size(len(data), limit, what)
    return data


# ---- answers
def _receipt_json(svc: LogService, r: Receipt) -> dict[str, Any]:
    proof = svc.receipt_proof(r)
    return {
        "index": r.index,
        "leaf_hash": r.leaf_hash.hex(),
        "tree_size": r.checkpoint.size,
        "inclusion_proof": [_b64(h) for h in proof],
        "checkpoint": r.checkpoint.note.decode("utf-8"),
        "duplicate": r.duplicate,
    }


def _failure(e: BaseException) -> ApiError:
    if isinstance(e, ApiError):
        return e
    if isinstance(e, SequencerClosed):
        return ApiError(503, "unavailable", str(e), {"Retry-After": "1"})
    if isinstance(e, SequencerBusy):
        return ApiError(503, "busy", str(e), {"Retry-After": "1"})
    if isinstance(e, SequencerTimeout):
        return ApiError(
            503, "timeout",
            f"{e}; it may still be logged: submitting the same entry again is safe and returns "
            "its index once it is",
            {"Retry-After": "1"},
        )
    current_app.logger.error("integration failed: %s", e)
    return ApiError(503, "integration_failed", f"the entry was not logged: {e}", {"Retry-After": "1"})


@bp.get("/log")
def log_info() -> Response:
    svc = _service()
    cp = svc.latest_checkpoint()
    body: dict[str, Any] = {
        "origin": svc.origin,
        "verifier_key": svc.verifier_key,
        "tree_size": 0 if cp is None else cp.size,
        "max_entry_bytes": svc.max_entry_bytes,
        "max_blob_bytes": svc.max_blob_bytes,
        "max_batch": svc.max_batch,
        "checkpoint": None if cp is None else cp.note.decode("utf-8"),
    }
    defaults = svc.config.reproduce_defaults()
    if defaults:
        body["reproduce"] = defaults
    return _json(body)


@bp.post("/entries")
def submit_entry() -> Response:
    svc = _service()
    _require_auth(svc)
    _require_type("application/json")
    body = _body(svc.config.max_entry_body, "log entry request")
    _require_tokens(svc, 1, len(body))
    sub = admit_body(body, svc.max_entry_bytes)
    (result,) = svc.submit([sub])
    if not isinstance(result, Receipt):
        raise _failure(result)
    return _json(_receipt_json(svc, result), 200 if result.duplicate else 201, "no-store")


@bp.post("/entries:batch")
def submit_batch() -> Response:
    svc = _service()
    _require_auth(svc)
    _require_type("application/json")
    body = _body(svc.config.max_batch_body, "batch request")
    obj = parse_json(body)
    if not isinstance(obj, dict) or set(obj) != {"entries"} or not isinstance(obj["entries"], list):
        raise ApiError(400, "invalid_batch", 'a batch is {"entries": [<log entry>, ...]}')
    items = obj["entries"]
    if not 1 <= len(items) <= svc.max_batch:
        raise ApiError(
            413 if items else 400, "batch_too_large" if items else "invalid_batch",
            f"a batch holds 1 to {svc.max_batch} entries, got {len(items)}",
        )
    _require_tokens(svc, len(items), len(body))
    slots: list[Submission | ApiError] = []
    for n, item in enumerate(items):
        try:
            slots.append(admit(item, svc.max_entry_bytes))
        except ApiError as e:
            if e.status == 400:
                # Not a log entry at all (the document's schema says so): the batch is
                # malformed, refused whole. An entry that is well formed but refused (a
                # signature, a statement, its size) gets its error in place.
                raise ApiError(400, "invalid_batch", f"entries[{n}]: {e.code}: {e.message}"
                               ) from None
            slots.append(e)
    subs = [s for s in slots if isinstance(s, Submission)]
    outcomes = iter(svc.submit(subs) if subs else [])
    results: list[dict[str, Any]] = []
    for s in slots:
        if isinstance(s, ApiError):
            results.append(s.to_json())
            continue
        got = next(outcomes)
        if isinstance(got, Receipt):
            results.append(_receipt_json(svc, got))
        else:
            results.append(_failure(got).to_json())
    return _json({"results": results}, 200, "no-store")


@bp.get("/entries/<raw_index>")
def get_entry(raw_index: str) -> Response:
    svc = _service()
    index = parse_int(raw_index, "index")
    size = svc.tree_size()
    entry = svc.storage.get_entry(index) if index < size else None
    if entry is None:
        raise ApiError(404, "entry_not_found", f"no entry at index {index} (tree size {size})")
    cp = svc.latest_checkpoint()
    assert cp is not None
    return _json({
        "index": index,
        "leaf_hash": entry.leaf_hash.hex(),
        "entry": json.loads(entry.data),
        "entry_b64": _b64(entry.data),
        "tree_size": cp.size,
        "inclusion_proof": [_b64(h) for h in svc.inclusion_proof(index, cp.size)],
        "checkpoint": cp.note.decode("utf-8"),
    })


@bp.get("/proof/inclusion")
def proof_inclusion() -> Response:
    svc = _service()
    only_args("index", "leaf_hash", "tree_size")
    fixed = "tree_size" in request.args
    tree_size = int_arg("tree_size", svc.tree_size(), lo=1)
    leaf = request.args.get("leaf_hash")
    if leaf is not None and "index" in request.args:
        raise ApiError(400, "invalid_parameter", "give index or leaf_hash, not both")
    if leaf is not None:
        found = svc.storage.find_leaf(bytes.fromhex(hex64(leaf, "leaf_hash")))
        if found is None:
            raise ApiError(404, "entry_not_found", "no entry with this leaf hash")
        index = found
    else:
        index = int_arg("index")
    if index >= tree_size:
        raise ApiError(422, "index_out_of_range", f"index {index} is not below tree_size {tree_size}")
    proof = svc.inclusion_proof(index, tree_size)
    (leaf_hash,) = svc.reader(tree_size).read_hashes([(0, index)])  # from the cached tile
    return _json({
        "index": index, "tree_size": tree_size, "leaf_hash": leaf_hash.hex(),
        "proof": [_b64(h) for h in proof],
    }, cache=IMMUTABLE if fixed else "no-cache")


@bp.get("/proof/consistency")
def proof_consistency() -> Response:
    svc = _service()
    old_size = int_arg("old_size")
    fixed = "new_size" in request.args
    new_size = int_arg("new_size", svc.tree_size())
    proof = svc.consistency_proof(old_size, new_size)
    return _json({"old_size": old_size, "new_size": new_size, "proof": [_b64(h) for h in proof]},
                 cache=IMMUTABLE if fixed else "no-cache")


@bp.get("/search")
def search() -> Response:
    svc = _service()
    only_args(*SEARCH_FIELDS, "cursor", "limit")
    given = [f for f in SEARCH_FIELDS if f in request.args]
    signed = given == ["digest", "keyid"]  # SEARCH_FIELDS order
    if len(given) != 1 and not signed:
        raise ApiError(
            400, "invalid_query", f"give exactly one of {', '.join(SEARCH_FIELDS)} to search "
            "by, or digest and keyid together"
        )
    values = {f: _search_value(f, request.args[f]) for f in given}
    cursor = int_arg("cursor", 0)
    limit = int_arg("limit", 50, lo=1, hi=svc.config.max_search_limit)
    if signed:
        # A signer's own entries about a digest: strangers' keys cannot pad this search.
        page = svc.storage.search_signed(values["digest"], values["keyid"], cursor, limit)
    else:
        page = svc.storage.search(given[0], values[given[0]], cursor, limit)
    size = svc.tree_size()
    results = [r.to_json() for r in page.results if r.index < size]
    return _json({"results": results, "next_cursor": page.next_cursor})


def _search_value(field: str, value: str) -> str:
    if field in ("digest", "keyid"):
        return hex64(value.lower() if len(value) == 64 else value, field)
    if not 1 <= len(value) <= 512:
        raise ApiError(400, "invalid_parameter", f"{field} must be 1 to 512 characters")
    return value


@bp.get("/index/lookup")
def index_lookup() -> Response:
    """Every entry naming a key, with the proof that the list is complete (docs/vindex.md);
    with `after` or `limit`, one page of the list ("Lookup answers in pages" there)."""
    svc = _service()
    only_args("key", "after", "limit")
    raw = request.args.get("key", "")
    try:
        key = IndexKey.parse(raw)
    except ValueError as e:
        raise ApiError(400, "invalid_parameter", f"key: {e}") from None
    if "after" not in request.args and "limit" not in request.args:
        answer, cp = svc.index_lookup(key)
        return _json({
            "key": key.text(),
            "size": answer.size,
            "indices": answer.indices,
            "proof": answer.proof.to_json(),
            "checkpoint": cp.note.decode("utf-8"),
        })
    after = int_arg("after") if "after" in request.args else None
    limit = int_arg("limit", MAX_PAGE, lo=1, hi=MAX_PAGE)
    answer, cp = svc.index_lookup(key, (after, limit))
    return _json(ListPage(key.text(), answer.size, after, answer.indices, answer.more,
                          answer.proof, cp.note.decode("utf-8")).to_json())


def _blob_digest(raw: str) -> str:
    if not raw.startswith("sha256:"):
        raise ApiError(400, "invalid_digest", "blob names are sha256:<64 lowercase hex>")
    return hex64(raw[7:], "blob digest")


@bp.put("/blobs/<raw>")
def put_blob(raw: str) -> Response:
    svc = _service()
    _require_auth(svc)
    _spend(svc, svc.entry_budget, 1, "entries")
    digest = _blob_digest(raw)
    _require_type("application/octet-stream")
    check_body_size(request.content_length, svc.max_blob_bytes, "blob")
    if request.content_length is not None:
        _require_blob_budget(svc, request.content_length)
    data = _body(svc.max_blob_bytes, "blob")
    if request.content_length is None:
        _require_blob_budget(svc, len(data))
    got = hashlib.sha256(data).hexdigest()
    if got != digest:
        raise ApiError(
            422, "digest_mismatch", f"the body hashes to sha256:{got}, not the sha256:{digest} named"
        )
    created = svc.storage.put_blob(digest, data)
    return _json({"digest": f"sha256:{digest}", "size": len(data), "created": created},
                 201 if created else 200, "no-store")


@bp.get("/blobs/<raw>")
def get_blob(raw: str) -> Response:
    svc = _service()
    digest = _blob_digest(raw)
    data = svc.storage.get_blob(digest)
    if data is None:
        raise ApiError(404, "blob_not_found", f"no blob sha256:{digest}")
    resp = Response(data, status=200, content_type="application/octet-stream")
    resp.headers["Cache-Control"] = IMMUTABLE
    resp.headers["ETag"] = f'"sha256:{digest}"'
    return resp


@bp.get("/openapi.json")
def openapi() -> Response:
    text = resources.files("ledger").joinpath("openapi.json").read_bytes()
    resp = Response(text, status=200, content_type="application/json")
    resp.headers["Cache-Control"] = "public, max-age=300"
    return resp
