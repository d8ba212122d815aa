"""The tlog-tiles read path: ``/checkpoint``, ``/tile/<L>/<N>[.p/<W>]``, ``/tile/entries/...``."""

from __future__ import annotations

import gzip

from flask import Blueprint, Response, current_app, request

from ledger import LedgerError
from ledger.server._errors import ApiError
from ledger.server._service import LogService
from ledger.tlog.merkle import HASH_SIZE
from ledger.tlog.tiles import TILE_HEIGHT, TILE_WIDTH, encode_bundle, parse_tile_path

bp = Blueprint("ktl_readpath", __name__)

IMMUTABLE = "public, max-age=31536000, immutable"
PARTIAL = "public, max-age=10"
MUTABLE = "no-cache"


def _service() -> LogService:
    svc: LogService = current_app.extensions["ktl"]
    return svc


@bp.get("/checkpoint")
def checkpoint() -> Response:
    svc = _service()
    cp = svc.latest_checkpoint()
    if cp is None:
        if svc.witnessing is not None:
            raise ApiError(404, "empty_log", "no checkpoint of this log has met its witness "
                                             "quorum yet; it is published once the witnesses "
                                             "cosign")
        raise ApiError(404, "empty_log", "the log has no checkpoint yet: submit an entry first")
    resp = Response(cp.note, status=200, content_type="text/plain; charset=utf-8")
    resp.headers["Cache-Control"] = MUTABLE
    return resp


@bp.get("/tile/<path:rest>")
def tile(rest: str) -> Response:
    path = "tile/" + rest
    try:
        ref = parse_tile_path(path)
    except LedgerError as e:
        raise ApiError(404, "bad_tile_path", f"not a tile path: {e}") from None
    svc = _service()
    cp = svc.latest_checkpoint()
    size = 0 if cp is None else cp.size
    width = ref.width
    if ref.entries:
        have = size - ref.index * TILE_WIDTH
    else:
        have = (size >> (TILE_HEIGHT * ref.level)) - ref.index * TILE_WIDTH
    if have < width:
        raise ApiError(404, "tile_not_found", f"{path} is beyond the current tree (size {size})")
    data = svc.storage.read_file(path)
    if ref.entries:
        if data is None:
            start = ref.index * TILE_WIDTH
            data = encode_bundle([e.data for e in svc.storage.get_entries(start, start + width)])
    else:
        if data is None or len(data) != width * HASH_SIZE:
            data = svc.storage.read_tile(ref.level, ref.index)[: width * HASH_SIZE]
            if len(data) != width * HASH_SIZE:
                raise ApiError(500, "internal_error", f"stored hashes for {path} are missing")
    assert cp is not None  # have >= width >= 1 above
    svc.served.check(path, ref, data, cp, svc.reader(size))
    resp = Response(data, status=200, content_type="application/octet-stream")
    if ref.entries:
        # tlog-tiles: entry bundles SHOULD be compressed at the HTTP layer.
        resp.headers["Vary"] = "Accept-Encoding"
        if "gzip" in request.headers.get("Accept-Encoding", "").lower():
            resp.set_data(gzip.compress(data, compresslevel=1, mtime=0))
            resp.headers["Content-Encoding"] = "gzip"
    resp.headers["Cache-Control"] = IMMUTABLE if width == TILE_WIDTH else PARTIAL
    return resp
