"""JSON errors: ``{"error": {"code", "message"}}`` with the right HTTP status."""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

from ledger import LedgerError

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
    500: "internal_error",
    503: "unavailable",
}


class ApiError(LedgerError):
    """An error answered to an HTTP client: a stable snake_case code, a message, a status."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}

    def to_json(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}


def error_response(err: ApiError) -> Response:
    resp = jsonify(err.to_json())
    resp.status_code = err.status
    for k, v in err.headers.items():
        resp.headers[k] = v
    resp.headers["Cache-Control"] = "no-store"
    return resp


def install_error_handlers(app: Flask) -> None:
    """Every error, ours or werkzeug's, leaves as JSON."""

    @app.errorhandler(ApiError)
    def _api(err: ApiError) -> Response:
        return error_response(err)

    @app.errorhandler(HTTPException)
    def _http(err: HTTPException) -> Response:
        status = err.code or 500
        code = _HTTP_CODES.get(status, "http_error")
        message = err.description or err.name
        if status == 413:
            message = "request body too large for this endpoint"
        # RFC 9110 15.5.6: a 405 names the methods the resource allows (werkzeug sets Allow).
        kept = {k: v for k, v in err.get_headers() if k.lower() == "allow"}
        return error_response(ApiError(status, code, message, kept))

    @app.errorhandler(Exception)
    def _other(err: Exception) -> Response:
        app.logger.exception("unhandled error")
        return error_response(ApiError(500, "internal_error", "internal error; see the server log"))
